"""What one scaler computation decides: nodes to start and stop, bindings, and why pods wait."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from nodemanager.dra.model import AllocationResult
from nodemanager.model import CapacityType, LaunchOption, NodeName, PodKey, Resources, Taint

_EMPTY: Mapping = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class SizeFloor:
    """The smallest new node a pool boots now (``pools[].nodeSizeFloor``): this many vCPU, of
    types that hold pods asking ``gib_per_cpu`` (the pool's mix) for little more than the
    type that holds them for least."""

    cpu: float  # vCPU
    gib_per_cpu: float  # memory its pods ask for per CPU (0: none asked)

    def __str__(self) -> str:
        return f"{self.cpu:.1f} vCPU" + (f", of types suited to its pods' {self.gib_per_cpu:g} GiB per CPU" if self.gib_per_cpu else "")


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node to boot. Its name is also its idempotency token."""

    name: NodeName
    pool: str
    instance_type: str
    capacity_type: CapacityType
    zone: str
    price: float
    allocatable: Resources
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    pods: tuple[PodKey, ...] = ()  # bound from birth
    standby: bool = False
    size_floor: SizeFloor | None = None  # the pool's node size floor when it left smaller types out of this choice
    alternatives: tuple[LaunchOption, ...] = ()  # other offerings its launch may take, cheapest first (fleet launches)
    relaxed: str = ""  # what of the pool's minValues its launch falls short of (BestEffort)


@dataclass(frozen=True, slots=True)
class StopOrder:
    name: NodeName
    reason: str


@dataclass(frozen=True)
class Decision:
    start: tuple[NodeSpec, ...] = ()
    stop: tuple[StopOrder, ...] = ()
    bindings: Mapping[PodKey, NodeName] = field(default_factory=lambda: _EMPTY)  # every waiting pod with a node, in an order to bind them (see scaler)
    unschedulable: Mapping[PodKey, str] = field(default_factory=lambda: _EMPTY)  # pods no pool could ever hold
    waiting: Mapping[PodKey, str] = field(default_factory=lambda: _EMPTY)  # pods that must wait, and why
    unneeded_since: Mapping[NodeName, float] = field(default_factory=lambda: _EMPTY)  # feed into the next snapshot
    allocations: Mapping[str, tuple[NodeName, AllocationResult]] = field(default_factory=lambda: _EMPTY)  # claim -> (node, devices)

    @property
    def is_noop(self) -> bool:
        return not self.start and not self.stop
