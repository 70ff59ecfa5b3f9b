"""Capacity reservations on EC2: read with DescribeCapacityReservations, launched into with
RunInstances targeting the reservation.

moto (5.2) implements neither DescribeCapacityReservations nor CreateCapacityReservation
(both raise NotImplementedError), so reading is tested with botocore's Stubber on EC2's real
request and answer shapes; launching is tested against moto, which accepts the targeting
parameters (and ignores them) and launches the instance with its tags."""

from __future__ import annotations

import datetime as dt

import boto3
import pytest
from aws_helpers import REGION, aws_cloud, inject, moto_env, moto_server
from botocore.stub import Stubber

from cloud.aws.reservations import describe_params
from cloud.base import RESERVATION_TAG, BootRequest
from cloud.errors import CloudError, InsufficientCapacity
from nodemanager.model import CapacityType
from nodemanager.model.reservation import CAPACITY_BLOCK_RECLAIM, ReservationKind, ReservationQuery

END = dt.datetime(2026, 12, 1, 11, 30, tzinfo=dt.UTC)


@pytest.fixture
def aws(monkeypatch):
    with moto_env(monkeypatch):
        yield boto3.client("ec2", region_name=REGION)


def record(rid: str, itype: str = "m5.xlarge", zone: str = "us-east-1a", **more: object) -> dict:
    return {
        "CapacityReservationId": rid,
        "OwnerId": "123456789012",
        "InstanceType": itype,
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": zone,
        "TotalInstanceCount": 20,
        "AvailableInstanceCount": 7,
        "State": "active",
        "InstanceMatchCriteria": "targeted",
        "Tags": [{"Key": "team", "Value": "web"}],
        **more,
    }


def test_ids_are_asked_in_one_call_and_each_tag_query_in_its_own():
    queries = [
        ReservationQuery("cr-0aaaaaaaaaaaaaaa1"),
        ReservationQuery("cr-0aaaaaaaaaaaaaaa2"),
        ReservationQuery(tags={"team": "ml", "gpu": "*"}, owner="123456789012"),
    ]
    by_id, by_tags = describe_params(queries)
    assert by_id == {"CapacityReservationIds": ["cr-0aaaaaaaaaaaaaaa1", "cr-0aaaaaaaaaaaaaaa2"], "Filters": [{"Name": "state", "Values": ["active"]}]}
    assert by_tags == {
        "Filters": [
            {"Name": "state", "Values": ["active"]},
            {"Name": "owner-id", "Values": ["123456789012"]},
            {"Name": "tag-key", "Values": ["gpu"]},
            {"Name": "tag:team", "Values": ["ml"]},
        ]
    }


def test_reservations_are_read_with_their_counts_kind_and_end(aws, catalog):
    cloud = aws_cloud(catalog)
    stubber = Stubber(cloud.ec2)
    block = record("cr-0bbbbbbbbbbbbbbb1", "p5.48xlarge", ReservationType="capacity-block", EndDate=END, TotalInstanceCount=2, AvailableInstanceCount=2)
    stubber.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [record("cr-0aaaaaaaaaaaaaaa1")]},
        describe_params([ReservationQuery("cr-0aaaaaaaaaaaaaaa1")])[0],
    )
    stubber.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [block, record("cr-0aaaaaaaaaaaaaaa1")]},
        describe_params([ReservationQuery(tags={"team": "ml"})])[0],
    )
    with stubber:
        found = cloud.reservations([ReservationQuery("cr-0aaaaaaaaaaaaaaa1"), ReservationQuery(tags={"team": "ml"})], 500.0)
    stubber.assert_no_pending_responses()
    odcr, capacity_block = found  # each once, by id
    assert (odcr.id, odcr.instance_type, odcr.zone, odcr.total, odcr.available, odcr.kind, odcr.ends_at) == (
        "cr-0aaaaaaaaaaaaaaa1", "m5.xlarge", "us-east-1a", 20, 7, ReservationKind.DEFAULT, None
    )  # fmt: skip
    assert (odcr.tags, odcr.owner, odcr.seen_at) == ({"team": "web"}, "123456789012", 500.0)
    assert capacity_block.kind is ReservationKind.CAPACITY_BLOCK
    assert capacity_block.ends_at == END.timestamp()
    assert capacity_block.reclaimed_at() == END.timestamp() - CAPACITY_BLOCK_RECLAIM


def test_a_reservation_nodes_cannot_launch_into_is_left_out(aws, catalog):
    cloud = aws_cloud(catalog)
    stubber = Stubber(cloud.ec2)
    unusable = [
        record("cr-0aaaaaaaaaaaaaaa1", State="expired"),
        record("cr-0aaaaaaaaaaaaaaa2", InstancePlatform="Windows"),
        record("cr-0aaaaaaaaaaaaaaa3", Tenancy="dedicated"),
    ]
    stubber.add_response("describe_capacity_reservations", {"CapacityReservations": [*unusable, record("cr-0aaaaaaaaaaaaaaa4")]})
    with stubber:
        found = cloud.reservations([ReservationQuery(tags={"team": "web"})], 0.0)
    assert [r.id for r in found] == ["cr-0aaaaaaaaaaaaaaa4"]


def test_no_query_makes_no_call_and_a_failed_read_is_a_cloud_error(aws, catalog):
    cloud = aws_cloud(catalog)
    stubber = Stubber(cloud.ec2)
    stubber.add_client_error("describe_capacity_reservations", "UnauthorizedOperation", "not allowed", 403)
    with stubber:
        assert cloud.reservations([], 0.0) == []
        with pytest.raises(CloudError, match="not allowed"):
            cloud.reservations([ReservationQuery("cr-0aaaaaaaaaaaaaaa1")], 0.0)


def test_an_id_ec2_does_not_know_is_left_out_and_the_others_still_read(aws, catalog, caplog):
    cloud = aws_cloud(catalog)
    stubber = Stubber(cloud.ec2)
    both = [ReservationQuery("cr-0aaaaaaaaaaaaaaa1"), ReservationQuery("cr-0aaaaaaaaaaaaaaa9")]
    active = [{"Name": "state", "Values": ["active"]}]
    stubber.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound", "no such reservation", 400, describe_params(both)[0])
    stubber.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [record("cr-0aaaaaaaaaaaaaaa1")]},
        {"CapacityReservationIds": ["cr-0aaaaaaaaaaaaaaa1"], "Filters": active},
    )
    stubber.add_client_error(
        "describe_capacity_reservations",
        "InvalidCapacityReservationId.NotFound",
        "no such reservation",
        400,
        {"CapacityReservationIds": ["cr-0aaaaaaaaaaaaaaa9"], "Filters": active},
    )
    with stubber, caplog.at_level("WARNING", logger="nodemanager.cloud.aws"):
        found = cloud.reservations(both, 0.0)
    assert [r.id for r in found] == ["cr-0aaaaaaaaaaaaaaa1"]
    assert "capacity reservation cr-0aaaaaaaaaaaaaaa9: EC2 does not know it" in caplog.text


def request(name: str, reservation: str, capacity_block: bool = False) -> BootRequest:
    return BootRequest(
        name,
        "general",
        "m5.xlarge",
        CapacityType.RESERVED,
        "us-east-1a",
        f"token-{name}",
        20 * 2**30,
        {},
        reservation=reservation,
        capacity_block=capacity_block,
    )


def test_a_reserved_node_is_launched_into_its_reservation_and_known_as_reserved_after(aws, catalog):
    cloud = aws_cloud(catalog)
    calls = inject(cloud, "RunInstances", lambda p: None)
    instance = cloud.boot(request("n1", "cr-0aaaaaaaaaaaaaaa1"))
    [run] = calls
    assert run["CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"] == "cr-0aaaaaaaaaaaaaaa1"
    assert "InstanceMarketOptions.MarketType" not in run
    assert (instance.capacity_type, instance.reservation) == (CapacityType.RESERVED, "cr-0aaaaaaaaaaaaaaa1")
    [listed] = cloud.list_instances()  # (after a restart: from its tag)
    assert listed.tags[RESERVATION_TAG] == "cr-0aaaaaaaaaaaaaaa1"
    assert (listed.capacity_type, listed.reservation) == (CapacityType.RESERVED, "cr-0aaaaaaaaaaaaaaa1")


def test_a_capacity_block_node_is_of_the_capacity_block_market_and_never_a_fleet(aws, catalog):
    cloud = aws_cloud(catalog)
    calls = inject(cloud, "*", lambda p: None)
    from nodemanager.model import LaunchOption, Resources

    alternatives = (LaunchOption("m5.xlarge", "us-east-1b", 0.0, Resources({"cpu": 4000}), {}),)
    cloud.boot(BootRequest(**{**request("n2", "cr-0bbbbbbbbbbbbbbb1", capacity_block=True).__dict__, "alternatives": alternatives}))
    assert [c["operation"] for c in calls if c["operation"] in ("RunInstances", "CreateFleet")] == ["RunInstances"]
    [run] = [c for c in calls if c["operation"] == "RunInstances"]
    assert run["InstanceMarketOptions.MarketType"] == "capacity-block"
    assert run["CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"] == "cr-0bbbbbbbbbbbbbbb1"


def test_a_full_reservation_is_a_capacity_error_for_its_offering(aws, catalog):
    from aws_helpers import error_reply

    cloud = aws_cloud(catalog)
    inject(cloud, "RunInstances", lambda p: error_reply("ReservationCapacityExceeded", 400, "The requested reservation does not have sufficient capacity"))
    with pytest.raises(InsufficientCapacity) as caught:
        cloud.boot(request("n3", "cr-0aaaaaaaaaaaaaaa1"))
    assert (caught.value.instance_type, caught.value.capacity_type, caught.value.zone) == ("m5.xlarge", CapacityType.RESERVED, "us-east-1a")


def test_launches_into_reservations_through_a_moto_server(monkeypatch, catalog):
    with moto_server(monkeypatch) as endpoint:
        cloud = aws_cloud(catalog, endpoint_url=endpoint)
        odcr = cloud.boot(request("n1", "cr-0aaaaaaaaaaaaaaa1"))
        block = cloud.boot(request("n2", "cr-0bbbbbbbbbbbbbbb1", capacity_block=True))
        listed = {i.node_name: (i.capacity_type, i.reservation) for i in cloud.list_instances()}
        assert listed == {"n1": (CapacityType.RESERVED, "cr-0aaaaaaaaaaaaaaa1"), "n2": (CapacityType.RESERVED, "cr-0bbbbbbbbbbbbbbb1")}
        assert cloud.boot(request("n1", "cr-0aaaaaaaaaaaaaaa1")).instance_id == odcr.instance_id  # idempotent over HTTP too
        cloud.terminate([odcr.instance_id, block.instance_id])
