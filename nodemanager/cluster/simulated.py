"""A cluster in memory: kubelets that register on booted instances, and a workload.

* An instance becomes a Ready node ``register_delay`` after it is running, and heartbeats
  every ``heartbeat_interval`` while it lives; when its instance is gone the node goes,
  and its pods wait again (as a ReplicaSet would recreate them).
* Pods arrive at their time, start running when bound, and finish (Succeeded, then
  deleted) after their duration.
* Binding follows the API server: only a pending, unbound pod can be bound, once.

It works with any ``CloudClient``, so ``cloud: aws`` with ``cluster: simulated`` runs
against a real (or moto) EC2 endpoint.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace

from cloud.base import CloudClient, InstanceState
from cloud.errors import CloudError
from nodemanager.clock import Clock
from nodemanager.cluster.base import BindError, ClusterEvent, ClusterNode, DrainStatus, EventType, NodeEvent, PodEvent
from nodemanager.cluster.workload import Arrival, UsageProfile
from nodemanager.dra.context import DeviceContext
from nodemanager.dra.model import AllocationResult, ResourceClaim
from nodemanager.model import Pod, PodKey, PodPhase
from nodemanager.model.resources import BATCH_CPU, BATCH_MEMORY
from nodemanager.noderesource.model import NodeMetric, PodUsage

KUBELET_HEARTBEAT = 10.0  # seconds between node status updates


@dataclass
class _SimPod:
    pod: Pod
    duration: float | None
    bound_at: float | None = None
    usage: UsageProfile | None = None


class SimulatedCluster:
    schedules_pods = True

    def __init__(
        self,
        clock: Clock,
        cloud: CloudClient,
        workload: list[Arrival],
        *,
        register_delay: float = 10.0,
        heartbeat_interval: float = KUBELET_HEARTBEAT,
        system_usage: tuple[int, int] = (200, 512 * 2**20),
        devices: DeviceContext | None = None,
    ) -> None:
        self._classes = dict(devices.classes) if devices else {}
        self._claims: dict[str, ResourceClaim] = dict(devices.claims) if devices else {}
        self.system_usage = system_usage  # (milli-cpu, bytes) each node's daemons use
        self.clock = clock
        self.cloud = cloud
        self.register_delay = register_delay
        self.heartbeat_interval = heartbeat_interval
        self.origin = clock.now()  # workload times are relative to when the cluster started
        self._arrivals = sorted(workload, key=lambda a: (a.at, a.pod.key))
        self._next_arrival = 0
        self.pods: dict[PodKey, _SimPod] = {}
        self.nodes: dict[str, ClusterNode] = {}
        self._finishing: list[tuple[float, PodKey]] = []  # heap of (finish time, pod)
        self._events: list[ClusterEvent] = []
        self._running_since: dict[str, float] = {}  # node -> when its instance was first seen running
        self._silenced: set[str] = set()
        self.first_bound: dict[PodKey, float] = {}  # pod -> when it was first bound (simulation reports)
        self.binds = 0
        self.recorded: deque[tuple[str, str, str, str]] = deque(maxlen=1000)  # (kind, key, reason, message)

    # -- ClusterSource -------------------------------------------------------------------
    def poll(self) -> list[ClusterEvent]:
        now = self.clock.now()
        self._sync_nodes(now)
        self._finish(now)
        self._arrive(now)
        events, self._events = self._events, []
        return events

    def list(self) -> list[ClusterEvent]:
        self.poll()  # bring the state up to now; what changed is in the listing below
        nodes: list[ClusterEvent] = [NodeEvent(EventType.ADDED, n) for _, n in sorted(self.nodes.items())]
        return nodes + [PodEvent(EventType.ADDED, s.pod) for _, s in sorted(self.pods.items())]

    def bind(self, pod: PodKey, node: str) -> None:
        sim = self.pods.get(pod)
        if sim is None:
            raise BindError(pod, node, "pod not found")
        if sim.pod.node_name:
            raise BindError(pod, node, f"pod is already bound to {sim.pod.node_name}")
        target = self.nodes.get(node)
        if target is None or not target.ready:
            raise BindError(pod, node, "node is not registered and Ready")
        now = self.clock.now()
        sim.pod = replace(sim.pod, node_name=node, phase=PodPhase.RUNNING)
        sim.bound_at = now
        if sim.duration is not None:
            heapq.heappush(self._finishing, (now + sim.duration, pod))
        self.binds += 1
        self.first_bound.setdefault(pod, now)
        self._events.append(PodEvent(EventType.MODIFIED, sim.pod))

    def remove_node(self, name: str) -> None:
        node = self.nodes.pop(name, None)
        if node is not None:
            self._orphan_pods(name)
            self._events.append(NodeEvent(EventType.DELETED, node))

    def drain(self, name: str) -> DrainStatus:
        """Nothing to wait for: a removed node's pods wait again at once."""
        return DrainStatus(done=True)

    def label_node(self, name: str, labels: Mapping[str, str]) -> None:
        node = self.nodes.get(name)
        if node is not None and not labels.items() <= node.labels.items():
            self.nodes[name] = replace(node, labels={**node.labels, **labels})
            self._events.append(NodeEvent(EventType.MODIFIED, self.nodes[name]))

    def record_event(self, kind: str, key: str, reason: str, message: str, *, warning: bool = False) -> None:
        self.recorded.append((kind, key, reason, message))

    def devices(self) -> DeviceContext:
        """Classes and claims; nodes publish no slices here, so the scaler uses each node's
        instance type's GPUs (what its driver would publish)."""
        return DeviceContext(dict(self._classes), dict(self._claims))

    def allocate_claim(self, claim: str, node: str, result: AllocationResult) -> None:
        found = self._claims.get(claim)
        if found is not None and found.allocation is None:
            self._claims[claim] = replace(found, allocation=result)

    def node_metrics(self) -> dict[str, NodeMetric]:
        """Usage as a metrics server would report it now: each running pod's usage profile
        applied to its request (batch requests included), plus each node's system usage."""
        now = self.clock.now()
        out = {name: NodeMetric(now, self.system_usage[0], self.system_usage[1]) for name in sorted(self.nodes)}
        for key, sim in self.pods.items():
            metric = out.get(sim.pod.node_name)
            if metric is None or sim.bound_at is None:
                continue
            cpu_share, memory_share = sim.usage.fractions(now - sim.bound_at) if sim.usage else (1.0, 1.0)
            requests = sim.pod.requests
            metric.pods[key] = PodUsage(int((requests.cpu + requests[BATCH_CPU]) * cpu_share), int((requests.memory + requests[BATCH_MEMORY]) * memory_share))
        return out

    # -- failure injection ---------------------------------------------------------------
    def silence(self, node: str) -> None:
        """The node's kubelet hangs: it stays registered but stops heartbeating."""
        self._silenced.add(node)

    # -- inspection ------------------------------------------------------------------------
    def arrivals_left(self) -> int:
        return len(self._arrivals) - self._next_arrival

    def next_arrival(self) -> float | None:
        """Clock time of the next arrival, if any."""
        return self.origin + self._arrivals[self._next_arrival].at if self._next_arrival < len(self._arrivals) else None

    def unfinished(self) -> list[Pod]:
        """Pods with a duration that have not finished (waiting or running)."""
        return [s.pod for s in self.pods.values() if s.duration is not None]

    # -- internals ---------------------------------------------------------------------------
    def _sync_nodes(self, now: float) -> None:
        try:
            instances = self.cloud.list_instances()
        except CloudError:
            return  # a throttled look changes nothing; the next poll catches up
        alive = {i.node_name: i for i in instances if i.state is InstanceState.RUNNING}
        for name in sorted(set(self.nodes) - set(alive)):
            self.remove_node(name)
        for name in set(self._running_since) - set(alive):
            del self._running_since[name]
        for name, instance in sorted(alive.items()):
            node = self.nodes.get(name)
            if node is None:
                running_since = self._running_since.setdefault(name, now)
                if now - running_since >= self.register_delay:
                    node = ClusterNode(name, instance.instance_id, ready=True, last_heartbeat=now)
                    self.nodes[name] = node
                    self._events.append(NodeEvent(EventType.ADDED, node))
            elif now - node.last_heartbeat >= self.heartbeat_interval and name not in self._silenced:
                node = replace(node, last_heartbeat=now)
                self.nodes[name] = node
                self._events.append(NodeEvent(EventType.MODIFIED, node))

    def _orphan_pods(self, node: str) -> None:
        for sim in self.pods.values():
            if sim.pod.node_name == node:
                for claim in sim.pod.claims:  # its devices went with the node
                    if (found := self._claims.get(claim)) is not None:
                        self._claims[claim] = replace(found, allocation=None)
                sim.pod = replace(sim.pod, node_name="", phase=PodPhase.PENDING)
                sim.bound_at = None
                self._events.append(PodEvent(EventType.MODIFIED, sim.pod))

    def _finish(self, now: float) -> None:
        while self._finishing and self._finishing[0][0] <= now:
            _, key = heapq.heappop(self._finishing)
            sim = self.pods.get(key)
            if sim is None or sim.bound_at is None or sim.duration is None or sim.bound_at + sim.duration > now:
                continue  # restarted elsewhere since: its new finish time is queued
            done = replace(sim.pod, phase=PodPhase.SUCCEEDED)
            del self.pods[key]
            for claim in sim.pod.claims:  # claims made for the pod go with it
                if claim.startswith(f"{done.namespace}/{done.name}-"):
                    self._claims.pop(claim, None)
            self._events.append(PodEvent(EventType.MODIFIED, done))
            self._events.append(PodEvent(EventType.DELETED, done))

    def _arrive(self, now: float) -> None:
        while self._next_arrival < len(self._arrivals) and self.origin + self._arrivals[self._next_arrival].at <= now:
            arrival = self._arrivals[self._next_arrival]
            self._next_arrival += 1
            pod = replace(arrival.pod, created_at=self.origin + arrival.at)
            self.pods[pod.key] = _SimPod(pod, arrival.duration, usage=arrival.usage)
            for claim in arrival.claims:  # made from the pod's claim templates
                self._claims[claim.key] = claim
            self._events.append(PodEvent(EventType.ADDED, pod))
