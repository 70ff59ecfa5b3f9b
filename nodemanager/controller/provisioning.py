"""The provisioning controller (``loops.pool``, 7 s): read the cluster's changes, decide,
apply, bind.

A pass syncs the shared cache from the cluster's events, then computes a Decision from one
snapshot, when an input changed (or an idle grace ran out), and applies it: records for new
nodes and their boots, stops within the Empty budgets, the pods each node is for; then it
assumes each pod whose node is ready for it and binds it. The calls (a poll that lists,
device objects, binds, events) are made with the controller's lock released.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from nodemanager.cluster.base import BindError
from nodemanager.dra.model import AllocationResult
from nodemanager.model import NodeState, Pod, PodKey
from nodemanager.scaler import Decision

if TYPE_CHECKING:
    from nodemanager.cluster.base import ClusterSource
    from nodemanager.controller.boots import Boots
    from nodemanager.controller.dispenser import NodeDispenser
    from nodemanager.controller.reaper import Reaper
    from nodemanager.controller.reporting import Reporting
    from nodemanager.controller.state import ClusterState, DisruptionView
    from nodemanager.controller.sync import ClusterSync
    from nodemanager.status.metrics import Metrics

log = logging.getLogger("nodemanager.controller")


class Provisioner:
    def __init__(
        self,
        state: ClusterState,
        cluster: ClusterSource,
        metrics: Metrics,
        *,
        sync: ClusterSync,
        boots: Boots,
        reporting: Reporting,
        disruption: DisruptionView,
        reaper: Reaper,
        dispenser: NodeDispenser,
    ) -> None:
        self.state = state
        self.cluster = cluster
        self.metrics = metrics
        self.sync = sync
        self.boots = boots
        self.reporting = reporting
        self.disruption = disruption  # its budgets and the nodes it keeps for pods
        self.reaper = reaper
        self.dispenser = dispenser
        self.on_decision: Callable[[Decision, float], None] | None = None  # an observer of every decision (the simulator's)
        self._last_inputs: tuple | None = None  # what the last decision was computed from
        self._bind_waits: dict[PodKey, str] = {}  # pod -> why its bind waits (said once)

    def invalidate(self) -> None:
        """Decide again on the next pass, whether or not an input changed (new prices)."""
        self._last_inputs = None

    def run(self) -> None:
        c = self.state
        events = self.sync.poll()
        with c.lock:
            now = c.clock.now()
            self.sync.sync(now, events)
            self.boots.resume_boots()
            # Compute only when an input changed (or an idle grace ran out): the key is what
            # this decision is computed from, so whatever applying it changes counts as new.
            self.refresh_holds(now)
            holds = (frozenset(c.held), frozenset(c.on_the_way), frozenset(c.braked))
            inputs = (c.cache.generation, c.nodes.stamp, frozenset(c.keeper.active(now)), frozenset(c.backoff.active(now)), holds)
            due = inputs != self._last_inputs or any(now - since >= c.config.nodes.idle_grace for since in c.unneeded_since.values())
            read_devices = due and c.cache.has_claims()
        if read_devices:
            c.devices = self.cluster.devices()
        with c.lock:
            if due:
                self._last_inputs = inputs
                decision = self._compute(now)
                if self._judge(decision, now):  # pods held anew: no boot for them in this decision either
                    decision = self._compute(now)
                self._apply(decision, now)
            self._dispatch(now)
            self.reporting.refresh_gauges()
            self.reporting.refresh_bound(now)
            self.reporting.publish_status(now)

    def refresh_holds(self, now: float) -> None:
        """The ledger's holds and brakes as the next decision sees them."""
        c = self.state
        c.held = c.ledger.held(now, c.world, c.cache.is_waiting)
        c.on_the_way = c.ledger.on_the_way(c.booting_now)
        c.braked, begun = c.ledger.braked(now)
        for brake in begun:
            log.warning("pool %s: %s (until %.0f)", brake.pool, brake.describe(), brake.until)
            self.metrics.boot_brakes.labels(brake.pool).inc()

    def _compute(self, now: float) -> Decision:
        c = self.state
        snapshot = c.snapshot(now, self.disruption.reserved)
        began = time.perf_counter()
        decision = c.scaler.compute(snapshot, now)
        c.compute_ms.append((time.perf_counter() - began) * 1000)
        self.metrics.decisions.inc()
        c.last_decision = decision
        if self.on_decision is not None:
            self.on_decision(decision, now)
        return decision

    def _judge(self, decision: Decision, now: float) -> bool:
        """Nodes booted for pods and Ready now are judged (``BootLedger``): a pod the decision
        places on no node that exists, though a node was booted for it, is held. True if a
        pod was held anew (the decision is computed again without a boot for it)."""
        c = self.state
        if not any(map(c.is_ready, c.ledger.unjudged)):
            return False  # (most decisions: no node booted for pods became Ready since the last)
        new_nodes = {spec.name for spec in decision.start}
        existing = {pod: node for pod, node in decision.bindings.items() if node not in new_nodes}
        reasons = {**decision.waiting, **decision.unschedulable}
        targets = set(decision.bindings.values())

        def idle(name: str) -> bool:  # no pod there (DaemonSet and mirror pods aside), none placed there
            return name not in targets and not c.cache.usage(name).pods

        held = c.ledger.judge(now, ready=c.is_ready, idle=idle, waiting=c.cache.is_waiting, placed_on_existing=existing, reasons=reasons, world=c.world)
        for pod, hold in held:
            log.warning("pod %s: %s (held %.0fs at least)", pod, hold.reason, hold.until - now)
            c.event("Pod", pod, "NotTriggerScaleUp", hold.reason, warning=True)
            self.metrics.boot_holds.inc()
        if held:
            self.refresh_holds(now)
        return bool(held)

    def _apply(self, decision: Decision, now: float) -> None:
        c = self.state
        bound: dict[str, list[PodKey]] = {}
        for pod, node in decision.bindings.items():
            bound.setdefault(node, []).append(pod)
        reserved = self.disruption.reserved
        for name in sorted((bound.keys() | set(c.nodes.with_bindings())) & c.nodes.keys()):  # (a node neither holding nor given any needs nothing)
            pods = tuple(sorted(bound.get(name, ())))
            if name in reserved:
                pods = tuple(sorted({*pods, *self._still_moving(name)}))
            if c.nodes[name].bound_pods != pods:
                c.update_node(name, bound_pods=pods)
        for spec in decision.start:
            self.boots.create(spec, now)
        stops, deferred = self.disruption.within_budgets(decision.stop, now)
        for order in stops:
            c.mark_for_termination(order.name, order.reason, "idle")
        c.unneeded_since = dict(decision.unneeded_since)
        for order in deferred:  # still idle: stopped as soon as a budget allows
            c.unneeded_since[order.name] = now - c.config.nodes.idle_grace
        for pod, reason in decision.unschedulable.items():
            c.event("Pod", pod, "NotTriggerScaleUp", reason, warning=True)
        if decision.start or stops:
            c.recent_decisions.append(
                {
                    "at": now,
                    "booted": [
                        {
                            "node": s.name,
                            "pool": s.pool,
                            "instance_type": s.instance_type,
                            "capacity_type": s.capacity_type.value,
                            "zone": s.zone,
                            "pods": len(s.pods),
                        }
                        for s in decision.start
                    ],
                    "stopped": [{"node": o.name, "reason": o.reason} for o in stops],
                }
            )
        if stops:
            self.reaper.run(now)
        for spec in decision.start:
            self.boots.submit_boot(spec.name)

    def _dispatch(self, now: float) -> None:
        """Assume each pod whose node is ready for it on that node (it counts there from now
        on); the binds are made once the lock is released, then recorded."""
        c = self.state
        if not self.cluster.schedules_pods:
            return  # another scheduler binds; the pods' reservations end when they are bound
        binds: list[tuple[Pod, str]] = []
        for name in c.nodes.with_bindings():
            node = c.nodes[name]
            if node.state not in (NodeState.AVAILABLE, NodeState.CLAIMED):
                continue
            for key in node.bound_pods:
                pod = c.cache.pod(key)
                if pod is None or pod.node_name:
                    continue
                blocker = c.bind_blocker(pod, name)
                if blocker is not None:
                    self._log_wait(key, name, blocker)
                    continue
                if self.dispenser.request_node(key).node is None:
                    continue
                c.cache.assume(pod, name)
                binds.append((pod, name))
            remaining = tuple(k for k in node.bound_pods if (p := c.cache.pod(k)) is not None and not p.node_name)
            if name in self.disruption.reserved:
                remaining = tuple(sorted({*remaining, *self._still_moving(name)}))
            if remaining != node.bound_pods:
                c.update_node(name, bound_pods=remaining)
        if binds:
            c.lock.after_release(self._bind, binds, now, c.last_decision.allocations if c.last_decision else {})

    def _bind(self, binds: list[tuple[Pod, str]], now: float, allocations: Mapping[str, tuple[str, AllocationResult]]) -> None:
        """Outside the lock: the bind calls; then, under it, what each did. A pod whose bind
        failed is forgotten (waiting again) and placed again."""
        c = self.state
        outcomes = self.cluster.bind_all([(pod.key, name) for pod, name in binds])
        with c.lock:
            for (pod, name), outcome in zip(binds, outcomes, strict=True):
                key = pod.key
                if isinstance(outcome, Exception):
                    why = outcome if isinstance(outcome, BindError) else f"binding {key} to {name} failed: {outcome!r}"
                    log.warning("%s; the pod will be placed again", why)
                    c.cache.forget(key)
                    self.dispenser.return_node(name, unused=True)
                    continue
                c.cache.finish_binding(key, now)
                self._bind_waits.pop(key, None)
                log.info("bound %s to %s (waited %.0fs)", key, name, now - pod.created_at)
                c.event("Pod", key, "Scheduled", f"Successfully assigned {key} to {outcome}")
                for claim in pod.claims:
                    if claim in allocations and allocations[claim][0] == name:
                        c.lock.after_release(self.cluster.allocate_claim, claim, name, allocations[claim][1])

    def _still_moving(self, name: str) -> tuple[PodKey, ...]:
        """The pods replacement ``name`` was booted for that still run where they are: it
        keeps them, so that once they are evicted they come to it (not to wherever else there
        is room, leaving it idle: a boot of no use)."""
        c = self.state
        return tuple(k for k in c.nodes[name].bound_pods if (p := c.cache.pod(k)) is not None and p.node_name and p.node_name != name)

    def _log_wait(self, pod: PodKey, node: str, why: str) -> None:
        said = f"{node}: {why}"
        if self._bind_waits.get(pod) != said:
            self._bind_waits[pod] = said
            log.info("not binding %s to %s yet: %s", pod, node, why)
