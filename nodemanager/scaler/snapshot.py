"""The scaler's input: an immutable picture of the cluster at one instant."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from nodemanager.dra.context import DeviceContext
from nodemanager.model import Node, NodeName, Pod, PodKey
from nodemanager.model.by_node import PodsByNode
from nodemanager.model.daemonset import DaemonSet
from nodemanager.model.pdb import PodDisruptionBudget
from nodemanager.model.pod_owners import PodSelecting
from nodemanager.model.since import Since
from nodemanager.model.volumes import VolumeContext
from nodemanager.scaler.unavailability import OfferingKey

_EMPTY: Mapping = MappingProxyType({})


@dataclass(frozen=True)
class ClusterSnapshot:
    pods: tuple[Pod, ...]  # live pods nodemanager is responsible for, waiting and placed: one per key
    nodes: tuple[Node, ...]  # node records in any state
    unavailable: Mapping[OfferingKey, float] = field(default_factory=lambda: _EMPTY)  # offering -> until
    unneeded_since: Mapping[NodeName, float] = field(default_factory=lambda: _EMPTY)  # from the last Decision
    devices: DeviceContext | None = None  # device classes, claims and published slices
    daemon_sets: tuple[DaemonSet, ...] = ()  # what every matching node runs
    volumes: VolumeContext | None = None  # claims, volumes and storage classes
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)  # labels by namespace
    pod_selecting: tuple[PodSelecting, ...] = ()  # Services, RCs, ReplicaSets, StatefulSets (default spread)
    paused_pools: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # pool -> why it boots nothing now
    reserved: frozenset[NodeName] = frozenset()  # nodes booted to replace others: not idle while their pods move
    pdbs: tuple[PodDisruptionBudget, ...] = ()  # what voluntary disruption may evict now
    operator_held: frozenset[str] = frozenset()  # nodes an operator has (cordoned, tainted): never stopped idle
    held: Mapping[PodKey, str] = field(default_factory=lambda: _EMPTY)  # pods no new node may be booted for now (nor for their class), and why
    on_the_way: Mapping[PodKey, str] = field(default_factory=lambda: _EMPTY)  # pods a node is booting for: no second new node for them, and why
    reservations_left: Mapping[str, int] = field(default_factory=lambda: _EMPTY)  # capacity reservation -> instances new nodes may still take
    one_new_node: bool = False  # a consolidation's what-if: the pods that move may take one new node at most
    nodes_since: Since[Node] | None = field(default=None, compare=False, repr=False)  # what changed in ``nodes`` since the records before, if known
    grouped: PodsByNode | None = field(default=None, compare=False, repr=False)  # ``pods`` already grouped (the cache keeps them so): see ``by_node``

    @cached_property
    def by_node(self) -> PodsByNode:
        """``pods``, waiting and by node: ``grouped`` if it was made from these very pods (a
        copy made with other pods, as a what-if is, does not carry a stale one), else grouped
        now, once."""
        grouped = self.grouped
        return grouped if grouped is not None and grouped.pods is self.pods else PodsByNode.of(self.pods)
