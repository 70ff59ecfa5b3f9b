"""``Boots``: a node's record made and its instance launched, outside the lock, through the
executor; what each boot's outcome means for the node, the offering and the pool.

A boot's idempotency token derives from its node's name and the time its record was made
(``boot_token``), so a retried boot never launches a second instance, and a node given the
name of one long gone is not answered with that one's instance (EC2 returns the instance a
token first launched, terminated or not). A refused offering is marked unavailable (the
scaler skips it for the next cheapest); a pool whose boots keep failing for other reasons
backs off.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from concurrent.futures import Executor

from cloud.base import BootRequest, CloudClient, Instance
from cloud.errors import InsufficientCapacity, LaunchRefused, OfferingError, QuotaExceeded, Throttled, ZoneUnavailable
from nodemanager.controller.state import ClusterState
from nodemanager.errors import NodeManagerError
from nodemanager.model import CapacityType, InstanceId, Node, NodeState
from nodemanager.model import labels as wk
from nodemanager.model.reservation import ReservationKind
from nodemanager.scaler import NodeSpec
from nodemanager.scaler.unavailability import ANY_TYPE
from nodemanager.status.metrics import Metrics

log = logging.getLogger("nodemanager.controller")


def boot_token(controller_id: str, node_name: str, created_at: float) -> str:
    """The idempotency token of a node's boot: stable across its retries."""
    return hashlib.sha256(f"{controller_id}/{node_name}/{created_at!r}".encode()).hexdigest()[:32]


class Boots:
    def __init__(self, state: ClusterState, cloud: CloudClient, executor: Executor, metrics: Metrics, reap: Callable[[float], None]) -> None:
        self.state = state
        self.cloud = cloud
        self.executor = executor
        self.metrics = metrics
        self.reap = reap  # the reaper's pass: a node stopped while its boot was in flight goes at once

    def boot(self, spec: NodeSpec, now: float) -> None:
        """Boot one node outside a decision (a consolidation's replacement)."""
        self.create(spec, now)
        self.submit_boot(spec.name)

    def create(self, spec: NodeSpec, now: float) -> None:
        """The record of a node to boot (``submit_boot`` boots it)."""
        log.info(
            "booting %s: %s %s in %s for pool %s (%s)%s",
            spec.name,
            spec.instance_type,
            spec.capacity_type,
            spec.zone,
            spec.pool,
            f"{len(spec.pods)} pod(s): {', '.join(spec.pods[:5])}{'...' if len(spec.pods) > 5 else ''}" if spec.pods else "standby",
            f"; the pool's size floor is {spec.size_floor} (pools[].nodeSizeFloor)" if spec.size_floor else "",
        )
        what = f"{spec.instance_type} {spec.capacity_type} in {spec.zone}"
        relaxed = f"; {spec.relaxed} (minValues policy BestEffort)" if spec.relaxed else ""
        self.state.event("Node", spec.name, "Booting", f"{what} for pool {spec.pool}" + (" (standby)" if spec.standby else "") + relaxed)
        for pod in spec.pods:
            self.state.event("Pod", pod, "TriggeredScaleUp", f"booting node {spec.name} ({what}) for this pod{relaxed}")
        self.state.ledger.booted(spec.name, spec.pods)
        self.state.nodes[spec.name] = Node(
            spec.name,
            spec.pool,
            spec.instance_type,
            spec.capacity_type,
            spec.zone,
            allocatable=spec.allocatable,
            labels=dict(spec.labels),
            taints=spec.taints,
            bound_pods=spec.pods,
            created_at=now,
            alternatives=spec.alternatives,
        )

    def resume_boots(self) -> None:
        """Nodes still Creating with no instance and no call in flight get their boot again
        (same name, same token): after a throttled call, for instance."""
        for name in self.state.nodes.in_states(NodeState.CREATING):
            if self.state.nodes[name].instance_id is None and name not in self.state.booting and name not in self.state.marked:
                self.submit_boot(name)

    def submit_boot(self, name: str) -> None:
        node = self.state.nodes[name]
        pool = self.state.pool_config(node.pool)
        strategies = {"on_demand_strategy": pool.launch.on_demand_strategy.value, "spot_strategy": pool.launch.spot_strategy.value} if pool else {}
        request = BootRequest(
            node_name=name,
            pool=node.pool,
            instance_type=node.instance_type,
            capacity_type=node.capacity_type,
            zone=node.zone,
            token=boot_token(self.cloud.controller_id, name, node.created_at),
            volume_bytes=self.state.config.nodes.volume_size,
            labels=dict(node.labels),
            taints=node.taints,
            startup_taints=self.state.startup_taints(node.pool),
            alternatives=node.alternatives,
            reservation=node.labels.get(wk.RESERVATION_ID, ""),
            capacity_block=node.labels.get(wk.RESERVATION_TYPE) == ReservationKind.CAPACITY_BLOCK,
            **strategies,
        )
        self.state.booting.add(name)
        self.state.lock.after_release(self._start_boot, name, request)

    def _start_boot(self, name: str, request: BootRequest) -> None:
        """Outside the lock (an inline executor boots in the caller's thread)."""
        future = self.executor.submit(self.cloud.boot, request)
        future.add_done_callback(lambda f: self._boot_done(name, f))

    def _boot_done(self, name: str, future) -> None:  # type: ignore[no-untyped-def]
        with self.state.lock:
            self.state.booting.discard(name)
            node = self.state.nodes.get(name)
            if node is None:
                return
            now = self.state.clock.now()
            try:
                instance: Instance = future.result()
            except Throttled as exc:
                log.warning("boot of %s throttled, retrying next loop: %s", name, exc)
                self.metrics.boot_failures.labels("throttled").inc()
                return
            except LaunchRefused as exc:
                typed = [r for r in exc.refusals if isinstance(r, OfferingError | ZoneUnavailable | QuotaExceeded)]
                other = [r for r in exc.refusals if r not in typed]
                labels = [self._refused(node, refusal, now) for refusal in typed + other[:1]]  # the pool backs off once at most
                self._boot_failed(name, labels[0] if labels else "cloud_error", str(exc))
                return
            except NodeManagerError as exc:  # any other refusal: the node is gone, its pods move on
                self._boot_failed(name, self._refused(node, exc, now), str(exc))
                return
            for refusal in instance.refused:  # tried first by a fleet launch, which then fell back
                self._refused(node, refusal, now)
            self.state.backoff.succeeded(node.pool)
            if node.state is not NodeState.CREATING:
                return
            self.state.update_node(name, instance_id=InstanceId(instance.instance_id), image_id=instance.image_id, **self._taken(node, instance))
            node = self.state.set_state(name, NodeState.CREATED)
            self.metrics.boots.labels(node.pool, node.instance_type, node.capacity_type.value).inc()
            self.state.ledger.launched(node.pool, name, now)
            log.info("node %s: instance %s launched", name, instance.instance_id)
            if name in self.state.marked:  # stopped while its boot was in flight
                self.reap(now)

    def _refused(self, node: Node, exc: NodeManagerError, now: float) -> str:
        """What a refused launch says about its offering, zone or pool, noted where the
        scaler will see it; the failure's metric label."""
        if isinstance(exc, OfferingError):
            key = (exc.instance_type, exc.capacity_type, exc.zone)
            if self.state.keeper.mark(key, now, str(exc)):
                log.warning("offering %s/%s/%s marked unavailable for %ss: %s", *key, self.state.keeper.ttl, exc)
            return "insufficient_capacity" if isinstance(exc, InsufficientCapacity) else "unsupported"
        if isinstance(exc, ZoneUnavailable):
            for capacity in CapacityType:
                self.state.keeper.mark((ANY_TYPE, capacity, exc.zone), now, str(exc))
            return "zone_unavailable"
        if isinstance(exc, QuotaExceeded):
            self.state.keeper.mark((node.instance_type, node.capacity_type, node.zone), now, str(exc))
            return "quota"
        pause = self.state.backoff.failed(node.pool, now, str(exc))
        log.warning("pool %s: %s", node.pool, pause.describe())
        return "cloud_error"

    def _taken(self, node: Node, instance: Instance) -> dict[str, object]:
        """The record's changes when a fleet launch took another of the node's offerings
        than the planned one: every alternative holds what the node was planned for."""
        if (instance.instance_type, instance.zone) == (node.instance_type, node.zone) or not instance.instance_type:
            return {}
        taken = next((o for o in node.alternatives if (o.instance_type, o.zone) == (instance.instance_type, instance.zone)), None)
        if taken is None:
            log.error("node %s: the cloud launched %s in %s, which its launch did not offer", node.name, instance.instance_type, instance.zone)
            return {}
        log.info("node %s: launched as %s in %s (planned %s in %s)", node.name, taken.instance_type, taken.zone, node.instance_type, node.zone)
        self.metrics.launch_fallbacks.labels(node.pool).inc()
        choice = f"as {taken.instance_type} in {taken.zone}, the fleet's choice among {len(node.alternatives) + 1} offerings"
        self.state.event("Node", node.name, "Launched", choice)
        return {"instance_type": taken.instance_type, "zone": taken.zone, "allocatable": taken.allocatable, "labels": dict(taken.labels)}

    def _boot_failed(self, name: str, label: str, reason: str) -> None:
        log.warning("node %s: boot failed (%s); its pods will be placed again", name, reason)
        self.metrics.boot_failures.labels(label).inc()
        self.state.set_state(name, NodeState.TERMINATED)
        self.state.marked.pop(name, None)
        self.state.ledger.failed(name)
