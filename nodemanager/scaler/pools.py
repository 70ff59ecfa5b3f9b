"""Pools as the scaler sees them: their buyable offerings and the NodeInfos of real and
not-yet-booted nodes. A node that does not exist yet carries exactly the labels, taints
and allocatable it will have, so the framework's plugins judge both kinds alike.

DaemonSets take their share first: an offering's allocatable is what is left after the
DaemonSet pods that would run on its node (by the pool's labels and taints and the type's
well-known labels), and an existing node keeps room for those of its DaemonSet pods that
are not running yet. Offerings whose DaemonSets alone do not fit are not offered."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cloud.catalog import Catalog
from nodemanager.config.reservation_schema import selecting
from nodemanager.config.schema import Packing, Pool
from nodemanager.model import ZERO, InstanceType, Node, NodeState, Offering, Resources, Taint, TaintEffect
from nodemanager.model import labels as wk
from nodemanager.model.daemonset import DaemonSet, daemon_overhead
from nodemanager.model.resources import BATCH_CPU, BATCH_MEMORY
from nodemanager.noderesource.strategy import ColocationStrategy
from nodemanager.scheduling.nodeinfo import NodeInfo


@dataclass(frozen=True, slots=True)
class Candidate:
    """One offering of a pool, with the allocatable its node would have."""

    offering: Offering
    itype: InstanceType
    allocatable: Resources  # what pods may use: after the DaemonSet pods that run there
    overhead: Resources = ZERO  # the DaemonSet pods' requests (and pod slots)

    @property
    def price(self) -> float:
        return self.offering.price


@dataclass(frozen=True)
class PoolView:
    pool: Pool
    order: int  # position in provider.yaml; ties between equal weights
    candidates: tuple[Candidate, ...]  # every offering the pool may buy, cheapest first
    taints: tuple[Taint, ...]
    batch: ColocationStrategy | None = None  # set when the pool offers batch resources

    @property
    def name(self) -> str:
        return self.pool.name

    @property
    def cell(self) -> bool:
        return self.pool.packing is Packing.CELL


def estimated_batch(itype: InstanceType, allocatable: Resources, volume_bytes: int, strategy: ColocationStrategy) -> Resources:
    """Batch capacity of an empty node by the request policy: capacity - safety margin - reserved."""
    capacity = itype.capacity(volume_bytes)
    amounts = {}
    for batch, base, percent, cap in (
        (BATCH_CPU, "cpu", strategy.cpu_reclaim_threshold_percent, strategy.batch_cpu_threshold_percent),
        (BATCH_MEMORY, "memory", strategy.memory_reclaim_threshold_percent, strategy.batch_memory_threshold_percent),
    ):
        total = capacity[base]
        margin = total * (100 - percent) // 100
        amount = max(total - margin - max(total - allocatable[base], 0), 0)
        amounts[batch] = min(amount, total * cap // 100) if cap is not None else amount
    return Resources(amounts)


def pool_views(
    pools: list[Pool],
    catalog: Catalog,
    volume_bytes: int,
    colocation: Mapping[str, ColocationStrategy] | None = None,
    daemon_sets: tuple[DaemonSet, ...] = (),
) -> list[PoolView]:
    """Views in the order pods try them: higher weight first, then provider.yaml order."""
    views = []
    colocation = colocation or {}
    for order, pool in enumerate(pools):
        taints = tuple(Taint(t.key, TaintEffect(t.effect), t.value) for t in pool.taints)
        capacity = set(pool.capacity_types)
        zones = set(pool.zones)
        ranked = catalog.ranked(Resources(), allowed=sorted(catalog.matching(**pool.type_query())), volume_bytes=volume_bytes)
        batch = colocation.get(pool.name)
        candidates = []
        reserved = {i for i, r in catalog.reservations.items() if selecting(pool.capacity_reservations, r) is not None}
        for o, t in ranked:
            if o.capacity_type in capacity and (not zones or o.zone in zones) and (not o.reservation or o.reservation in reserved):
                allocatable = t.allocatable_for(volume_bytes)
                if batch is not None:
                    allocatable = allocatable + estimated_batch(t, allocatable, volume_bytes, batch)
                overhead = ZERO
                if daemon_sets:
                    labels = wk.merged(pool.labels, _known(pool.name, t, o))
                    overhead = daemon_overhead(daemon_sets, labels, taints)
                    if not overhead.fits(allocatable):
                        continue  # its DaemonSets alone fill it
                candidates.append(Candidate(o, t, allocatable - overhead, overhead))
        views.append(PoolView(pool, order, tuple(candidates), taints, batch))
    views.sort(key=lambda v: (-v.pool.weight, v.order))
    return views


def _known(pool: str, itype: InstanceType, offering: Offering, name: str = "") -> dict[str, str]:
    return wk.well_known(
        name=name,
        pool=pool,
        instance_type=itype.name,
        zone=offering.zone,
        capacity_type=offering.capacity_type.value,
        architectures=itype.architectures,
        reservation=offering.reservation,
        capacity_block=offering.capacity_block,
    )


def offering_node_info(view: PoolView, candidate: Candidate, name: str = "") -> NodeInfo:
    offering, itype = candidate.offering, candidate.itype
    known = _known(view.name, itype, offering, name)
    return NodeInfo(
        name=name or f"<{offering}>",
        pool=view.name,
        instance_type=itype.name,
        capacity_type=offering.capacity_type,
        zone=offering.zone,
        allocatable=candidate.allocatable,
        labels=wk.merged(view.pool.labels, known),
        taints=view.taints,
        cell=view.cell,
        exists=False,
        batch_estimate=view.batch is not None,
    )


def node_node_info(node: Node, view: PoolView | None, catalog: Catalog, volume_bytes: int) -> NodeInfo:
    itype = catalog.get(node.instance_type)
    allocatable = node.allocatable
    if not allocatable and itype is not None:
        allocatable = itype.allocatable_for(volume_bytes)
    known = wk.well_known(
        name=node.name,
        pool=node.pool,
        instance_type=node.instance_type,
        zone=node.zone,
        capacity_type=node.capacity_type.value,
        architectures=itype.architectures if itype else ("x86_64",),
    )
    pool_labels: Mapping[str, str] = view.pool.labels if view else {}
    return NodeInfo(
        name=node.name,
        pool=node.pool,
        instance_type=node.instance_type,
        capacity_type=node.capacity_type,
        zone=node.zone,
        allocatable=allocatable,
        labels=wk.merged({**pool_labels, **node.labels}, known),
        taints=node.taints,
        unschedulable=node.unschedulable,
        cell=view.cell if view else False,
        # Until its first colocation sync, a booting node's batch capacity is the estimate.
        batch_estimate=bool(view and view.batch is not None and node.state in (NodeState.CREATING, NodeState.CREATED)),
    )


def capacity_of(itype: InstanceType) -> tuple[int, int]:
    """What pool limits count for a node: its machine's cpu (milli) and memory (bytes)."""
    return itype.vcpu * 1000, itype.memory_mib * 2**20
