"""``BindingNodeScaler.compute(snapshot, now) -> Decision``: the one planning entry point.

Pure and deterministic: no I/O, no clock (``now`` is an argument), nothing kept between
calls (what must carry over, such as how long a node has been unneeded, travels in the
Decision and comes back in the next snapshot; what the scaler keeps is caches, in
``memory``). One computation is a ``run.Run`` taken through these steps (``_plan``), each
in a module of its own:

1. ``existing``: rebuild the picture: NodeInfos of live nodes with their running pods and the waiting
   pods bound to them earlier (bindings to pods no longer waiting are dropped).
2. ``existing``: place waiting pods on existing nodes through the framework: Ready nodes first, then
   nodes still booting; within those, by score.
3. ``new_nodes``: place the rest on new nodes: a pool per pod (weight, then file order), one node per
   pod in ``cell`` pools, LP-guided bin packing in ``binpack`` pools; offerings marked
   unavailable are skipped for the next cheapest; pool limits are never exceeded.
4. ``gangs``: a pod group keeps its placements only if at least ``minMember`` members got
   capacity (PodGroup holds members at Permit until then). A gang that fails in its turn
   is planned again after every other pod; one that fails then too is left out.
5. ``standby``: standby pools take the idle matching nodes left after step 2 and are topped up last.
6. ``boot_cap``: the boot cap keeps the highest-priority boots; no binding points at a node that will
   not be started. ``sizing`` right-sizes the new nodes before the cap.
7. ``stops``: nodes nothing needs are stopped once unneeded for the idle grace period; those are
   known before step 3, so the capacity they free counts toward pool limits at once.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager

from cloud.catalog import Catalog
from nodemanager.model import LaunchOption, NodeName, Pod, PodKey, Resources
from nodemanager.model.resources import extended
from nodemanager.scaler import binpack, boot_cap, existing, gangs, launch_choices, new_nodes, preferences, reservations, sizing, standby, stops
from nodemanager.scaler.by_identity import ByIdentity
from nodemanager.scaler.decision import Decision, NodeSpec, SizeFloor
from nodemanager.scaler.memory import Memory
from nodemanager.scaler.pools import PoolView
from nodemanager.scaler.run import NewNode, PodClass, Run, frontier_of, limits_budget
from nodemanager.scaler.settings import ScalerSettings
from nodemanager.scaler.size_floor import PoolLoads, floor_vcpu, pods_load
from nodemanager.scaler.snapshot import ClusterSnapshot
from nodemanager.scheduling import Registry
from nodemanager.scheduling.plugins.dynamic_resources import allocations_of

__all__ = ["BindingNodeScaler", "ScalerSettings"]

PODS_LOADS_KEPT = 8192  # nodes' pod lists whose load sure_floors keeps (beyond most clusters' nodes)
FLOOR_PODS_KEPT = 65536  # placed pods whose _keeps_floor is kept (see BindingNodeScaler.sure_floors)


def _plan(run: Run) -> list[NewNode]:
    """The steps of one computation, in order; the nodes to boot."""
    unbound = existing.rebuild(run)
    run.open.smallest = smallest_request(unbound)
    classes = _classes(run.fw.sort_pods([p for p in unbound if p.key not in run.last]), run.key)
    then = _classes(_largest_first(run.fw.sort_pods([p for p in unbound if p.key in run.last])), run.key)
    # Pods come before standby on existing nodes; deferred gangs take what the rest left.
    existing.place_on_existing(run, classes)
    existing.place_on_existing(run, then)
    standby.claim_standby(run)
    stops.mark_expired(run)
    boot_cap.hold_back(run, classes + then)
    run.left_for_new = [(c.key, list(c.pods)) for c in classes + then if c.pods]
    boot_cap.reuse_deferred(run, classes)
    new_nodes.place_on_new(run, classes)
    new_nodes.place_on_new(run, then)
    new_nodes.place_followers(run)
    gangs.settle_gangs(run)
    if run.failed:
        return []
    sizing.right_size(run)
    if run.snapshot.one_new_node:
        sizing.merge_new_nodes(run)
    standby.top_up_standby(run)
    return boot_cap.cap_boots(run)


def _launches(run: Run, started: list[NewNode]) -> tuple[list[NewNode], dict[str, tuple[tuple[LaunchOption, ...], str]]]:
    """The nodes to boot after all, and each one's launch options: none past what its
    capacity reservation has left (``reservations.settle``), none short of its pool's
    ``Strict`` minValues (``launch_choices.options_of``: the pods that narrow a node's
    offerings are taken off it first). The pods of a node not booted, and those taken off,
    go to the other new nodes where they fit (the next decision would put them there: one
    that left them waiting would not be the decision it makes again), else they wait. A gang
    left below its minimum by them fails (``run.failed``), as under the boot cap. A new
    standby node such pods take boots for them, and another takes its place, which the
    pods still left over may take in turn (the next decision would find it and them)."""
    if run.failed:
        return started, {}
    started, options = launch_choices.options_of(run, reservations.settle(run, started))
    if run.unbooted:
        left, run.unbooted = run.unbooted, []
        while left:
            existing.fill(run, _classes(run.fw.sort_pods(left), run.key))
            placed = [p.key for p in left if p.key in run.bindings]
            if not placed:
                break
            for key in placed:
                run.waiting.pop(key, None)
            # their alternatives must hold the pods they took (those that narrow them wait)
            taken = standby.taken_by_pods(run, started)
            started, options = launch_choices.options_of(run, started)
            more = standby.replace_taken(run, taken, run.memory.settings.nodes.max_boots_per_loop - len(started)) if taken else []
            if not more:
                break
            started, options = started + more, {**options, **launch_choices.options_of(run, more)[1]}
            given_back = {p.key for p in run.unbooted}  # (they narrowed the nodes they took: they wait)
            left = [p for p in left if p.key not in run.bindings and p.key not in given_back]
        gangs.drop_incomplete_gangs(run)
    return started, options


def smallest_request(pods: Iterable[Pod]) -> Resources:
    """The least cpu and the least memory any of ``pods`` asks for: a node without that
    much room takes none of them."""
    requests = [p.requests for p in pods]
    return Resources({"cpu": min((r.cpu for r in requests), default=0), "memory": min((r.memory for r in requests), default=0)})


def _keeps_floor(pod: Pod) -> bool:
    """Whether nothing in ``pod``, placed again by a what-if, lets its new node's size floor
    go (see ``sure_floors``)."""
    kept = pod.inter_pod or preferences.preferring(pod) or pod.pod_group or pod.batch or extended(pod.requests)
    return new_nodes.offering_blind(pod, moving=True) and not kept


class BindingNodeScaler:
    """Decides which waiting pod goes where, what to boot and what to stop."""

    def __init__(self, settings: ScalerSettings, catalog: Catalog, registry: Registry | None = None) -> None:
        self.settings = settings
        self.catalog = catalog
        self.memory = Memory(settings, catalog, registry)
        self._loads: PoolLoads | None = None  # the last snapshot's, for sure_floors
        self._pods_load: ByIdentity[tuple[Pod, ...], tuple[int, bool]] = ByIdentity(PODS_LOADS_KEPT)  # a node's pods -> pods_load of them
        self._floor_kept_for: ByIdentity[Pod, bool] = ByIdentity(FLOOR_PODS_KEPT)  # a moving pod -> _keeps_floor of it (asked at every quick test)
        self._largest_kept: dict[str, tuple[PoolView, list[Resources]]] = {}  # pool -> (its view, _largest of it)

    @property
    def views(self) -> list[PoolView]:
        """The pools' offerings, net of the DaemonSets of the last snapshot."""
        return self.memory.views

    def views_for(self, daemon_sets: tuple) -> list[PoolView]:
        """The pools' offerings net of these DaemonSets (see ``Memory.views_for``)."""
        return self.memory.views_for(daemon_sets)

    def sure_floors(self, snapshot: ClusterSnapshot, leaving: Collection[str], pods: Sequence[Pod]) -> dict[str, int]:
        """Per pool, the vCPU that every new node a computation on ``snapshot`` without the
        nodes ``leaving`` boots for ``pods`` surely has: its node size floor, counted from
        the pool's other nodes alone (what the computation places on them only raises it).
        Consolidation's quick test prices a replacement from these. A pool is named only
        where every new node for these pods goes through ``sizing.floored`` and it cannot let the
        floor go: no other pod waits, none of these asks for GPUs or batch resources, tells
        offerings apart (``new_nodes.offering_blind``), keeps near or apart from other pods (or prefers to), is of a
        gang or of a Job of several pods, no placed pod keeps others away by a key other than the hostname, no default
        spread constraint is hard, the profile changes no pod (``ScalerSettings.as_planned``), no offering is marked unavailable, no capped plan is kept,
        the pool has no limits, and each of these pods fits one of its types of at least its
        ``maxCPU``."""
        settings = self.settings
        if snapshot.by_node.waiting or snapshot.unavailable or self.memory.deferred is not None or any(c.hard for c in settings.spread_defaults):
            return {}
        if not settings.plans_pods_as_given:  # (added affinity may tell offerings apart, ignored resources change requests)
            return {}
        if not all(self._floor_kept_for.get(p, _keeps_floor) for p in pods):
            return {}
        if self._loads is None or self._loads.snapshot is not snapshot:
            self._loads = PoolLoads(snapshot, lambda pods: self._pods_load.get(pods, pods_load))
        if self._loads.repels or any(map(self._loads.jobs.of_several, pods)):  # (the floor lets go of those: sizing.floor_holds)
            return {}
        asks = list(dict.fromkeys(p.requests for p in pods))
        out = {}
        for view in self.memory.views_for(snapshot.daemon_sets):
            if view.cell or limits_budget(view.pool) != binpack.Budget():
                continue
            floor = floor_vcpu(view.pool, self._loads.requested(view.name, leaving))
            if floor > 0 and all(any(ask.fits(a) for a in self._largest(view)) for ask in asks):
                out[view.name] = math.ceil(floor)
        return out

    def _largest(self, view: PoolView) -> list[Resources]:
        """The frontier of the allocatables of the pool's types of at least its floor's
        ``maxCPU``: a pod none of them holds may have the floor let go."""
        kept = self._largest_kept.get(view.name)
        if kept is None or kept[0] is not view:
            whole = math.ceil(view.pool.node_size_floor.max_cpu)
            kept = self._largest_kept[view.name] = (view, frontier_of([c for c in view.candidates if c.itype.vcpu >= whole]))
        return kept[1]

    def compute(self, snapshot: ClusterSnapshot, now: float) -> Decision:
        with _collector_paused():
            return self._compute(snapshot, now)

    def _compute(self, snapshot: ClusterSnapshot, now: float) -> Decision:
        # A gang that fails must not cost anything else: what it held in its turn may have
        # been what a later pod needed. So it is planned again after every other pod (what
        # they leave may hold it), and left out if it fails then too. Each round moves at
        # least one pod a step on (in turn, last, out), so this ends.
        excluded: dict[PodKey, str] = {}
        last: frozenset[PodKey] = frozenset()
        while True:
            run = Run(self.memory, snapshot, now, excluded, last)
            try:
                started, options = _launches(run, _plan(run))
            finally:
                self.memory.pictures.spoiled(run.changed)  # lent to the run, which changed these
            if not run.failed:
                break
            failed = gangs.failed_gangs(run)
            run.close()
            excluded = {**excluded, **{k: why for k, why in failed.items() if k in last}}
            last = (last | failed.keys()) - excluded.keys()
        try:
            stopping, unneeded = stops.stops(run)
            specs = tuple(_spec(n, run.floor_applied.get(n.view.name), *options[n.info.name]) for n in started)
            return Decision(
                start=specs,
                stop=tuple(stopping),
                bindings={k: NodeName(v) for k, v in run.bindings.items()},
                unschedulable=dict(sorted(run.unschedulable.items())),
                waiting=dict(sorted((k, v) for k, v in run.waiting.items() if k not in run.bindings)),
                unneeded_since=unneeded,
                allocations={k: (NodeName(n), r) for k, (n, r) in allocations_of(run.devices).items() if any(k in run.claims_of(p) for p in run.bindings)},
            )
        finally:
            run.close()


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while one decision is computed: it allocates many
    objects that live until the decision ends, and each full collection walks them all
    (8% of a 20,000-pod decision); any cycles it leaves are collected after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _largest_first(pods: list[Pod]) -> list[Pod]:
    """Gangs planned again after they failed: each gang's members bind together at Permit,
    so their order among themselves decides no one's turn; the largest first (first fit
    decreasing) leaves the small ones the room beside them, where in queue order a small
    member could take a node of its own and leave a large one over the pool's limit."""
    turn: dict[tuple[str, str], int] = {}
    for i, pod in enumerate(pods):  # the gangs keep the queue's order among them
        turn.setdefault((pod.namespace, pod.pod_group), i)
    return sorted(pods, key=lambda p: (turn[(p.namespace, p.pod_group)], -p.requests.cpu, -p.requests.memory))


def _classes(pods: list[Pod], key_of: Callable[[Pod], tuple]) -> list[PodClass]:
    """Identical pods grouped, classes in the order of their first member."""
    classes: dict[tuple, PodClass] = {}
    for pod in pods:
        key = (key_of(pod), pod.requests)
        if key in classes:
            classes[key].pods.append(pod)
        else:
            classes[key] = PodClass([pod], key)
    return list(classes.values())


def _spec(node: NewNode, size_floor: SizeFloor | None, alternatives: tuple[LaunchOption, ...], relaxed: str) -> NodeSpec:
    c = node.candidate
    return NodeSpec(
        name=NodeName(node.info.name),
        pool=node.view.name,
        instance_type=c.itype.name,
        capacity_type=c.offering.capacity_type,
        zone=c.offering.zone,
        price=c.price,
        allocatable=c.allocatable + c.overhead,
        labels=dict(node.info.labels),
        taints=node.view.taints,
        pods=tuple(sorted(node.info.pods)),
        standby=node.standby,
        size_floor=None if node.standby else size_floor,
        alternatives=alternatives,
        relaxed=relaxed,
    )
