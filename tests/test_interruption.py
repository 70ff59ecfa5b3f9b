"""The cloud's warnings: EventBridge message shapes, the simulated cloud's two-minute spot
warning acted on end to end, malformed and redelivered messages, and the SQS queue on moto,
in process and as a server on 127.0.0.1, under the EC2 provider."""

from __future__ import annotations

import json
import logging

import boto3
import pytest
from aws_helpers import aws_cloud, moto_env
from builders import SPOT
from harness import Harness, arrive
from moto.server import ThreadedMotoServer
from test_cli_service import free_port

from cloud.interruption import SPOT_NOTICE, InterruptionKind, MalformedEvent, event_body, parse_event
from nodemanager.config.schema import Pool
from nodemanager.controller.interruption import RECLAIM_GRACE
from nodemanager.model import CapacityType, NodeState

# AWS's documented example (EC2 User Guide, "Spot Instance interruption notices").
AWS_EXAMPLE = """{
    "version": "0",
    "id": "12345678-1234-1234-1234-123456789012",
    "detail-type": "EC2 Spot Instance Interruption Warning",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": "yyyy-mm-ddThh:mm:ssZ",
    "region": "us-east-2",
    "resources": ["arn:aws:ec2:us-east-2a:instance/i-1234567890abcdef0"],
    "detail": {"instance-id": "i-1234567890abcdef0", "instance-action": "terminate"}
}"""


# -- message shapes ----------------------------------------------------------------------------


def test_the_documented_spot_warning_parses() -> None:
    event = parse_event(AWS_EXAMPLE)
    assert event is not None
    assert (event.id, event.kind, event.instance_ids, event.detail) == (
        "12345678-1234-1234-1234-123456789012",
        InterruptionKind.SPOT_INTERRUPTION,
        ("i-1234567890abcdef0",),
        "terminate",
    )


@pytest.mark.parametrize("kind", list(InterruptionKind))
def test_every_kind_round_trips_through_its_eventbridge_shape(kind: InterruptionKind) -> None:
    event = parse_event(event_body("e1", kind, "i-0abc", zone="us-east-1b"))
    assert event is not None
    assert (event.kind, event.instance_ids) == (kind, ("i-0abc",))


def test_events_nodemanager_does_not_act_on_parse_to_nothing() -> None:
    running = json.loads(event_body("e1", InterruptionKind.STATE_CHANGE, "i-0abc"))
    running["detail"]["state"] = "running"
    assert parse_event(json.dumps(running)) is None
    other = json.loads(event_body("e2", InterruptionKind.SCHEDULED_CHANGE, "i-0abc"))
    other["detail"]["service"] = "RDS"
    assert parse_event(json.dumps(other)) is None


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "no detail"),
        ('{"id": "x", "detail-type": "Something Else", "detail": {}}', "unexpected detail-type"),
        ('{"id": "x", "detail-type": "EC2 Spot Instance Interruption Warning", "detail": {}}', "no instance-id"),
        ('{"detail-type": "EC2 Spot Instance Interruption Warning", "detail": {"instance-id": "i-1"}}', "no event id"),
    ],
)
def test_malformed_messages_say_why(body: str, needle: str) -> None:
    with pytest.raises(MalformedEvent, match=needle):
        parse_event(body)


# -- end to end on the simulated cloud ---------------------------------------------------------


def spot_pool() -> Pool:
    return Pool(name="general", instance_types=["a.large", "m.*"], capacity_types=[SPOT])


def test_a_spot_warning_moves_the_pods_before_the_instance_goes() -> None:
    h = Harness(spot_pool(), arrivals=[arrive(f"p{i}", cpu="500m", memory="1Gi") for i in range(3)], idle_grace=30)
    h.run(120)
    [first] = set(h.bound().values())
    doomed = h.controller.state.nodes[first]
    h.cloud.warn(doomed.instance_id)
    warned_at = h.clock.now()
    moved_at = None
    while h.clock.now() < warned_at + SPOT_NOTICE:
        h.driver.step()
        if moved_at is None and h.bound() and first not in h.bound().values() and len(h.bound()) == 3:
            moved_at = h.clock.now()
    assert moved_at is not None
    assert moved_at < warned_at + SPOT_NOTICE  # every pod runs elsewhere before the reclaim
    assert len(h.cloud.interruptions) == 0  # handled and deleted
    assert h.controller.state.keeper.is_unavailable((doomed.instance_type, CapacityType.SPOT, doomed.zone), h.clock.now())
    assert h.controller.interruption.counts["SpotInterruption"] == 1
    h.run(60)
    assert first not in [i.node_name for i in h.cloud.list_instances()]


def _ends(h: Harness, instance_id: str) -> list[str]:
    return [e.kind for e in h.cloud.events if e.instance_id == instance_id and e.kind in ("terminated", "spot-interrupted")]


def test_a_spot_instance_warned_in_its_first_hour_is_drained_and_left_for_ec2_to_reclaim() -> None:
    """EC2 bills nothing for a spot instance it interrupts in its first hour, and each second
    for one its owner terminates: the node is drained at once and its instance left to go."""
    h = Harness(spot_pool(), arrivals=[arrive(f"p{i}", cpu="500m", memory="1Gi") for i in range(3)], idle_grace=30)
    h.run(120)
    [first] = set(h.bound().values())
    doomed = h.controller.state.nodes[first]
    h.cloud.warn(doomed.instance_id)
    h.run(SPOT_NOTICE - 10)
    assert first not in h.bound().values()  # drained: its pods run elsewhere before the reclaim
    assert len(h.bound()) == 3
    assert _ends(h, doomed.instance_id) == []  # not terminated by us
    h.run(60)
    assert _ends(h, doomed.instance_id) == ["spot-interrupted"]
    assert h.controller.state.nodes[first].state is NodeState.TERMINATED
    assert ("Node", first, "Reclaimed") in [(k, key, r) for k, key, r, _ in h.cluster.recorded]
    billed = {i.instance_id: seconds for i, seconds in h.cloud.billed()}
    assert billed[doomed.instance_id] == 0.0


def test_a_spot_instance_warned_after_its_first_hour_is_terminated_once_drained() -> None:
    h = Harness(spot_pool(), arrivals=[arrive("p0", cpu="500m", memory="1Gi")])
    h.run(3600)
    [first] = set(h.bound().values())
    doomed = h.controller.state.nodes[first]
    h.cloud.warn(doomed.instance_id)
    h.run(30)
    assert _ends(h, doomed.instance_id) == ["terminated"]  # billed either way: no reason to wait


def test_a_warned_instance_the_cloud_does_not_reclaim_is_terminated_after_the_notice_and_a_grace() -> None:
    h = Harness(spot_pool(), arrivals=[arrive("p0", cpu="500m", memory="1Gi")])
    h.run(120)
    [first] = set(h.bound().values())
    doomed = h.controller.state.nodes[first]
    h.cloud.interruptions.send(event_body("warned-only", InterruptionKind.SPOT_INTERRUPTION, doomed.instance_id))  # no reclaim follows
    h.run(SPOT_NOTICE + RECLAIM_GRACE - 15)
    assert _ends(h, doomed.instance_id) == []
    assert first not in h.bound().values()
    h.run(30)
    assert _ends(h, doomed.instance_id) == ["terminated"]
    assert h.controller.state.nodes[first].state is NodeState.TERMINATED


def test_a_malformed_message_is_deleted_with_a_warning_and_a_redelivered_event_handled_once(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness(spot_pool(), arrivals=[arrive("p0", cpu="500m", memory="1Gi")], idle_grace=30)
    h.run(120)
    [node] = [n for n in h.controller.state.nodes.values() if n.state is not NodeState.TERMINATED]
    h.cloud.interruptions.send("{broken")
    body = event_body("same-event", InterruptionKind.REBALANCE, node.instance_id)
    h.cloud.interruptions.send(body)
    h.cloud.interruptions.send(body)  # SQS delivers at least once
    with caplog.at_level(logging.WARNING, logger="nodemanager.interruption"):
        h.run(5)
    assert "deleting a malformed message (not JSON" in caplog.text
    assert len(h.cloud.interruptions) == 0
    assert h.controller.interruption.counts["RebalanceRecommendation"] == 1
    assert h.controller.interruption.counts["received"] == 3
    assert ("Node", node.name, "RebalanceRecommendation") in [(k, key, r) for k, key, r, _ in h.cluster.recorded]
    assert node.name not in h.controller.state.marked  # a recommendation is not acted on


# -- SQS on moto ---------------------------------------------------------------------------------


@pytest.fixture
def aws(monkeypatch):
    with moto_env(monkeypatch):
        yield


def test_the_sqs_queue_receives_and_deletes_on_moto(aws, catalog) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="nodemanager-interruptions")["QueueUrl"]
    cloud = aws_cloud(catalog, interruption_queue="nodemanager-interruptions")
    assert cloud.interruptions is not None
    sqs.send_message(QueueUrl=url, MessageBody=AWS_EXAMPLE)
    [(receipt, body)] = cloud.interruptions.receive(0)
    event = parse_event(body)
    assert event is not None
    assert event.instance_ids == ("i-1234567890abcdef0",)
    cloud.interruptions.delete(receipt)
    assert int(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"]) == 0
    assert aws_cloud(catalog).interruptions is None  # no queue named: none read


def test_a_scheduled_change_on_moto_drains_the_node_through_the_ec2_provider(aws, catalog) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="interruptions")["QueueUrl"]
    clouds = []

    def factory(clock):
        clouds.append(aws_cloud(catalog, clock=clock, interruption_queue="interruptions"))
        return clouds[0]

    pool = Pool(name="general", instance_types=["m5.large", "m5.xlarge"], capacity_types=[CapacityType.ON_DEMAND], zones=["us-east-1a", "us-east-1b"])
    h = Harness(pool, arrivals=[arrive("p1", cpu="500m")], catalog=catalog, cloud=factory, register_delay=5)
    h.run(60)
    [first] = h.bound().values()
    sqs.send_message(QueueUrl=url, MessageBody=event_body("health-1", InterruptionKind.SCHEDULED_CHANGE, h.controller.state.nodes[first].instance_id))
    sqs.send_message(QueueUrl=url, MessageBody="<not an event>")
    h.run(90)
    [second] = h.bound().values()
    assert second != first
    assert h.controller.interruption.counts["ScheduledChange"] == 1
    assert h.controller.interruption.counts["malformed"] == 1
    assert int(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"]) == 0


@pytest.mark.heavy
def test_a_spot_warning_over_http_from_a_moto_server_drains_the_node(monkeypatch, catalog) -> None:
    """The same over HTTP: EC2 and SQS of a moto server on 127.0.0.1, the AWS provider's
    clients, EventBridge's message shape; the offering is skipped afterwards."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint)
        url = sqs.create_queue(QueueName="interruptions")["QueueUrl"]
        clouds = []

        def factory(clock):
            clouds.append(aws_cloud(catalog, clock=clock, endpoint_url=endpoint, interruption_queue="interruptions"))
            return clouds[0]

        pool = Pool(name="general", instance_types=["m5.large", "m5.xlarge"], capacity_types=[CapacityType.SPOT], zones=["us-east-1a", "us-east-1b"])
        h = Harness(pool, arrivals=[arrive("p1", cpu="500m")], catalog=catalog, cloud=factory, register_delay=5)
        h.run(60)
        [first] = h.bound().values()
        doomed = h.controller.state.nodes[first]
        sqs.send_message(QueueUrl=url, MessageBody=event_body("spot-1", InterruptionKind.SPOT_INTERRUPTION, doomed.instance_id, zone=doomed.zone))
        h.run(60)
        [second] = h.bound().values()
        assert second != first
        assert h.controller.state.keeper.is_unavailable((doomed.instance_type, CapacityType.SPOT, doomed.zone), h.clock.now())
        assert (h.controller.state.nodes[second].instance_type, h.controller.state.nodes[second].zone) != (doomed.instance_type, doomed.zone)
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
        assert int(attributes["ApproximateNumberOfMessages"]) == 0
    finally:
        server.stop()
