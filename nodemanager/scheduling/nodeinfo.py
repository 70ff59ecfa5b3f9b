"""``NodeInfo``: a node (real, or an offering not yet booted) with the pods placed on it.

The cache keeps one per node and updates it incrementally; the scaler clones them and
adds the pods it places, so every Filter sees the node exactly as it would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from nodemanager.model import CapacityType, Pod, PodKey, Resources, Taint
from nodemanager.model.resources import ZERO

DEFAULT_MILLI_CPU = 100  # the scheduler's "non-zero" request for a pod that asks for no CPU
DEFAULT_MEMORY = 200 * 2**20  # ... and for one that asks for no memory


def nonzero_request(pod: Pod) -> tuple[int, int]:
    """(milli-cpu, bytes) used for scoring: zero requests count as the scheduler's defaults."""
    return (pod.requests.cpu or DEFAULT_MILLI_CPU, pod.requests.memory or DEFAULT_MEMORY)


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
    requested: Resources = ZERO
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    pods: dict[PodKey, Pod] = field(default_factory=dict)
    generation: int = 0

    @property
    def free(self) -> Resources:
        return self.allocatable - self.requested

    def add_pod(self, pod: Pod) -> None:
        if pod.key in self.pods:
            raise ValueError(f"pod {pod.key} is already on node {self.name}")
        self.pods[pod.key] = pod
        self.requested = self.requested + pod.requests
        cpu, memory = nonzero_request(pod)
        self.nonzero_cpu += cpu
        self.nonzero_memory += memory
        self.generation += 1

    def remove_pod(self, key: PodKey) -> Pod:
        pod = self.pods.pop(key)
        self.requested = self.requested - pod.requests
        cpu, memory = nonzero_request(pod)
        self.nonzero_cpu -= cpu
        self.nonzero_memory -= memory
        self.generation += 1
        return pod

    def fit_count(self, requests: Resources, limit: int) -> int:
        """How many more pods of ``requests`` fit (resources and the pod count), up to ``limit``."""
        room = self.allocatable.pods - len(self.pods)
        if self.cell:
            room = min(room, 0 if self.pods else 1)
        count = min(limit, room)
        free = self.free
        for name, amount in requests.items():
            count = min(count, free.get(name) // amount) if amount > 0 else count
        return max(count, 0)

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
            self.requested,
            self.nonzero_cpu,
            self.nonzero_memory,
            dict(self.pods),
            self.generation,
        )
