"""Capacity reservations read from EC2 (``DescribeCapacityReservations``) and the launch
parameters that target one: an instance launched into a reservation names it
(``CapacityReservationSpecification``); into a Capacity Block, it is also of the
``capacity-block`` market."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from nodemanager.model.reservation import Reservation, ReservationKind, ReservationQuery

log = logging.getLogger("nodemanager.cloud.aws")

_ACTIVE = {"Name": "state", "Values": ["active"]}


def describe_params(queries: Sequence[ReservationQuery]) -> list[dict[str, Any]]:
    """One call's arguments for every id, one for each tag query: active reservations only
    (a Capacity Block is active from its start to its end)."""
    ids = sorted({q.id for q in queries if q.id is not None})
    params: list[dict[str, Any]] = [{"CapacityReservationIds": ids, "Filters": [_ACTIVE]}] if ids else []
    for query in queries:
        if query.id is not None:
            continue
        filters: list[dict[str, Any]] = [_ACTIVE]
        if query.owner is not None:
            filters.append({"Name": "owner-id", "Values": [query.owner]})
        filters += [{"Name": "tag-key", "Values": [k]} if v == "*" else {"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(query.tags.items())]
        params.append({"Filters": filters})
    return params


UNKNOWN_ID = frozenset({"InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed"})


def describe(ec2: Any, queries: Sequence[ReservationQuery], now: float) -> list[Reservation]:
    """The reservations ``queries`` select, each once (paginated). An id EC2 does not know
    (a typo, a cancelled reservation) fails the call that names it: the ids are then asked
    one by one, and those it does not know are left out, with a warning."""
    found: dict[str, Reservation] = {}
    for params in describe_params(queries):
        try:
            records = _records(ec2, params)
        except ClientError as exc:
            ids = params.get("CapacityReservationIds", [])
            if exc.response.get("Error", {}).get("Code") not in UNKNOWN_ID or not ids:
                raise
            records = []
            for rid in ids:
                try:
                    records += _records(ec2, {**params, "CapacityReservationIds": [rid]})
                except ClientError as one:
                    if one.response.get("Error", {}).get("Code") not in UNKNOWN_ID:
                        raise
                    log.warning("capacity reservation %s: EC2 does not know it (%s); left out", rid, one.response["Error"]["Code"])
        for record in records:
            reservation = reservation_of(record, now)
            if reservation is not None:
                found[reservation.id] = reservation
    return [found[k] for k in sorted(found)]


def _records(ec2: Any, params: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    paginator = ec2.get_paginator("describe_capacity_reservations")
    return [record for page in paginator.paginate(**params) for record in page.get("CapacityReservations", [])]


LINUX = "Linux/UNIX"  # the platform of the images nodes boot (EKS-optimized or not)


def reservation_of(record: Mapping[str, Any], now: float) -> Reservation | None:
    """One ``CapacityReservation``; None for one nodes cannot launch into: not active, not of
    one zone's instances, for another platform than Linux/UNIX (Windows, RHEL, SUSE: EC2
    matches the image's platform) or for dedicated tenancy."""
    if record.get("State") != "active" or not record.get("AvailabilityZone") or not record.get("InstanceType"):
        return None
    if record.get("InstancePlatform", LINUX) != LINUX or record.get("Tenancy", "default") != "default":
        return None
    end = record.get("EndDate")
    kind = ReservationKind.CAPACITY_BLOCK if record.get("ReservationType") == "capacity-block" else ReservationKind.DEFAULT
    return Reservation(
        id=record["CapacityReservationId"],
        instance_type=record["InstanceType"],
        zone=record["AvailabilityZone"],
        total=int(record.get("TotalInstanceCount", 0)),
        available=int(record.get("AvailableInstanceCount", 0)),
        kind=kind,
        ends_at=end.timestamp() if hasattr(end, "timestamp") else None,
        tags={t["Key"]: t["Value"] for t in record.get("Tags", [])},
        owner=record.get("OwnerId", ""),
        seen_at=now,
    )


def targeting(reservation: str, capacity_block: bool) -> dict[str, Any]:
    """RunInstances parameters that launch into ``reservation`` and nowhere else."""
    params: dict[str, Any] = {"CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": reservation}}}
    if capacity_block:
        params["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    return params
