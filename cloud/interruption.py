"""The cloud's warnings about instances, as EventBridge delivers them to an SQS queue
(Karpenter's interruption queue): EC2 Spot Instance Interruption Warnings (two minutes
before a spot instance is reclaimed), Rebalance Recommendations, AWS Health scheduled
changes for EC2, and instance state changes.

``parse_event`` reads one message body; anything else is ``MalformedEvent`` (the caller
logs it and deletes it). ``event_body`` writes the same shapes (the simulated cloud sends
them; tests use them)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol


class InterruptionKind(StrEnum):
    SPOT_INTERRUPTION = "SpotInterruption"  # reclaimed two minutes from now
    REBALANCE = "RebalanceRecommendation"  # at elevated risk of interruption: noted, not acted on
    SCHEDULED_CHANGE = "ScheduledChange"  # AWS Health: retirement, maintenance
    STATE_CHANGE = "StateChange"  # stopping, stopped, shutting-down or terminated


SPOT_NOTICE = 120.0  # a spot instance is reclaimed two minutes after its interruption warning
# The EC2 user guide ("Billing for interrupted Spot Instances", Linux): a spot instance EC2
# interrupts in its first hour is not billed; one its owner terminates is, each second used.
FREE_IF_RECLAIMED_WITHIN = 3600.0

# Instance states after which the node will not come back (Karpenter's list).
ENDING_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
_SPOT, _REBALANCE, _STATE = "EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation", "EC2 Instance State-change Notification"
_HEALTH = "AWS Health Event"


class MalformedEvent(ValueError):
    """A message that is not one of the events the queue is for."""


@dataclass(frozen=True)
class Interruption:
    id: str  # EventBridge's event id: the same event delivered twice is handled once
    kind: InterruptionKind
    instance_ids: tuple[str, ...]
    detail: str  # for logs and events: the action, the state or the health event type


class InterruptionQueue(Protocol):
    def receive(self, wait: float) -> list[tuple[str, str]]:
        """Up to ten messages as (receipt, body), waiting at most ``wait`` seconds for one."""
        ...

    def delete(self, receipt: str) -> None: ...


def parse_event(body: str) -> Interruption | None:
    """The interruption a message says, None for a well-formed event nodemanager does not act
    on (a state change to "running", a health event of another service)."""
    try:
        doc = json.loads(body)
    except (TypeError, ValueError) as exc:
        raise MalformedEvent(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("detail"), dict):
        raise MalformedEvent("not an EventBridge event (no detail)")
    event_id, kind, detail = doc.get("id"), doc.get("detail-type"), doc["detail"]
    if not isinstance(event_id, str) or not event_id:
        raise MalformedEvent("no event id")
    if kind in (_SPOT, _REBALANCE, _STATE):
        instance = detail.get("instance-id")
        if not isinstance(instance, str) or not instance.startswith("i-"):
            raise MalformedEvent(f"{kind}: no instance-id")
        if kind == _SPOT:
            return Interruption(event_id, InterruptionKind.SPOT_INTERRUPTION, (instance,), str(detail.get("instance-action", "")))
        if kind == _REBALANCE:
            return Interruption(event_id, InterruptionKind.REBALANCE, (instance,), "rebalance recommendation")
        state = detail.get("state")
        if not isinstance(state, str):
            raise MalformedEvent(f"{kind}: no state")
        return Interruption(event_id, InterruptionKind.STATE_CHANGE, (instance,), state) if state in ENDING_STATES else None
    if kind == _HEALTH:
        if detail.get("service") != "EC2" or detail.get("eventTypeCategory") != "scheduledChange":
            return None
        entities = detail.get("affectedEntities")
        if not isinstance(entities, list):
            raise MalformedEvent(f"{kind}: no affectedEntities")
        instances = tuple(e["entityValue"] for e in entities if isinstance(e, dict) and str(e.get("entityValue", "")).startswith("i-"))
        return Interruption(event_id, InterruptionKind.SCHEDULED_CHANGE, instances, str(detail.get("eventTypeCode", "")))
    raise MalformedEvent(f"unexpected detail-type {kind!r}")


def event_body(
    event_id: str, kind: InterruptionKind, instance_id: str, *, region: str = "us-east-1", zone: str = "", time: str = "1970-01-01T00:00:00Z"
) -> str:
    """A message as EventBridge writes it for ``kind`` (AWS's documented shapes)."""
    resources: Sequence[str] = [f"arn:aws:ec2:{zone or region}:instance/{instance_id}"]
    detail: dict[str, Any]
    source = "aws.ec2"
    if kind is InterruptionKind.SPOT_INTERRUPTION:
        detail_type, detail = _SPOT, {"instance-id": instance_id, "instance-action": "terminate"}
    elif kind is InterruptionKind.REBALANCE:
        detail_type, detail = _REBALANCE, {"instance-id": instance_id}
    elif kind is InterruptionKind.STATE_CHANGE:
        detail_type, detail = _STATE, {"instance-id": instance_id, "state": "stopping"}
    else:
        source, detail_type, resources = "aws.health", _HEALTH, []
        detail = {
            "eventArn": f"arn:aws:health:{region}::event/EC2/AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED/{event_id}",
            "service": "EC2",
            "eventTypeCode": "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
            "eventTypeCategory": "scheduledChange",
            "affectedEntities": [{"entityValue": instance_id}],
        }
    doc = {"version": "0", "id": event_id, "detail-type": detail_type, "source": source, "account": "123456789012", "time": time, "region": region}
    return json.dumps({**doc, "resources": list(resources), "detail": detail})
