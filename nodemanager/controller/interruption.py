"""The interruption controller: the cloud's warnings, acted on before the instance goes.

A spot interruption warning (two minutes' notice), an AWS Health scheduled change or an
instance stopping or terminating: the node's pods are planned elsewhere at once (the
scaler's what-if, as for drift), the capacity that needs is booted, and the node is marked
for termination, so the reaper cordons and drains it through the Eviction API while the
instance still runs. A spot warning also marks the offering unavailable for
``nodes.unavailableOfferingTTL``. A rebalance recommendation is recorded as an event only
(as Karpenter does). Not voluntary: budgets and do-not-disrupt do not apply.

A warned spot instance in its first hour is drained but not terminated: EC2 bills nothing
for a spot instance it interrupts in its first hour, and each second used for one its owner
terminates. The reaper waits for the reclaim, and terminates the instance itself if it has
not gone ``RECLAIM_GRACE`` after the two minutes. Karpenter terminates it at once.

Messages are deleted once handled; a malformed one is logged and deleted; an event
delivered twice (SQS delivers at least once) is handled once.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from typing import TYPE_CHECKING

from cloud.errors import CloudError
from cloud.interruption import FREE_IF_RECLAIMED_WITHIN, SPOT_NOTICE, Interruption, InterruptionKind, InterruptionQueue, MalformedEvent, parse_event
from nodemanager.model import CapacityType, Node, NodeState
from nodemanager.scaler.consolidation import relocate

if TYPE_CHECKING:
    from nodemanager.controller.boots import Boots
    from nodemanager.controller.state import ClusterState, DisruptionView
    from nodemanager.status.metrics import Metrics

log = logging.getLogger("nodemanager.interruption")

SEEN_KEPT = 10_000  # event ids remembered, to handle a redelivered event once
RECENT_KEPT = 20
RECLAIM_GRACE = 60.0  # past the notice, a warned instance not reclaimed yet is terminated


class InterruptionController:
    def __init__(self, state: ClusterState, queue: InterruptionQueue | None, metrics: Metrics, boots: Boots, disruption: DisruptionView) -> None:
        self.state = state
        self.metrics = metrics
        self.boots = boots
        self.disruption = disruption  # the nodes it keeps for pods (a what-if's snapshot)
        self.queue = queue
        self.wait = 0.0  # long-poll seconds: the service waits; virtual time must not
        self._seen: dict[str, None] = {}  # event ids, oldest first
        self.counts: Counter[str] = Counter()
        self.recent: deque[dict[str, object]] = deque(maxlen=RECENT_KEPT)

    def receive(self) -> list[tuple[str, str]]:
        """The next messages (outside the controller's lock: a long poll waits)."""
        if self.queue is None:
            return []
        try:
            return self.queue.receive(self.wait)
        except CloudError as exc:
            log.warning("reading the interruption queue failed, will retry: %s", exc)
            return []

    def handle(self, messages: list[tuple[str, str]], now: float) -> None:
        """Call with the controller's lock held."""
        if not messages:
            return  # (most polls: no index of the nodes is made for none)
        by_instance = {n.instance_id: n for n in self.state.nodes.values() if n.instance_id}
        for receipt, body in messages:
            self.counts["received"] += 1
            try:
                event = parse_event(body)
            except MalformedEvent as exc:
                self.counts["malformed"] += 1
                log.warning("interruption queue: deleting a malformed message (%s): %.200s", exc, body)
                self._delete(receipt)
                continue
            if event is not None and event.id not in self._seen:
                self._remember(event.id)
                for instance_id in event.instance_ids:
                    node = by_instance.get(instance_id)
                    if node is not None:  # another cluster's instance otherwise
                        self._act(node, event, now)
            self._delete(receipt)

    def _act(self, node: Node, event: Interruption, now: float) -> None:
        c = self.state
        self.counts[event.kind.value] += 1
        self.metrics.interruptions.labels(event.kind.value).inc()
        self.recent.append({"at": now, "kind": event.kind.value, "node": node.name, "instance_id": node.instance_id, "detail": event.detail})
        what = f"{event.kind.value} ({event.detail})" if event.detail else event.kind.value
        if event.kind is InterruptionKind.REBALANCE:
            log.info("node %s: %s; noted, not acted on", node.name, what)
            c.event("Node", node.name, "RebalanceRecommendation", "the cloud recommends moving off this spot instance", warning=True)
            return
        if event.kind is InterruptionKind.SPOT_INTERRUPTION and node.capacity_type is CapacityType.SPOT:
            c.keeper.mark((node.instance_type, CapacityType.SPOT, node.zone), now, "spot interruption warning")
        if node.name in c.marked or node.state in (NodeState.TERMINATING, NodeState.TERMINATED):
            return
        self.drain(node, what, now)
        reclaimed_at = now + SPOT_NOTICE
        first_hour = reclaimed_at - node.created_at < FREE_IF_RECLAIMED_WITHIN
        if event.kind is InterruptionKind.SPOT_INTERRUPTION and node.capacity_type is CapacityType.SPOT and first_hour:
            c.left_to_cloud[node.name] = reclaimed_at + RECLAIM_GRACE
            log.info("node %s: left for EC2 to reclaim once drained (a spot instance it interrupts in its first hour is not billed)", node.name)

    def drain(self, node: Node, what: str, now: float) -> None:
        """The node's pods planned elsewhere at once (the capacity that needs booted), the
        node marked for termination: the reaper drains it while the instance still runs.
        Call with the controller's lock held."""
        c = self.state
        log.warning("node %s (%s): %s; moving its pods now", node.name, node.instance_id, what)
        c.event("Node", node.name, "Interrupted", f"{what}: draining before the instance goes", warning=True)
        self.replace([node], now)
        c.mark_for_termination(node.name, what, "interruption")

    def replace(self, nodes: list[Node], now: float) -> tuple[str, ...]:
        """The nodes' pods planned elsewhere (the scaler's what-if without them) and the
        capacity that needs booted: the names of the nodes booted. Call with the lock held."""
        c = self.state
        serving = [n for n in nodes if n.state in (NodeState.AVAILABLE, NodeState.CLAIMED)]
        if not serving:
            return ()
        moved, why = relocate(c.what_if, c.price_of, c.snapshot(now, self.disruption.reserved), serving)
        if moved is None:
            names = ", ".join(n.name for n in serving)
            log.warning("node(s) %s: their pods have nowhere to go yet (%s); they wait once drained", names, why)
            return ()
        for spec in moved.replacements:
            self.boots.boot(spec, now)
        return tuple(spec.name for spec in moved.replacements)

    def _delete(self, receipt: str) -> None:
        self.state.lock.after_release(self._delete_now, receipt)

    def _delete_now(self, receipt: str) -> None:
        assert self.queue is not None
        try:
            self.queue.delete(receipt)
        except CloudError as exc:  # received again later: handled once all the same
            log.warning("deleting an interruption message failed: %s", exc)

    def _remember(self, event_id: str) -> None:
        if len(self._seen) >= SEEN_KEPT:
            del self._seen[next(iter(self._seen))]
        self._seen[event_id] = None

    def status(self) -> dict[str, object]:
        return {"queue": getattr(self.queue, "name", "simulated") if self.queue is not None else None, "counts": dict(self.counts), "recent": list(self.recent)}
