"""``NodeInfo``: a node (real, or an offering not yet booted) with the pods placed on it.

The cache keeps one per node and updates it incrementally; the scaler clones them and
adds the pods it places, so every Filter sees the node exactly as it would be.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress

from nodemanager.model import CapacityType, Pod, PodKey, Resources, Taint
from nodemanager.model.resources import BATCH_CPU, BATCH_MEMORY, DEFAULT_MEMORY, DEFAULT_MILLI_CPU, ZERO, asks_for_batch

_UNCOUNTED = -1  # a NodeInfo's ``alloc_cpu`` before its free counts are made


def nonzero_request(pod: Pod) -> tuple[int, int]:
    """(milli-cpu, bytes) the scores count: as its manifest's containers ask, a missing cpu or
    memory request counted as the scheduler's default (``Pod.scored``); for a pod made in
    code, its requests, a zero one counted as the default."""
    if pod.scored is not None:
        return pod.scored
    cpu, memory = pod.requests.cpu_memory()
    return (cpu or DEFAULT_MILLI_CPU, memory or DEFAULT_MEMORY)


def counted_requests(requests: Resources, batch_estimate: bool) -> Resources:
    """On a node whose batch capacity is estimated by the request policy (byRequest =
    capacity - margin - reserved - requests), a pod that asks for no batch resources also
    takes its cpu and memory request from the batch estimate."""
    if batch_estimate and not asks_for_batch(requests):
        return requests + Resources({BATCH_CPU: requests.cpu, BATCH_MEMORY: requests.memory})
    return requests


@dataclass(slots=True)
class NodeInfo:
    name: str
    pool: str
    instance_type: str
    capacity_type: CapacityType
    zone: str
    allocatable: Resources
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    cell: bool = False  # a cell-pool node holds one pod
    exists: bool = True  # False for an offering the scaler may boot
    batch_estimate: bool = False  # batch capacity is an estimate: other pods' requests use it up
    unschedulable: bool = False  # cordoned
    requested: Resources = ZERO
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    pods: dict[PodKey, Pod] = field(default_factory=dict)
    generation: int = 0
    node_pods: int = 0  # how many of ``pods`` are DaemonSet or mirror pods (part of the node)
    anti_pods: int = 0  # how many of ``pods`` have required anti-affinity terms (kube's PodsWithRequiredAntiAffinity)
    affinity_pods: int = 0  # how many have pod affinity or anti-affinity terms of any kind (kube's PodsWithAffinity)
    # The cpu and memory allocatable, and the cpu, memory and pod slots left, kept in step
    # with ``allocatable``, ``requested`` and ``pods`` (change them through ``add_pod``,
    # ``remove_pod`` and ``set_allocatable``): a busy cluster's filters and scores ask them
    # of hundreds of nodes for every class of pods. Counted at construction, unless given
    # (``clone`` hands its own over: a computation clones every node it starts from).
    alloc_cpu: int = _UNCOUNTED
    alloc_memory: int = 0
    free_cpu: int = 0
    free_memory: int = 0
    free_pods: int = 0

    def __post_init__(self) -> None:
        if self.alloc_cpu == _UNCOUNTED:
            self._count_free()

    def _count_free(self) -> None:
        self.alloc_cpu, self.alloc_memory = cpu, memory = self.allocatable.cpu_memory()
        used_cpu, used_memory = self.requested.cpu_memory()
        self.free_cpu, self.free_memory, self.free_pods = cpu - used_cpu, memory - used_memory, self.allocatable.pods - len(self.pods)

    def set_allocatable(self, allocatable: Resources) -> None:
        self.allocatable = allocatable
        self._count_free()

    @property
    def free(self) -> Resources:
        return self.allocatable - self.requested

    def _counted(self, pod: Pod) -> Resources:
        """What the pod takes from this node (see ``counted_requests``)."""
        return counted_requests(pod.requests, self.batch_estimate)

    def fit_request(self, pod: Pod) -> Resources:
        """What must fit for ``pod`` to go here: its requests, and on an estimated node that
        already holds batch pods, also what it would take from their batch capacity."""
        if not self.batch_estimate:
            return pod.requests
        holds_batch = self.requested[BATCH_CPU] > self.requested.cpu or self.requested[BATCH_MEMORY] > self.requested.memory
        return counted_requests(pod.requests, holds_batch)

    def add_pod(self, pod: Pod) -> None:
        if pod.key in self.pods:
            raise ValueError(f"pod {pod.key} is already on node {self.name}")
        self.pods[pod.key] = pod
        self.requested = self.requested + self._counted(pod)
        self._counted_in(pod, 1)

    def add_pods(self, pods: Iterable[Pod]) -> None:
        """Many pods at once, as ``add_pod`` each: one sum of their requests, not one per pod
        (a computation adds every running pod of the cluster to its node)."""
        own, estimate = self.pods, self.batch_estimate
        counted = []
        cpu_sum = memory_sum = node_pods = anti_pods = affinity_pods = 0
        for pod in pods:
            if pod.key in own:
                raise ValueError(f"pod {pod.key} is already on node {self.name}")
            own[pod.key] = pod
            requests = pod.requests
            counted.append(counted_requests(requests, True) if estimate else requests)
            scored = pod.scored  # nonzero_request, inline: every running pod of the cluster comes here
            if scored is None:
                cpu, memory = requests.cpu_memory()
                cpu_sum += cpu or DEFAULT_MILLI_CPU
                memory_sum += memory or DEFAULT_MEMORY
            else:
                cpu_sum += scored[0]
                memory_sum += scored[1]
            node_pods += pod.of_node
            if pod.pod_affinity:
                affinity_pods += 1
                anti_pods += bool(pod.pod_affinity.anti_required)
        self.requested = Resources.total(counted, self.requested)
        self.nonzero_cpu += cpu_sum
        self.nonzero_memory += memory_sum
        self.node_pods += node_pods
        self.anti_pods += anti_pods
        self.affinity_pods += affinity_pods
        self.generation += 1
        self._count_free()

    def remove_pod(self, key: PodKey) -> Pod:
        pod = self.pods.pop(key)
        self.requested = self.requested - self._counted(pod)
        self._counted_in(pod, -1)
        return pod

    def _counted_in(self, pod: Pod, sign: int) -> None:
        """The counts that follow one pod added (1) or removed (-1), besides ``requested``
        (the cpu and memory it takes are its requests' on every node)."""
        cpu, memory = pod.requests.cpu_memory()
        scored_cpu, scored_memory = nonzero_request(pod)
        self.nonzero_cpu += sign * scored_cpu
        self.nonzero_memory += sign * scored_memory
        self.free_cpu -= sign * cpu
        self.free_memory -= sign * memory
        self.free_pods -= sign
        self.node_pods += sign * pod.of_node
        self.anti_pods += sign * bool(pod.pod_affinity.anti_required)
        self.affinity_pods += sign * bool(pod.pod_affinity)
        self.generation += 1

    @property
    def cell_taken(self) -> bool:
        """A cell-pool node that holds its one pod (besides its DaemonSet and mirror pods): it takes no other."""
        return self.cell and len(self.pods) > self.node_pods

    def fit_count(self, requests: Resources, limit: int) -> int:
        """How many more pods of ``requests`` fit (resources and the pod count), up to ``limit``."""
        room = self.allocatable.pods - len(self.pods)
        if self.cell:
            room = min(room, 0 if self.cell_taken else 1)
        count = min(limit, room)
        within = requests.copies_within(self.allocatable, self.requested)
        return max(count if within is None else min(count, within), 0)

    def clone(self) -> NodeInfo:
        return NodeInfo(
            self.name,
            self.pool,
            self.instance_type,
            self.capacity_type,
            self.zone,
            self.allocatable,
            self.labels,
            self.taints,
            self.cell,
            self.exists,
            self.batch_estimate,
            self.unschedulable,
            self.requested,
            self.nonzero_cpu,
            self.nonzero_memory,
            dict(self.pods),
            self.generation,
            self.node_pods,
            self.anti_pods,
            self.affinity_pods,
            self.alloc_cpu,
            self.alloc_memory,
            self.free_cpu,
            self.free_memory,
            self.free_pods,
        )


def untaken(infos: list[NodeInfo]) -> list[NodeInfo]:
    """Those of ``infos`` not ``cell_taken``, in order (told in C: a fill asks it of the
    existing nodes it may use at every decision)."""
    pods_over = map(operator.gt, map(len, map(_PODS, infos)), map(_NODE_PODS, infos))
    return list(compress(infos, map(operator.not_, map(operator.and_, map(_CELL, infos), pods_over))))


_CELL = operator.attrgetter("cell")
_PODS = operator.attrgetter("pods")
_NODE_PODS = operator.attrgetter("node_pods")
