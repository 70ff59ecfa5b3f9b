"""A workload file's ``reservations``: capacity reservations the simulated cloud holds, for
``simulate`` to play a provider.yaml's ``capacityReservations`` against.

    reservations:
      - id: cr-0123456789abcdef0   # what provider.yaml's capacityReservations select it by
        instanceType: m5.xlarge
        zone: us-east-1a
        count: 20
        type: default              # or capacity-block (which must give an end)
        start: 0                   # when it becomes active (default 0)
        end: 6h                    # when it ends (default: never)
        tags: {team: web}
        ownerId: "123456789012"
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from nodemanager.durations import parse_duration
from nodemanager.errors import InvalidManifest
from nodemanager.model.reservation import Reservation, ReservationKind

_KEYS = {"id", "instanceType", "zone", "count", "type", "start", "end", "tags", "ownerId"}
MAX_RESERVED = 100_000  # instances in one reservation


def parse_reservation(value: Any, where: str) -> tuple[Reservation, float]:
    """One entry: the reservation (as the cloud describes it while active) and its start."""
    if not isinstance(value, Mapping):
        raise InvalidManifest(where, f"expected a mapping, got {type(value).__name__}")
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise InvalidManifest(f"{where}.{unknown[0]}", f"unknown key (known: {', '.join(sorted(_KEYS))})")
    rid = value.get("id")
    if not isinstance(rid, str) or not re.fullmatch(r"cr-[0-9a-f]{8,17}", rid):
        raise InvalidManifest(f"{where}.id", f"expected a reservation id like cr-0123456789abcdef0, got {rid!r}")
    for key in ("instanceType", "zone"):
        if not isinstance(value.get(key), str) or not value[key]:
            raise InvalidManifest(f"{where}.{key}", f"required: a string, got {value.get(key)!r}")
    count = value.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_RESERVED:
        raise InvalidManifest(f"{where}.count", f"must be an integer from 1 to {MAX_RESERVED:,}, got {count!r}")
    kind = value.get("type", ReservationKind.DEFAULT.value)
    if kind not in ReservationKind._value2member_map_:
        raise InvalidManifest(f"{where}.type", f"expected default or capacity-block, got {kind!r}")
    start, end = _time(value, "start", where, 0.0), _time(value, "end", where, None)
    if end is not None and end <= start:
        raise InvalidManifest(f"{where}.end", f"must be after start ({start:g}s), got {end:g}s")
    if kind == ReservationKind.CAPACITY_BLOCK and end is None:
        raise InvalidManifest(f"{where}.end", "required for a capacity-block: a Capacity Block always ends")
    tags = value.get("tags") or {}
    if not isinstance(tags, Mapping):
        raise InvalidManifest(f"{where}.tags", f"expected a mapping, got {type(tags).__name__}")
    owner = value.get("ownerId", "")
    reservation = Reservation(
        rid, value["instanceType"], value["zone"], count, count, ReservationKind(kind), end, {str(k): str(v) for k, v in tags.items()}, str(owner)
    )
    return reservation, start


def _time(value: Mapping[str, Any], key: str, where: str, default: float | None) -> float | None:
    if value.get(key) is None:
        return default
    try:
        return parse_duration(value[key])
    except ValueError as exc:
        raise InvalidManifest(f"{where}.{key}", str(exc)) from None
