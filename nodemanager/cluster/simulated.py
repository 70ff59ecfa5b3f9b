"""A cluster in memory: kubelets that register on booted instances, and a workload.

* An instance becomes a Ready node ``register_delay`` after it is running, and heartbeats
  every ``heartbeat_interval`` while it lives; when its instance is gone the node goes,
  and its pods wait again (as a ReplicaSet would recreate them).
* Pods arrive at their time, start running when bound, and finish (Succeeded, then
  deleted) after their duration.
* Binding follows the API server: only a pending, unbound pod can be bound, once.
* A kubelet registers with the taints its instance was launched with; its startup taints go
  ``startup_delay`` later (the node's agents are ready). Operators' ``nodeEvents`` taint,
  untaint, cordon and uncordon nodes at their time.
* The DaemonSet controller starts a pod of every matching DaemonSet on every node (and
  starts more when a node's labels change); they go with their node.
* The volume controller (``volume_controller.py``) provisions the pods' claims.

It works with any ``CloudClient``, so ``cloud: aws`` with ``cluster: simulated`` runs
against a real (or moto) EC2 endpoint.
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from cloud.base import STARTUP_TAINTS_TAG, TAINTS_TAG, CloudClient, Instance, InstanceState, parse_taints
from cloud.errors import CloudError
from nodemanager.clock import Clock
from nodemanager.cluster.arrivals import Arrival, Arrivals, UsageProfile
from nodemanager.cluster.base import (
    BindError,
    ClusterEvent,
    ClusterNode,
    ClusterObject,
    DrainStatus,
    EventType,
    Heartbeats,
    NodeEvent,
    ObjectEvent,
    PodEvent,
    bind_each,
)
from nodemanager.cluster.kubelets import KUBELET_HEARTBEAT, KubeletBeats
from nodemanager.cluster.volume_controller import VolumeController
from nodemanager.cluster.workload import ClusterObjects, NodeAction
from nodemanager.dra.context import DeviceContext
from nodemanager.dra.model import AllocationResult, ResourceClaim, allocation_document, parse_allocation
from nodemanager.model import Pod, PodKey, PodPhase
from nodemanager.model.journal import Journal
from nodemanager.model.labels import ZONE
from nodemanager.model.resources import BATCH_CPU, BATCH_MEMORY
from nodemanager.model.since import Since
from nodemanager.noderesource.model import NodeMetric, PodUsage

STARTUP_DELAY = 5.0  # seconds from registration until a node's agents remove its startup taints
_INSTANCE_ID = operator.attrgetter("instance_id")
Listed = tuple[list[Instance], dict[str, Instance], dict[str, Instance]]  # a list, its instances by id, the running ones by node


@dataclass
class _SimPod:
    pod: Pod
    duration: float | None
    bound_at: float | None = None
    usage: UsageProfile | None = None
    seq: int = 0  # its place in ``SimulatedCluster.pods`` (the order a node's pods are orphaned in)
    evicted_at: float | None = None  # when it was last evicted, until it is bound again


class SimulatedCluster:
    schedules_pods = True
    publishes_status = False  # no one would read it

    def __init__(
        self,
        clock: Clock,
        cloud: CloudClient,
        workload: Sequence[Arrival],
        *,
        register_delay: float = 10.0,
        heartbeat_interval: float = KUBELET_HEARTBEAT,
        system_usage: tuple[int, int] = (200, 512 * 2**20),
        devices: DeviceContext | None = None,
        objects: ClusterObjects | None = None,
        startup_delay: float = STARTUP_DELAY,
        resume_evicted: bool = False,
    ) -> None:
        objects = objects or ClusterObjects()
        self.resume_evicted = resume_evicted  # an evicted pod keeps the work it had done
        self.daemon_sets = objects.daemon_sets
        self.namespaces = objects.namespaces
        self.pod_selecting = objects.pod_selecting
        self.pdbs = objects.pdbs
        self._actions = sorted(objects.node_actions, key=lambda a: a.at)
        self._next_action = 0
        self.storage = VolumeController(objects.claims, objects.volumes, objects.classes)
        self.startup_delay = startup_delay
        self._startup: dict[str, tuple[float, tuple]] = {}  # node -> (when its startup taints go, them)
        self._zones: dict[str, str] = {}  # node -> its instance's zone
        self._classes = dict(devices.classes) if devices else {}
        self._claims: dict[str, ResourceClaim] = dict(devices.claims) if devices else {}
        self.system_usage = system_usage  # (milli-cpu, bytes) each node's daemons use
        self.clock = clock
        self.cloud = cloud
        self.register_delay = register_delay
        self.origin = clock.now()  # workload times are relative to when the cluster started
        arrivals = Arrivals.of(workload)
        self.usage_varies = arrivals.usage_varies  # what metrics report changes with time alone
        self._arrivals, self._arrivals_left = iter(arrivals), len(arrivals)  # each pod made as it arrives
        self._next_arrival: Arrival | None = next(self._arrivals, None)
        self.pods: dict[PodKey, _SimPod] = {}
        self._on_node: dict[str, set[PodKey]] = {}  # node -> the pods bound to it (a removed node's are found at once)
        # The workload pods bound now (DaemonSet pods are their nodes'): their CPU and memory
        # requests, kept as pods are bound, orphaned and finish, so a simulation integrating
        # them does not walk every pod at every step.
        self.bound_requests = (0, 0)
        self.occupancy = Journal()  # the nodes whose workload pods changed (one bound, gone or finished)
        self._ran: Counter[PodKey] = Counter()  # seconds each workload pod was bound, to its last unbinding
        self._added = itertools.count()  # seq of the next pod added to ``pods``
        self.nodes: dict[str, ClusterNode] = {}
        self._finishing: list[tuple[float, PodKey]] = []  # heap of (finish time, pod)
        self._events: list[ClusterEvent] = []
        self.version = 0  # counts changes to pods and to which nodes are registered (what a simulation integrates)
        self.registrations = Journal()  # the names of the nodes registered and removed
        self._running_since: dict[str, float] = {}  # node -> when its instance was first seen running
        self.kubelets = KubeletBeats(heartbeat_interval)  # when each registered node's kubelet renews its Lease
        self.first_bound: dict[PodKey, float] = {}  # pod -> when it was first bound (simulation reports)
        # What disruption cost the pods (simulation reports): evictions by pod, the seconds of
        # work that evicted pods had done and do again (restart), and how long each waited again.
        self.evictions: Counter[PodKey] = Counter()
        self.work_redone = 0.0
        self.lost: list[PodKey] = []  # bare pods evicted: no controller made them again
        self.waited_again: list[float] = []
        self.binds = 0
        self.recorded: deque[tuple[str, str, str, str]] = deque(maxlen=1000)  # (kind, key, reason, message)
        self._listed_objects = False
        # The cloud's last list (its instances by id) and its running instances by node,
        # made again from the instances that changed (the same objects, mostly, list after list).
        self._listed: Listed = ([], {}, {})

    # -- ClusterSource -------------------------------------------------------------------
    def poll(self) -> list[ClusterEvent]:
        now = self.clock.now()
        if not self._listed_objects:
            self._listed_objects = True
            self._events += self._object_events()
            for event in self.storage.provision_immediate():
                self._emit(event)
        self._sync_nodes(now)
        self._act_on_nodes(now)
        self._run_daemons()
        self._finish(now)
        self._arrive(now)
        events, self._events = self._events, []
        return events

    def list(self) -> list[ClusterEvent]:
        self.poll()  # bring the state up to now; what changed is in the listing below
        nodes: list[ClusterEvent] = [NodeEvent(EventType.ADDED, self._stamped(n)) for _, n in sorted(self.nodes.items())]
        return self._object_events() + nodes + [PodEvent(EventType.ADDED, s.pod) for _, s in sorted(self.pods.items())]

    def _object_events(self) -> list[ClusterEvent]:
        objects: list[tuple[str, ClusterObject]] = [(d.key, d) for d in self.daemon_sets]
        objects += self.storage.objects()
        objects += [(n.key, n) for n in self.namespaces] + [(o.key, o) for o in self.pod_selecting] + [(b.key, b) for b in self.pdbs]
        return [ObjectEvent(EventType.ADDED, key, obj) for key, obj in objects]

    def bind(self, pod: PodKey, node: str) -> str:
        sim = self.pods.get(pod)
        if sim is None:
            raise BindError(pod, node, "pod not found")
        if sim.pod.node_name:
            raise BindError(pod, node, f"pod is already bound to {sim.pod.node_name}")
        target = self.nodes.get(node)
        if target is None or not target.ready:
            raise BindError(pod, node, "node is not registered and Ready")
        now = self.clock.now()
        for event in self.storage.provision_for(sim.pod, self.nodes[node].labels.get(ZONE) or self._zones.get(node, "")):
            self._emit(event)
        sim.pod = sim.pod.living(node_name=node, phase=PodPhase.RUNNING)
        self._on_node.setdefault(node, set()).add(pod)
        self._count_bound(sim, 1)
        sim.bound_at = now
        if sim.evicted_at is not None:
            self.waited_again.append(now - sim.evicted_at)
            sim.evicted_at = None
        if sim.duration is not None:
            heapq.heappush(self._finishing, (now + sim.duration, pod))
        self.binds += 1
        self.first_bound.setdefault(pod, now)
        self._emit(PodEvent(EventType.MODIFIED, sim.pod))
        return node

    def bind_all(self, binds: Sequence[tuple[PodKey, str]]) -> list[str | Exception]:
        return bind_each(self.bind, binds)  # one after another: the simulation stays deterministic

    def remove_node(self, name: str) -> None:
        node = self.nodes.get(name)
        if node is not None:
            node = self._stamped(node)
            del self.nodes[name]
            self.kubelets.forget(name)
            self._orphan_pods(name)
            self._emit(NodeEvent(EventType.DELETED, node))

    def drain(self, name: str) -> DrainStatus:
        """The node's pods are evicted and wait again (kubectl drain's way: its DaemonSet
        pods stay), as far as their PodDisruptionBudgets allow now, as the Eviction API
        does; the rest are refused (tried again at the next drain)."""
        allowance = {b.key: b.allowed(s.pod for s in self.pods.values()) for b in self.pdbs} if self.pdbs else {}
        blocked = []
        for key in sorted(self._on_node.get(name, ()), key=lambda k: self.pods[k].seq):
            pod = self.pods[key].pod
            if pod.daemon_set:
                continue
            budgets = [b.key for b in self.pdbs if b.selects(pod)] if allowance else []
            if pod.phase is PodPhase.RUNNING and any(allowance[b] < 1 for b in budgets):
                blocked.append(f"{key}: Cannot evict pod as it would violate the pod's disruption budget.")
                continue
            for b in budgets:
                allowance[b] -= 1
            self._on_node[name].discard(key)
            self._evict(self.pods[key])
        return DrainStatus(done=not blocked, blocked=tuple(blocked))

    def label_node(self, name: str, labels: Mapping[str, str]) -> None:
        node = self.nodes.get(name)
        if node is not None and not labels.items() <= node.labels.items():
            self._set_node(replace(node, labels={**node.labels, **labels}))

    def record_event(self, kind: str, key: str, reason: str, message: str, *, warning: bool = False) -> None:
        self.recorded.append((kind, key, reason, message))

    def publish_status(self, text: str) -> None:
        pass

    def devices(self) -> DeviceContext:
        """Classes and claims; no slices: the scaler takes each node's type's GPUs (as its driver would publish)."""
        return DeviceContext(dict(self._classes), dict(self._claims))

    def allocate_claim(self, claim: str, node: str, result: AllocationResult) -> None:
        found = self._claims.get(claim)
        if found is not None and found.allocation is None:  # as the API server keeps it: on the node, by its name
            self._claims[claim] = replace(found, allocation=parse_allocation(allocation_document(result, node)))

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
        self.kubelets.silenced.add(node)

    # -- inspection ------------------------------------------------------------------------
    def arrivals_left(self) -> int:
        return self._arrivals_left

    def next_arrival(self) -> float | None:
        """Clock time of the next arrival, if any."""
        return self.origin + self._next_arrival.at if self._next_arrival is not None else None

    def next_own_change(self) -> float | None:
        """When the cluster itself next changes something with no one acting (an arrival, a
        pod's finish, an operator's node action, a startup taint's removal); None when a
        kubelet is silenced or a pod's usage varies (the next change cannot be told)."""
        if self.kubelets.silenced or self.usage_varies:
            return None
        times = [t for t in (self.next_arrival(), self._finishing[0][0] if self._finishing else None) if t is not None]
        times += [when for when, _ in self._startup.values()]
        if self._next_action < len(self._actions):
            times.append(self.origin + self._actions[self._next_action].at)
        return min(times, default=math.inf)

    def ran(self) -> Counter[PodKey]:
        """Seconds each workload pod ever bound has been bound until now, all its runs together."""
        now, ran = self.clock.now(), self._ran.copy()
        for key, sim in self.pods.items():
            if sim.bound_at is not None and not sim.pod.of_node:
                ran[key] += now - sim.bound_at
        return ran

    def workload_on(self, node: str) -> list[Pod]:
        """The workload pods bound to ``node`` now (its DaemonSet pods aside)."""
        return [pod for key in self._on_node.get(node, ()) if not (pod := self.pods[key].pod).of_node]

    def unfinished(self) -> list[Pod]:
        """Pods with a duration that have not finished (waiting or running)."""
        return [s.pod for s in self.pods.values() if s.duration is not None]

    # -- the DaemonSet controller, operators ---------------------------------------------------
    def _set_node(self, node: ClusterNode) -> None:
        node = self.nodes[node.name] = self._stamped(node)
        self._emit(NodeEvent(EventType.MODIFIED, node))

    def _stamped(self, node: ClusterNode) -> ClusterNode:
        """``node`` with its latest heartbeat, as a Node the API server sends carries it."""
        at = self.kubelets.last(node.name, node.last_heartbeat)
        return node if at == node.last_heartbeat else node.with_heartbeat(at)

    def _act_on_nodes(self, now: float) -> None:
        for name, (when, startup) in list(self._startup.items()):
            node = self.nodes.get(name)
            if node is None or now >= when:
                del self._startup[name]
            if node is not None and now >= when:
                self._set_node(replace(node, taints=tuple(t for t in node.taints if t not in startup)))
        while self._next_action < len(self._actions) and self.origin + self._actions[self._next_action].at <= now:
            action = self._actions[self._next_action]
            self._next_action += 1
            for name in self._targets(action):
                self._set_node(_acted(self.nodes[name], action))

    def _targets(self, action: NodeAction) -> list[str]:
        matching = [n for n, node in sorted(self.nodes.items()) if action.selector.items() <= node.labels.items()]
        return matching[: action.count] if action.count is not None else matching

    def _run_daemons(self) -> None:
        if not self.daemon_sets:
            return
        running = {(s.pod.daemon_set, s.pod.node_name) for s in self.pods.values() if s.pod.daemon_set}
        for name, node in sorted(self.nodes.items()):
            for ds in self.daemon_sets:
                if (ds.key, name) not in running and ds.runs_on(node.labels, node.taints, name):
                    pod = replace(ds.pod, name=f"{ds.name}-{name}", uid=f"{ds.key}/{name}", node_name=name, phase=PodPhase.RUNNING, created_at=self.clock.now())
                    self.pods[pod.key] = _SimPod(pod, None, bound_at=self.clock.now(), seq=next(self._added))
                    self._on_node.setdefault(name, set()).add(pod.key)
                    self._emit(PodEvent(EventType.ADDED, pod))

    # -- internals ---------------------------------------------------------------------------
    def _emit(self, event: ClusterEvent) -> None:
        self._events.append(event)
        # a heartbeat, a label: nothing the report integrates
        if isinstance(event, NodeEvent):
            if event.type is not EventType.MODIFIED:
                self.version += 1
                self.registrations.add(event.node.name)
        elif not isinstance(event, Heartbeats):
            self.version += 1

    def _sync_nodes(self, now: float) -> None:
        try:
            instances = self.cloud.list_instances()
        except CloudError:  # the cloud cannot be seen (throttled, an outage); the kubelets still run
            self._beat(self.kubelets.renewing(sorted(self.nodes), now), now)
            return
        self._listed = relisted(self._listed, instances)
        alive = self._listed[2]
        for name in sorted(self.nodes.keys() - alive.keys()):
            self.remove_node(name)
        for name in self._running_since.keys() - alive.keys():
            del self._running_since[name]
        due = self.kubelets.due(now, self.nodes)  # (registered nodes: none of them registers below)
        for name in sorted(alive.keys() - self.nodes.keys()):
            instance = alive[name]
            running_since = self._running_since.setdefault(name, now)
            if now - running_since >= self.register_delay:
                startup = parse_taints(instance.tags.get(STARTUP_TAINTS_TAG, ""))
                taints = parse_taints(instance.tags.get(TAINTS_TAG, "")) + startup
                node = ClusterNode(name, instance.instance_id, ready=True, last_heartbeat=now, taints=taints)
                self.nodes[name] = node
                self._zones[name] = instance.zone
                self.kubelets.registered(name, now)
                if startup:
                    self._startup[name] = (now + self.startup_delay, startup)
                self._emit(NodeEvent(EventType.ADDED, node))
        self._beat(self.kubelets.renewing(sorted(due), now), now)

    def _beat(self, names: list[str], now: float) -> None:
        if names:
            self._emit(Heartbeats(now, tuple(names)))

    def _count_bound(self, sim: _SimPod, sign: int, until: float | None = None) -> None:
        """``sim`` bound (1) or no longer (-1: at ``until``, by default now)."""
        if sim.pod.of_node:
            return
        self.occupancy.add(sim.pod.node_name)
        if sign < 0 and sim.bound_at is not None:
            self._ran[sim.pod.key] += (self.clock.now() if until is None else until) - sim.bound_at
        cpu, memory = sim.pod.requests.cpu_memory()
        self.bound_requests = (self.bound_requests[0] + sign * cpu, self.bound_requests[1] + sign * memory)

    def _orphan_pods(self, node: str) -> None:
        for key in sorted(self._on_node.pop(node, ()), key=lambda k: self.pods[k].seq):
            sim = self.pods[key]
            if sim.pod.daemon_set:  # goes with its node
                del self.pods[key]
                self._emit(PodEvent(EventType.DELETED, sim.pod))
            else:
                self._evict(sim)

    def _evict(self, sim: _SimPod) -> None:
        """A pod whose node went or was drained waits again, as its controller would make
        it again: one that runs to completion (a Job's) starts its work again (or resumes
        it with ``evictedPods: resume``); another (a ReplicaSet's) runs what it had left, as
        its duration is when its controller removes it, not work. A pod with no controller
        is gone."""
        for claim in sim.pod.claims:  # its devices went with the node
            if (found := self._claims.get(claim)) is not None:
                self._claims[claim] = replace(found, allocation=None)
        now = self.clock.now()
        self.evictions[sim.pod.key] += 1
        if sim.pod.owner is None:  # no controller makes it again (a workload's ``bare: true``): gone for good
            del self.pods[sim.pod.key]
            self._count_bound(sim, -1)
            self.lost.append(sim.pod.key)
            self._emit(PodEvent(EventType.DELETED, sim.pod))
            return
        sim.evicted_at = now
        if sim.duration is not None and sim.bound_at is not None:
            if self.resume_evicted or not sim.pod.completes:
                sim.duration = max(sim.duration - (now - sim.bound_at), 0.0)
            else:
                self.work_redone += now - sim.bound_at
        self._count_bound(sim, -1)
        sim.pod = sim.pod.living(node_name="", phase=PodPhase.PENDING)
        sim.bound_at = None
        self._emit(PodEvent(EventType.MODIFIED, sim.pod))

    def _finish(self, now: float) -> None:
        while self._finishing and self._finishing[0][0] <= now:
            _, key = heapq.heappop(self._finishing)
            sim = self.pods.get(key)
            if sim is None or sim.bound_at is None or sim.duration is None or sim.bound_at + sim.duration > now:
                continue  # restarted elsewhere since: its new finish time is queued
            done = sim.pod.living(phase=PodPhase.SUCCEEDED)
            del self.pods[key]
            self._count_bound(sim, -1, until=sim.bound_at + sim.duration)  # (its work ended then; this poll saw it)
            self._on_node[done.node_name].discard(key)
            for claim in sim.pod.claims:  # claims made for the pod go with it
                if claim.startswith(f"{done.namespace}/{done.name}-"):
                    self._claims.pop(claim, None)
            self._emit(PodEvent(EventType.MODIFIED, done))
            self._emit(PodEvent(EventType.DELETED, done))

    def _arrive(self, now: float) -> None:
        while (arrival := self._next_arrival) is not None and self.origin + arrival.at <= now:
            self._next_arrival, self._arrivals_left = next(self._arrivals, None), self._arrivals_left - 1
            at = self.origin + arrival.at
            pod = arrival.pod if arrival.pod.created_at == at else arrival.pod.living(created_at=at)  # (a workload's pods are made with theirs)
            self.pods[pod.key] = _SimPod(pod, arrival.duration, usage=arrival.usage, seq=next(self._added))
            for claim in arrival.claims:  # made from the pod's claim templates
                self._claims[claim.key] = claim
            self._emit(PodEvent(EventType.ADDED, pod))


def _acted(node: ClusterNode, action: NodeAction) -> ClusterNode:
    """What ``kubectl taint`` / ``kubectl cordon`` leave on a node."""
    taints = tuple(t for t in node.taints if t.key != action.untaint and not (action.taint and t.key == action.taint.key and t.effect == action.taint.effect))
    if action.taint is not None:
        taints += (action.taint,)
    unschedulable = node.unschedulable if action.cordon is None else action.cordon
    return replace(node, taints=taints, unschedulable=unschedulable)


def relisted(last: Listed, instances: list[Instance]) -> Listed:
    """A cloud's last list, its instances by id and its running instances by node, for a new
    list, from the instances that changed: those the cloud says changed since the list this
    one follows (a ``Listing``), else those that are not the very objects of the last list
    (new, gone, or of a changed state)."""
    listed, before, alive = last
    since: Since[Instance] | None = getattr(instances, "since", None)
    if since is not None and since.links(listed, instances):
        changes: Mapping[str, Instance | None] = since.changed
    elif instances == listed:  # (the same instance objects as last time, mostly: compared by identity first, in C)
        return instances, before, alive
    else:
        now = dict(zip(map(_INSTANCE_ID, instances), instances, strict=True))
        changes = dict.fromkeys(before.keys() - now.keys())
        changes.update((key, came) for key, came in now.items() if before.get(key) is not came)
    for key, came in changes.items():
        gone = before.pop(key, None)
        if gone is not None and alive.get(gone.node_name) is gone:
            del alive[gone.node_name]
        if came is not None:
            before[key] = came
            if came.state is InstanceState.RUNNING:
                alive[came.node_name] = came
    return instances, before, alive
