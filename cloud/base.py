"""``CloudClient``: the narrow edge to a cloud. A handful of methods, idempotent boots.

Instances carry tags that name their controller, node and pool: the cloud is the source
of truth, and a restarted controller rebuilds its node records from ``list_instances``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from cloud.errors import OfferingError, ZoneUnavailable
from nodemanager.model import CapacityType, LaunchOption, Taint, TaintEffect
from nodemanager.model.reservation import Reservation, ReservationQuery
from nodemanager.tally import ErrorTally

CONTROLLER_TAG = "nodemanager.io/controller-id"
NODE_TAG = "nodemanager.io/node"
POOL_TAG = "nodemanager.io/pool"
# What the kubelet registers with (EC2 user data carries them too; the simulated kubelet reads the tags).
TAINTS_TAG = "nodemanager.io/taints"
STARTUP_TAINTS_TAG = "nodemanager.io/startup-taints"
RESERVATION_TAG = "nodemanager.io/capacity-reservation"  # the reservation a reserved instance was launched into


def format_taints(taints: Sequence[Taint]) -> str:
    """``key=value:Effect,...``: the kubelet's ``--register-with-taints`` spelling."""
    return ",".join(str(t) for t in taints)


def parse_taints(text: str) -> tuple[Taint, ...]:
    out = []
    for item in filter(None, (text or "").split(",")):
        head, _, effect = item.rpartition(":")
        key, _, value = head.partition("=")
        out.append(Taint(key, TaintEffect(effect), value))
    return tuple(out)


def launch_tags(request: BootRequest, controller_id: str) -> dict[str, str]:
    """The tags every instance is launched with: who owns it, and how its kubelet registers."""
    tags = {"Name": request.node_name, CONTROLLER_TAG: controller_id, NODE_TAG: request.node_name, POOL_TAG: request.pool}
    if request.taints:
        tags[TAINTS_TAG] = format_taints(request.taints)
    if request.startup_taints:
        tags[STARTUP_TAINTS_TAG] = format_taints(request.startup_taints)
    if request.reservation:
        tags[RESERVATION_TAG] = request.reservation
    return tags


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
    startup_taints: tuple[Taint, ...] = ()  # removed by the node's own agents once it is ready
    # Other offerings (same capacity type) the launch may take: with any, one fleet launch
    # offers them all and the instance it returns says which it took.
    alternatives: tuple[LaunchOption, ...] = ()
    on_demand_strategy: str = "lowest-price"  # a fleet's allocation strategies (EC2's names)
    spot_strategy: str = "price-capacity-optimized"
    reservation: str = ""  # reserved capacity: the reservation the instance is launched into (targeted)
    capacity_block: bool = False  # that reservation is a Capacity Block (EC2's capacity-block market)

    def offerings(self) -> list[tuple[str, str]]:
        """(instance type, zone) of every offering the launch may take, the planned one first."""
        return [(self.instance_type, self.zone), *((o.instance_type, o.zone) for o in self.alternatives)]


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
    image_id: str = ""  # the machine image it was launched from ("" when unknown)
    refused: tuple[OfferingError | ZoneUnavailable, ...] = ()  # offerings (or zones) a fleet launch tried and could not launch before this one
    reservation: str = ""  # the capacity reservation it runs in (reserved instances)

    @property
    def alive(self) -> bool:
        return self.state in (InstanceState.PENDING, InstanceState.RUNNING)


class CloudClient(Protocol):
    controller_id: str
    errors: ErrorTally  # failed calls by operation and code, read by /metrics

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

    def reservations(self, queries: Sequence[ReservationQuery], now: float) -> list[Reservation]:
        """The active capacity reservations any of ``queries`` selects, with the instances
        each has left (as of ``now``). Raises CloudError."""
        ...


@dataclass(frozen=True)
class PriceUpdate:
    on_demand: Mapping[str, float] = field(default_factory=dict)  # instance type -> USD/h
    spot: Mapping[tuple[str, str], float] = field(default_factory=dict)  # (instance type, zone) -> USD/h
