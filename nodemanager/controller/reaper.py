"""The reaper: marked nodes are drained, their instances terminated, and the end confirmed.

A pass decides under the controller's lock what each marked node needs (nothing but a
record change; a drain first; the termination; only the confirmation) and makes the calls
once the lock is released, node by node, then records what they did under the lock again.
A node whose calls are in flight is left out of other passes until they are recorded, as
a node whose boot is in flight is.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from cloud.base import InstanceState
from cloud.errors import CloudError, NotFound, Throttled
from nodemanager.controller.labels import VOLUNTARY
from nodemanager.model import InstanceId, NodeState

if TYPE_CHECKING:
    from cloud.base import CloudClient
    from nodemanager.cluster.base import ClusterSource
    from nodemanager.controller.state import ClusterState
    from nodemanager.status.metrics import Metrics

log = logging.getLogger("nodemanager.controller")


class Reaped(Enum):
    DRAINING = "draining"  # pods still leaving: terminated on a later pass
    FAILED = "failed"  # the termination failed: tried again next pass
    THROTTLED = "throttled"  # the cloud does not answer: this pass stops here
    RECLAIMING = "reclaiming"  # drained, left for the cloud to reclaim: looked at again next pass
    TERMINATING = "terminating"  # asked to terminate; not confirmed yet
    GONE = "gone"  # the cloud says the instance is terminated


@dataclass(frozen=True)
class Reaping:
    name: str
    instance_id: InstanceId
    reason: str
    label: str
    drain: bool  # cordon and evict its pods first
    asked: bool  # its termination was asked for on an earlier pass: confirm it only
    left_to_cloud: bool = False  # a warned spot instance EC2 reclaims for nothing: drained, not terminated


class Reaper:
    def __init__(self, state: ClusterState, cloud: CloudClient, cluster: ClusterSource, metrics: Metrics) -> None:
        self.state = state
        self.cloud = cloud
        self.cluster = cluster
        self.metrics = metrics
        self.in_flight: set[str] = set()  # nodes whose calls are made or not yet recorded

    def run(self, now: float) -> None:
        with self.state.lock:
            work = self._work(now)
            self.in_flight.update(r.name for r in work)
        if work:
            self.state.lock.after_release(self._call, work)

    def _work(self, now: float) -> list[Reaping]:
        c = self.state
        work = []
        for name, (reason, label) in sorted(c.marked.items()):
            node = c.nodes.get(name)
            if node is None or node.state is NodeState.TERMINATED:
                c.marked.pop(name, None)
                c.left_to_cloud.pop(name, None)
                continue
            if name in c.booting or name in self.in_flight:
                continue  # terminated as soon as its boot call returns, or its calls are recorded
            if node.bound_pods:
                c.update_node(name, bound_pods=())  # its pods are placed again next loop
            if node.instance_id is None:
                c.set_state(name, NodeState.TERMINATED)
                c.marked.pop(name, None)
                continue
            asked = node.state is NodeState.TERMINATING
            drain = not asked and self._drain_needed(name, now, forced=label not in VOLUNTARY)
            wait = not asked and now < c.left_to_cloud.get(name, -math.inf)
            work.append(Reaping(name, node.instance_id, reason, label, drain, asked, wait))
        return work

    def _drain_needed(self, name: str, now: float, forced: bool) -> bool:
        """Whether a node's pods must be evicted before its instance goes: a node that is not
        Ready (dead, or never came) has nothing that could leave gracefully. A drain that is
        not ``forced`` (consolidation, drift, expiry: the node could stay) waits for its pods
        however long their PodDisruptionBudgets hold them, saying so each drainTimeout."""
        c = self.state
        registered = c.cache.node(name)
        if registered is None or not registered.ready:
            return False
        started = c.draining.setdefault(name, now)
        timeout = c.config.cluster.drain_timeout
        if now - started < timeout:
            return True
        if forced:
            log.warning("node %s: drain timed out after %gs; terminating with pods still on it", name, timeout)
            c.event("Node", name, "DrainTimeout", f"pods still on the node after {timeout:g}s; terminating anyway", warning=True)
            return False
        c.draining[name] = now  # said once per drainTimeout
        c.drain_blocked.add(name)
        log.warning("node %s: pods still on it after %gs of draining; a voluntary disruption waits for them", name, timeout)
        c.event("Node", name, "DrainBlocked", f"pods still on the node after {timeout:g}s; waiting for them to leave", warning=True)
        return True

    def _call(self, work: list[Reaping]) -> None:
        """Outside the lock: each node's calls; then, under it, what they did."""
        done: list[tuple[Reaping, Reaped]] = []
        try:
            for reaping in work:
                outcome = self._calls_for(reaping)
                done.append((reaping, outcome))
                if outcome is Reaped.THROTTLED:
                    break
        finally:
            with self.state.lock:
                self.in_flight.difference_update(r.name for r in work)
                for reaping, outcome in done:
                    self._record(reaping, outcome)

    def _calls_for(self, r: Reaping) -> Reaped:
        if r.drain:
            status = self.cluster.drain(r.name)
            if not status.done:
                log.info("node %s: draining before termination: %s", r.name, status)
                return Reaped.DRAINING
        if r.left_to_cloud:
            return self._reclaimed(r)
        try:
            self.cloud.terminate([r.instance_id])
        except Throttled as exc:  # the cloud does not answer: the other nodes wait for the next pass as well
            log.warning("terminations wait for the next pass: %s", exc)
            return Reaped.THROTTLED
        except CloudError as exc:
            log.warning("terminating %s (%s) failed, will retry: %s", r.name, r.instance_id, exc)
            return Reaped.FAILED
        if not r.asked:
            log.info("node %s: terminating instance %s: %s", r.name, r.instance_id, r.reason)
            reason = "RegistrationTimeout" if r.label == "boot_timeout" else "Terminating"
            self.cluster.record_event("Node", r.name, reason, r.reason, warning=r.label != "idle")
        self.cluster.remove_node(r.name)
        return Reaped.GONE if self._ended(r.instance_id) else Reaped.TERMINATING

    def _reclaimed(self, r: Reaping) -> Reaped:
        """A drained node left for the cloud: gone once the cloud reclaimed its instance."""
        if not self._ended(r.instance_id):
            return Reaped.RECLAIMING
        log.info("node %s: instance %s reclaimed by the cloud: %s", r.name, r.instance_id, r.reason)
        self.cluster.record_event("Node", r.name, "Reclaimed", r.reason, warning=True)
        self.cluster.remove_node(r.name)
        return Reaped.GONE

    def _ended(self, instance_id: InstanceId) -> bool | None:
        """Whether the cloud says the instance is gone (None: it did not answer)."""
        try:
            instance = self.cloud.describe(instance_id)
        except NotFound:
            return True
        except CloudError:
            return None
        return instance.state is InstanceState.TERMINATED

    def _record(self, r: Reaping, outcome: Reaped) -> None:
        c = self.state
        node = c.nodes.get(r.name)
        if node is None or node.state is NodeState.TERMINATED or outcome not in (Reaped.TERMINATING, Reaped.GONE):
            return
        if node.state is not NodeState.TERMINATING:
            c.draining.pop(r.name, None)
            c.set_state(r.name, NodeState.TERMINATING)
            self.metrics.terminations.labels(r.label).inc()
        if outcome is Reaped.GONE:
            c.set_state(r.name, NodeState.TERMINATED)
            c.marked.pop(r.name, None)
            c.left_to_cloud.pop(r.name, None)
