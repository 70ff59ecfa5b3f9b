"""``CloudClient``: the narrow edge to a cloud. A handful of methods, idempotent boots.

Instances carry tags that name their controller, node and pool: the cloud is the source
of truth, and a restarted controller rebuilds its node records from ``list_instances``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from nodemanager.model import CapacityType, Taint

CONTROLLER_TAG = "nodemanager.io/controller-id"
NODE_TAG = "nodemanager.io/node"
POOL_TAG = "nodemanager.io/pool"


class InstanceState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SHUTTING_DOWN = "shutting-down"
    TERMINATED = "terminated"


@dataclass(frozen=True)
class BootRequest:
    node_name: str  # also names the instance in its tags
    pool: str
    instance_type: str
    capacity_type: CapacityType
    zone: str
    token: str  # idempotency: the same token never launches a second instance
    volume_bytes: int
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True)
class Instance:
    instance_id: str
    node_name: str
    pool: str
    instance_type: str
    capacity_type: CapacityType
    zone: str
    state: InstanceState
    launched_at: float
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        return self.state in (InstanceState.PENDING, InstanceState.RUNNING)


class CloudClient(Protocol):
    controller_id: str

    def boot(self, request: BootRequest) -> Instance:
        """Launch (or, for a token seen before, return) the instance. Raises CloudError."""
        ...

    def terminate(self, instance_ids: Sequence[str]) -> None:
        """Terminate; ids that are already gone are ignored."""
        ...

    def list_instances(self) -> list[Instance]:
        """This controller's instances that are not terminated (by the controller tag)."""
        ...

    def describe(self, instance_id: str) -> Instance:
        """One instance; raises NotFound."""
        ...

    def fetch_prices(self) -> PriceUpdate | None:
        """Current prices, or None where the cloud has no live prices. Raises CloudError."""
        ...


@dataclass(frozen=True)
class PriceUpdate:
    on_demand: Mapping[str, float] = field(default_factory=dict)  # instance type -> USD/h
    spot: Mapping[tuple[str, str], float] = field(default_factory=dict)  # (instance type, zone) -> USD/h
