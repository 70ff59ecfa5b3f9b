"""``BindingNodeScaler.compute(snapshot, now) -> Decision``: the one planning entry point.

Pure and deterministic: no I/O, no clock (``now`` is an argument), nothing kept between
calls (what must carry over, such as how long a node has been unneeded, travels in the
Decision and comes back in the next snapshot). Steps:

1. Rebuild the picture: NodeInfos of live nodes with their running pods and the waiting
   pods bound to them earlier (bindings to pods no longer waiting are dropped).
2. Place waiting pods on existing nodes through the framework: Ready nodes first, then
   nodes still booting; within those, by score.
3. Place the rest on new nodes: a pool per pod (weight, then file order), one node per
   pod in ``cell`` pools, LP-guided bin packing in ``binpack`` pools; offerings marked
   unavailable are skipped for the next cheapest; pool limits are never exceeded.
4. Gangs: a pod group keeps its placements only if at least ``minMember`` members got
   capacity (PodGroup holds members at Permit until then). A gang that fails in its turn
   is planned again after every other pod; one that fails then too is left out.
5. Standby pools take the idle matching nodes left after step 2 and are topped up last.
6. The boot cap keeps the highest-priority boots; no binding points at a node that will
   not be started.
7. Nodes nothing needs are stopped once unneeded for the idle grace period; those are
   known before step 3, so the capacity they free counts toward pool limits at once.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import hashlib
import heapq
import math
import operator
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property

from cloud.catalog import Catalog
from nodemanager.config.schema import NodeDefaults, Pool, ProviderConfig
from nodemanager.dra import ResourceSlice
from nodemanager.dra.context import instance_slices
from nodemanager.model import BINDABLE_STATES, LIVE_STATES, CapacityPolicy, CapacityType, NodeName, NodeState, Pod, PodKey, PodPhase, Resources
from nodemanager.model.instance_type import GIB
from nodemanager.model.interpod import NO_AFFINITY, SpreadConstraint, parse_spread_defaults
from nodemanager.model.labels import HOSTNAME, ZONE
from nodemanager.model.pod import as_regular
from nodemanager.model.pod_owners import SpreadDefaults
from nodemanager.model.resources import extended
from nodemanager.model.selectors import HARD_EFFECTS, untolerated
from nodemanager.noderesource.strategy import ColocationStrategy
from nodemanager.scaler import binpack
from nodemanager.scaler import interpod_plan as plan
from nodemanager.scaler.by_identity import ByIdentity
from nodemanager.scaler.decision import Decision, NodeSpec, SizeFloor, StopOrder
from nodemanager.scaler.deferred import DeferredNode, DeferredPlan, plain
from nodemanager.scaler.open_nodes import OpenNodes
from nodemanager.scaler.pictures import NodePictures
from nodemanager.scaler.pools import Candidate, PoolView, offering_node_info, pool_views
from nodemanager.scaler.room import RoomIndex
from nodemanager.scaler.size_floor import PoolLoads, floor_vcpu, pods_load, suited
from nodemanager.scaler.snapshot import ClusterSnapshot
from nodemanager.scaler.unavailability import ANY_TYPE
from nodemanager.scheduling import CycleState, Framework, NodeInfo, Profile, Registry
from nodemanager.scheduling.nodeinfo import counted_requests
from nodemanager.scheduling.plugins import BUILTIN_PLUGINS
from nodemanager.scheduling.plugins.dynamic_resources import DeviceState, allocations_of
from nodemanager.scheduling.plugins.interpod import spread_domains
from nodemanager.scheduling.plugins.queue_sort import priority_key
from nodemanager.scheduling.profile import DEFAULT_PROFILE
from nodemanager.scheduling.sampling import feasible_nodes_to_find
from nodemanager.scheduling.status import Code
from nodemanager.scheduling.topology import PodTopology

PROBE_MEMO_SIZE = 4096
PODS_LOADS_KEPT = 8192  # nodes' pod lists whose load sure_floors keeps (beyond most clusters' nodes)
MERGE_TRIES = 8  # cheapest offerings tried for a what-if's one new node
NEW_HOST = "\x00a new node"  # the hostname domain of a node this run may still create: it holds no pod
REGULAR_KEPT = 65536  # waiting batch pods whose copy with regular requests is kept (see BindingNodeScaler.regular_pods)
FLOOR_PODS_KEPT = 65536  # placed pods whose _keeps_floor is kept (see BindingNodeScaler.sure_floors)
_READINESS = {NodeState.AVAILABLE: 0, NodeState.CLAIMED: 0, NodeState.CREATED: 1, NodeState.CREATING: 2}


@dataclass(frozen=True)
class ScalerSettings:
    pools: tuple[Pool, ...]
    nodes: NodeDefaults = field(default_factory=NodeDefaults)
    profile: Profile = DEFAULT_PROFILE
    seed: int = 0
    colocation: Mapping[str, ColocationStrategy] = field(default_factory=dict)  # pools that offer batch resources

    @cached_property
    def spread_defaults(self) -> tuple[SpreadConstraint, ...]:
        """The cluster's default spread constraints (PodTopologySpread's plugin args)."""
        return parse_spread_defaults(self.profile.plugin_args.get("PodTopologySpread", {}))

    @classmethod
    def from_config(cls, config: ProviderConfig) -> ScalerSettings:
        colocation = {p.name: s for p in config.pools if (s := config.colocation_for(p)).enable}
        return cls(tuple(config.pools), config.nodes, config.scheduling.profile(), config.scheduling.seed, colocation)


def constraint_key(pod: Pod, node_only: bool = False) -> tuple:
    """Everything but the request that decides where a pod may go (and its rank); with
    ``node_only``, only what a node's own labels and taints decide."""
    group = (pod.namespace, pod.pod_group, pod.pod_group_min_member) if pod.pod_group else ()
    batch = pod.batch  # never packed with other pods
    return (
        batch,
        pod.host_ports,
        pod.volume_claims,
        pod.priority,
        tuple(sorted(pod.node_selector.items())),
        pod.affinity,
        pod.preferred_affinity,
        pod.tolerations,
        pod.instance_type,
        pod.capacity_policy,
        pod.zone,
        group,
        # labels and namespace: what other pods' selectors see
        *(() if node_only else (pod.spread, pod.pod_affinity, pod.kind)),
    )


@dataclass
class _Class:
    """Waiting pods that are interchangeable for scheduling."""

    pods: list[Pod]
    key: tuple | None = None  # (class key, requests) as grouped; None for a share split off while placing

    @property
    def rep(self) -> Pod:
        return self.pods[0]


@dataclass
class _NewNode:
    view: PoolView
    candidate: Candidate
    info: NodeInfo
    standby: bool = False
    accepted: Sequence[Candidate] = ()  # offerings its first pods' constraints accept


class _Run:
    """The working state of one computation."""

    def __init__(self, scaler: BindingNodeScaler, snapshot: ClusterSnapshot, now: float, excluded: dict[PodKey, str], last: frozenset[PodKey]) -> None:
        self.s = scaler
        self.excluded = excluded  # gang members that cannot all be placed: left out entirely
        self.last = last  # members of gangs that failed in their turn: planned after the rest
        self.left_for_new: list[tuple[tuple | None, list[Pod]]] = []  # the pods existing nodes did not take, by class key
        self.carried: list[DeferredNode] = []  # deferred nodes past this loop's boot cap: left as planned
        self.next_start: dict[int, int] = {}  # per readiness rank: where the next search of existing nodes begins
        self.failed: dict[PodKey, str] = {}  # gang members found to fail in this run
        self.snapshot = snapshot
        self.now = now
        self.fw = scaler.framework.fresh()
        self.fw.handle.now = now
        every_view = scaler.views_for(snapshot.daemon_sets)
        self.view_by_name = {v.name: v for v in every_view}  # existing nodes of paused pools too
        self.views = [v for v in every_view if v.name not in snapshot.paused_pools]  # pools that may boot now
        self.infos: dict[str, NodeInfo] = {}
        self.changed: set[str] = set()  # nodes whose pictures this run placed or unplaced pods on (see NodePictures)
        self.node_state: dict[str, NodeState] = {}
        self.readiness: dict[str, int] = {}  # existing nodes that may take pods: Ready first (0), then booting
        self.fw.handle.node_infos = self.infos
        self.fw.handle.volumes = snapshot.volumes
        self.topology = PodTopology(self.infos, snapshot.namespaces)
        self.fw.handle.topology = self.topology
        # Spread reaches domains with no node yet: the zones the pools offer, a new hostname.
        self.fw.handle.possible_domains = {ZONE: self._possible_zones, HOSTNAME: lambda pod: frozenset({NEW_HOST})}
        self.bindings: dict[PodKey, str] = {}
        self.unschedulable: dict[PodKey, str] = {}
        self.waiting: dict[PodKey, str] = {}
        self.new_nodes: dict[str, _NewNode] = {}
        self.names_taken = {n.name for n in snapshot.nodes}
        self.unavailable = {k for k, until in snapshot.unavailable.items() if until > now}
        self._available_memo: ByIdentity[tuple[Candidate, ...], tuple[Candidate, ...]] = ByIdentity(PROBE_MEMO_SIZE)
        self.kept: set[str] = set()  # nodes held for standby entries
        self.missing: list[tuple[PoolView, str, CapacityType, str | None, int]] = []  # standby to boot
        self.stopping: set[str] = set()  # idle past the grace: stopped by this decision
        self.devices: DeviceState | None = None
        if snapshot.devices is not None:
            self.devices = DeviceState(snapshot.devices, self._slices_for)
            self.fw.handle.devices = self.devices
        self._claim_keys: dict[tuple[str, ...], tuple] = {}
        self.open = OpenNodes(Resources(), {v.name: i for i, v in enumerate(self.views)})  # new nodes with room left
        self.zone_load: Counter[str] = Counter()  # nodes per zone, live and decided: new nodes go to the emptiest
        self.type_tables = scaler.type_tables  # the packer's figures per candidate list
        self._floors: dict[str, SizeFloor | None] = {}  # pool -> its node size floor (see _floored)
        # pool -> the floor that left types out of its new nodes' choice in this run (its vCPU
        # alone, where the suited types were let go)
        self.floor_applied: dict[str, SizeFloor] = {}

    def close(self) -> None:
        """Drop what refers back to this run (its bound methods, held by the framework's
        handle and by the device state), so that the run and all it made are freed as soon
        as it is done with, rather than left to the cycle collector: every computation's
        run, framework and plugins were cyclic garbage, walked by the collector."""
        self.fw.handle.possible_domains = {}
        self.fw.handle.devices = None
        self.devices = None

    def claims_of(self, pod: PodKey) -> tuple[str, ...]:
        node = self.bindings.get(pod)
        placed = self.infos[node].pods.get(pod) if node in self.infos else None
        return placed.claims if placed is not None else ()

    def _slices_for(self, info: NodeInfo) -> list[ResourceSlice]:
        """Published slices for a node whose drivers published; else its instance type's GPUs."""
        if info.exists and self.devices is not None:
            published = self.devices.context.published_for(info.name)
            if published:
                return published
        itype = self.s.catalog.get(info.instance_type)
        return list(instance_slices(itype, info.name if info.exists else "")) if itype else []

    def key(self, pod: Pod, node_only: bool = False) -> tuple:
        """constraint_key, plus what the pod's claims ask for (claims of the same shape are
        interchangeable, whatever their names)."""
        if not pod.claims:
            # Pods are immutable and the cache keeps the same objects between computations:
            # a pod's key is made once (thousands wait through many computations).
            kept = self.s.pod_keys
            known = kept.get((id(pod), node_only))
            if known is None or known[0] is not pod:
                known = kept[id(pod), node_only] = (pod, constraint_key(pod, node_only))
            return known[1]
        found = self._claim_keys.get(pod.claims)
        if found is None:
            claims = self.devices.context.claims if self.devices else {}
            found = tuple((c.requests, c.constraints, c.allocation is not None) if (c := claims.get(k)) is not None else ("missing", k) for k in pod.claims)
            self._claim_keys[pod.claims] = found
        return (*constraint_key(pod, node_only), found)

    def _possible_zones(self, pod: Pod) -> frozenset[str]:
        """Zones where some pool offers a node the pod could run on: one its node constraints
        accept, of a pool whose taints it tolerates. A zone only an untolerated pool offers is
        no spread domain for the pod (whatever its ``nodeTaintsPolicy``: that policy is about
        nodes that exist), or the pod would be pinned to a zone no node of its can ever be in."""
        zones = set()
        for view in self.views:
            if view.taints and untolerated(view.taints, pod.tolerations, HARD_EFFECTS):
                continue
            for cand in view.candidates:
                if cand.offering.zone not in zones and not self._blocked(cand):
                    info = offering_node_info(view, cand)
                    if pod.accepts_node(info.labels, info.name):
                        zones.add(cand.offering.zone)
        return frozenset(zones)

    def _blocked(self, candidate: Candidate) -> bool:
        """Marked unavailable: the offering itself, or its whole zone."""
        o = candidate.offering
        return o.key in self.unavailable or (ANY_TYPE, o.capacity_type, o.zone) in self.unavailable

    # -- 1. the picture -----------------------------------------------------------------
    def rebuild(self) -> list[Pod]:
        kept = self.s.pod_keys
        if len(kept) > 2 * len(self.snapshot.pods) + 1024:  # keys of pods gone (or replaced) are dropped
            live = {id(p) for p in self.snapshot.pods}
            self.s.pod_keys = {k: v for k, v in kept.items() if k[0] in live}
        regular = not self.s.settings.colocation  # no pool offers batch resources: batch requests are ordinary cpu and memory
        defaults = SpreadDefaults(self.s.settings.spread_defaults, self.snapshot.pod_selecting)
        grouped = self.snapshot.by_node  # the placed pods by node (batch ones as the pictures see them: see NodePictures)
        waiting: dict[PodKey, Pod] = {}
        for pod in grouped.waiting:
            if pod.phase is PodPhase.PENDING and not pod.of_node and pod.key not in self.excluded:
                waiting[pod.key] = defaults.apply(self.s.regular_pods.get(pod, as_regular) if regular and pod.batch else pod)
        self.waiting.update(self.excluded)
        pictures = self.s.pictures  # allowing for these DaemonSets: views_for saw them first
        pictures.forget_all_but(self.snapshot.nodes)
        zones = []
        # (names bound once: this walks every node of the cluster at every decision)
        infos, node_state, readiness = self.infos, self.node_state, self.readiness
        picture, view_of, placed = pictures.info, self.view_by_name.get, grouped.placed
        for node in sorted(self.snapshot.nodes, key=_NAME):
            name, state = node.name, node.state
            if state not in LIVE_STATES:
                continue
            info = infos[name] = picture(node, view_of(node.pool), placed.get(name, ()))
            node_state[name] = state
            if state in _READINESS:
                readiness[name] = _READINESS[state]
            zones.append(info.zone)
        self.zone_load.update(zones)  # (counted in C: a count per node was a hundredth of a busy day)
        # Earlier bindings are kept while their pod still waits and still passes every
        # filter on that node (it may have been resized, tainted or filled meanwhile).
        carried = [(pod, n.name) for n in self.snapshot.nodes if n.name in self.infos for k in n.bound_pods if (pod := waiting.get(k)) is not None]
        kept = self.keep_placed(carried)
        prefiltered: dict[tuple, CycleState | None] = {}  # a class's PreFilter answer (see _shares_prefilter)
        # Where a pod of such a class passed every filter, another of it passes them too as
        # long as the node has room for it (as ``_fill_class`` counts): pods placed meanwhile
        # change only the node's room, but for one keeping others away (answers start again).
        passed: set[tuple[tuple, str]] = set()
        for pod, name in sorted(carried, key=lambda pn: (priority_key(pn[0]), pn[1])):
            if pod.key in self.bindings:
                continue
            if name in kept:  # on the picture as the last computation placed it (passing as it did then), where topology counts find it
                self.bindings[pod.key] = name
                self.changed.add(name)
                continue
            shared = _shares_prefilter(pod)
            cls = (self.key(pod), pod.requests) if shared else None
            if cls in prefiltered:
                state = prefiltered[cls]
            else:
                state = CycleState()
                state = state if self.fw.run_pre_filter_plugins(state, pod).is_success() else None
                if shared:
                    prefiltered[cls] = state
            if state is None:
                continue
            info = self.infos[name]
            if (cls, name) in passed:
                fits = info.fit_count(info.fit_request(pod), 1) > 0
            else:
                fits = self.fw.run_filter_plugins(state, pod, info).is_success()
                if fits and shared:
                    passed.add((cls, name))
            if fits:
                self._place(pod, info, CycleState() if shared else state)
                if pod.pod_affinity.anti_required:  # other pods' PreFilter counts it (symmetry)
                    prefiltered.clear()
                    passed.clear()
        return [p for k, p in waiting.items() if k not in self.bindings]

    def keep_placed(self, carried: list[tuple[Pod, str]]) -> set[str]:
        """The existing nodes whose pictures keep the pods the last computation placed on
        them (``NodePictures.placed``); the others' are taken off. A node keeps them when
        they are exactly the pods carried there now (each placed again otherwise: taken off,
        filtered, placed, at every decision while its node boots). They pass again as they
        did: the node and its own pods are unchanged, and every carried pod is one whose
        PreFilter, Filter, Reserve and Permit look only at itself and the node (no
        inter-pod constraints, host ports, claims, volumes or gang; ``_shares_prefilter``),
        with no placed pod whose required anti-affinity could refuse it, and every plugin
        one of ours (``keeps_placed``). Their order does not matter: requests only add up,
        and pods that fit together fit one by one."""
        placed = self.s.pictures.placed
        keep: set[str] = set()
        if placed and self.s.keeps_placed and all(_shares_prefilter(p) for p, _ in carried) and not any(map(_ANTI_PODS, self.infos.values())):
            carried_on: dict[str, set[int]] = defaultdict(set)
            for pod, name in carried:
                carried_on[name].add(id(pod))
            keep = {name for name, pods in placed.items() if len(pods) == len(carried_on.get(name, ())) and set(map(id, pods)) == carried_on[name]}
        self.s.pictures.settle(keep)
        return keep

    # -- placing ------------------------------------------------------------------------
    def _place(self, pod: Pod, info: NodeInfo, state: CycleState) -> bool:
        """Assume ``pod`` onto ``info``: Reserve, then Permit. False (and undone) on failure."""
        self.changed.add(info.name)
        info.add_pod(pod)
        if self.fw.run_reserve_and_permit(state, pod, info.name).code in (Code.SUCCESS, Code.WAIT):
            self.bindings[pod.key] = info.name
            self.topology.added(pod, info)
            if info.name in self.new_nodes:
                self.open.update(info)
            return True
        info.remove_pod(pod.key)
        return False

    def _unplace(self, key: PodKey) -> None:
        node = self.bindings.pop(key)
        self.changed.add(node)
        self.topology.removed(self.infos[node].remove_pod(key), self.infos[node])
        if node in self.new_nodes:
            self.open.update(self.infos[node])

    # -- 2. existing nodes --------------------------------------------------------------
    def place_on_existing(self, classes: list[_Class]) -> None:
        """Fill nodes that exist (Ready first, then booting), by score within each rank."""
        if any(c.pods for c in classes):  # (most decisions leave no pods for the second fill)
            self._fill(classes, [info for name, info in self.infos.items() if name in self.readiness])

    def _fill(self, classes: list[_Class], candidates: list[NodeInfo] | None = None) -> None:
        """Place pods of ``classes`` on ``candidates`` by score within each readiness rank,
        or (None) on the nodes this run decided to boot that have room, tightest first."""
        if (candidates is not None and not candidates) or not any(c.pods for c in classes):
            return
        rooms: list[tuple[int, RoomIndex]] = []  # by readiness rank (nodes new in this run last), best first
        if candidates is not None:
            ranks: dict[int, list[NodeInfo]] = defaultdict(list)
            for info in candidates:
                ranks[self.readiness.get(info.name, len(_READINESS))].append(info)
            rooms = [(rank, RoomIndex(ranks[rank])) for rank in sorted(ranks)]
        namespaces = self.topology.namespace_labels
        for cls in classes:
            if not cls.pods:
                continue
            nodes = [(rank, with_room) for rank, room in rooms if (with_room := room.with_room_for(cls.rep))] if candidates is not None else None
            if nodes is not None and not nodes:
                continue
            if cls.rep.inter_pod and not plan.static(cls.rep, namespaces):
                # Where it may go depends on where the others went: one at a time.
                cls.pods = [pod for pod in cls.pods if self._fill_class([pod], nodes)]
            else:
                cls.pods = self._fill_class(cls.pods, nodes)

    def _fill_class(self, pods: list[Pod], candidates: list[tuple[int, list[NodeInfo]]] | None) -> list[Pod]:
        """Identical pods onto ``candidates`` (see ``_fill``); returns those left over. The
        filters run for the first pod per node; resources, ``host_cap`` for inter-pod
        constraints and host ports (one per node) say how many more that node takes."""
        pod = pods[0]
        state = CycleState()
        if not self.fw.run_pre_filter_plugins(state, pod).is_success():
            return pods

        def passes(info: NodeInfo) -> bool:
            return info.fit_count(info.fit_request(pod), 1) > 0 and self.fw.run_filter_plugins(state, pod, info).is_success()

        if candidates is None:
            zone = pod.node_selector.get(ZONE) or pod.zone
            order: Iterable[NodeInfo] = (i for i in self.open.for_request(pod.requests.cpu, pod.requests.memory, zone) if passes(i))
        else:
            order = self._sampled(state, pod, candidates)
        left = deque(pods)
        refused: list[Pod] = []
        for info in order:
            count = info.fit_count(info.fit_request(pod), len(left))
            # Pods of a class ask for the same host ports: two of them never share a node.
            cap = 1 if pod.host_ports else plan.host_cap(pod, info, self.topology) if pod.inter_pod else None
            for _ in range(count if cap is None else min(count, cap)):
                candidate = left.popleft()
                if not self._place(candidate, info, state if len(pods) == 1 else CycleState()):
                    refused.append(candidate)
                    break
            if not left:
                break
        return refused + list(left)

    def _sampled(self, state: CycleState, pod: Pod, ranked: list[tuple[int, list[NodeInfo]]]) -> Iterator[NodeInfo]:
        """Existing nodes for ``pod``'s class, best first: by readiness rank (Ready nodes
        before booting ones), and within each, as kube-scheduler searches a large cluster:
        filter from where the last search stopped until ``feasible_nodes_to_find`` nodes pass,
        score those, offer them by score; if pods are left, the search goes on from there.
        (A rank's nodes are those that had the class's CPU free, most free first; kube walks
        its node list.) The filters look at as many nodes at a time as may still be wanted:
        the same nodes pass, and the search stops at the same node, as one node at a time."""
        for rank, nodes in ranked:
            want, count = feasible_nodes_to_find(len(nodes)), len(nodes)
            start, seen = self.next_start.get(rank, 0) % count, 0
            walk = nodes[start:] + nodes[:start]
            while seen < count:
                feasible: list[NodeInfo] = []
                while seen < count and len(feasible) < want:
                    end = min(count, seen + want - len(feasible))
                    feasible += self.fw.feasible(state, pod, walk[seen:end])
                    seen = end
                self.next_start[rank] = start + seen
                scores, status = self.fw.run_score_plugins(state, pod, feasible) if len(feasible) > 1 else ({}, None)
                totals = _summed(scores.values()) if status is None or status.is_success() else {}
                best = [(-totals.get(i.name, 0), i.name, i) for i in feasible]
                heapq.heapify(best)  # pods are often placed before most of them are offered
                while best:
                    yield heapq.heappop(best)[2]

    # -- 3. new nodes -------------------------------------------------------------------
    def _probe(self, view: PoolView, pod: Pod) -> tuple[tuple[Candidate, ...], str, bool]:
        """The pool's offerings this pod's constraints accept (any size), or why none and
        whether that may change (a PreFilter that says "not yet", such as an unbound
        volume claim). A pure function of the pool, the constraints and the cluster's
        objects, so the scaler memoizes it per computation's inputs."""
        volumes = self.snapshot.volumes
        key = (view.name, self.key(pod, node_only=True), tuple(volumes.claims.get(k) for k in pod.volume_claims) if volumes and pod.volume_claims else ())
        memo = self.s.probe_memo
        if key not in memo:
            if len(memo) >= PROBE_MEMO_SIZE:
                memo.clear()
            memo[key] = self._probe_uncached(view, pod)
        return memo[key]  # one tuple per answer: what is derived from it is kept by its identity

    def _probe_uncached(self, view: PoolView, pod: Pod) -> tuple[tuple[Candidate, ...], str, bool]:
        probe = dataclasses.replace(node_level(pod), requests=Resources())
        state = CycleState()
        status = self.fw.run_pre_filter_plugins(state, probe)
        if not status.is_success():
            return (), status.message, status.code is Code.UNSCHEDULABLE
        with_room = tuple(c for c in view.candidates if c.allocatable.pods >= 1)  # the one thing an empty request checks
        if with_room and _offering_blind(probe):  # every offering with a pod slot answers as the first does
            status = self.fw.run_filter_plugins(state, probe, offering_node_info(view, with_room[0], NEW_HOST))
            if status.is_success():
                return with_room, "", False
        accepted: list[Candidate] = []
        reasons: dict[str, int] = defaultdict(int)
        for cand in view.candidates:
            status = self.fw.run_filter_plugins(state, probe, offering_node_info(view, cand, NEW_HOST))
            if status.is_success():
                accepted.append(cand)
            else:
                reasons[status.message] += 1
        top = max(sorted(reasons), key=lambda r: reasons[r]) if reasons else "the pool offers no instance type"
        return tuple(accepted), top, False

    def _budget(self, view: PoolView) -> binpack.Budget:
        """What the pool may still add, given its live nodes and the ones decided so far."""
        budget = _limits_budget(view.pool)
        if budget == binpack.Budget():
            return budget  # no limits: nothing to count
        for name, info in self.infos.items():
            itype = self.s.catalog.get(info.instance_type)
            if info.pool == view.name and itype is not None and name not in self.stopping:
                budget.spend(itype)
        return budget

    def _drop_empty_new_nodes(self) -> None:
        for name, node in list(self.new_nodes.items()):
            if not node.info.pods and not node.standby:
                self._forget(name)

    def place_on_new(self, classes: list[_Class]) -> None:
        groups: dict[tuple, list[_Class]] = defaultdict(list)
        for cls in classes:
            if cls.pods:
                groups[self.key(cls.rep)].append(cls)

        def rank(rep: Pod) -> int:
            """Within a priority, the most constrained choose first and the rest fill in:
            pods that need a node to themselves (or nearly), other inter-pod groups, the rest."""
            if not rep.inter_pod:
                return 2
            return 0 if plan.host_cap(rep, None, self.topology) is not None else 1

        for key in sorted(groups, key=lambda k: (-groups[k][0].rep.priority, rank(groups[k][0].rep), priority_key(groups[k][0].rep))):
            self._place_group(groups[key])

    def _place_group(self, group: list[_Class], zoned: bool = False) -> None:
        """New nodes for one constraint group: each pool in turn takes what it can; what a
        pool cannot take (no match, no fit, limit, unavailable) moves on to the next.
        ``zoned``: the zone-level constraints are settled (the pods are pinned)."""
        pending = [c for c in group if c.pods]
        if not pending:
            return
        rep = pending[0].rep  # the group's pods share every constraint
        # Placed pods' anti-affinity to it, by topology key (a new node's hostname holds none).
        namespaces = self.topology.namespace_labels
        anti = self.topology.anti_affinity()
        repelled = {t.topology_key for t, seen in anti.items() if any(seen.values()) and t.selects(rep.namespace, rep.labels, namespaces)}
        repelled.discard(HOSTNAME)
        if not zoned and plan.plannable(rep) and ((rep.inter_pod and plan.zone_level(rep)) or repelled == {ZONE}):
            self._place_by_zone(pending)
            return
        # Nodes this run already decided to boot come first: they have room to spare.
        self._fill(group)
        reasons: dict[int, list[tuple[str, bool]]] = defaultdict(list)  # class -> (why, may clear)
        one_by_one = (rep.inter_pod and not plan.static(rep, self.topology.namespace_labels)) or bool(repelled - {ZONE})
        for cls in group if one_by_one else ():
            cls.pods = [pod for pod in cls.pods if not self._new_node_for(pod, len(cls.pods), reasons[id(cls)])]
        for view in self.views if not one_by_one else ():
            pending = [c for c in group if c.pods]
            if not pending:
                break
            accepted, why, transient = self._probe(view, pending[0].rep)
            if not accepted:
                for c in pending:
                    reasons[id(c)].append((f"pool {view.name}: {why}", transient))
                continue
            available = self._available(accepted)
            largest = self._frontier(accepted)
            largest_available = self._frontier(available) if len(available) < len(accepted) else largest
            usable = []
            for c in pending:
                if not any(c.rep.requests.fits(a) for a in largest):
                    reasons[id(c)].append((f"pool {view.name}: no instance type can hold {_describe(c.rep.requests)}", False))
                elif not any(c.rep.requests.fits(a) for a in largest_available):
                    reasons[id(c)].append((f"pool {view.name}: every fitting offering is marked unavailable after capacity errors", True))
                else:
                    usable.append(c)
            if usable and any(c.rep.claims for c in usable):
                self._place_with_devices(view, usable, available, reasons)
            elif usable:
                self._pack(view, usable, available, reasons)
        self._report(group, reasons)

    def _available(self, accepted: tuple[Candidate, ...]) -> tuple[Candidate, ...]:
        """``accepted`` less the offerings marked unavailable, once per answer of ``_probe``
        in this computation."""
        if not self.unavailable:
            return accepted
        return self._available_memo.get(accepted, lambda offerings: tuple(c for c in offerings if not self._blocked(c)))

    def _frontier(self, offerings: Sequence[Candidate]) -> list[Resources]:
        """``binpack.frontier`` of the offerings' allocatables, once per list of offerings (a
        pool's accepted offerings are the same for every group with the same constraints, and
        the scaler keeps them across computations)."""
        return self.s.frontiers.get(offerings, _frontier_of)

    def _report(self, group: list[_Class], reasons: dict[int, list[tuple[str, bool]]]) -> None:
        """Pods of ``group`` left over wait (if a reason may clear) or are unschedulable."""
        for c in group:
            if c.pods:
                why = reasons[id(c)] + [(f"pool {pool}: {note}", True) for pool, note in sorted(self.snapshot.paused_pools.items())]
                text = "; ".join(dict.fromkeys(r for r, _ in why)) or "no pool accepts the pod"
                target = self.waiting if any(transient for _, transient in why) else self.unschedulable
                for pod in c.pods:
                    target[pod.key] = text
                c.pods = []

    def _place_by_zone(self, group: list[_Class]) -> None:
        """Zone-level constraints settled for the whole group (``interpod_plan``), then each
        zone's share placed as zonal pods."""
        rep = group[0].rep
        zones = sorted(self._possible_zones(rep))
        pods = [p for c in group for p in c.pods]
        chosen, why = plan.plan_zones(pods, zones, self.topology, lambda c: spread_domains(self.fw.handle, rep, c, self.topology), self.zone_load)
        by_zone: dict[str, list[_Class]] = defaultdict(list)
        for cls in group:
            shares: dict[str, list[Pod]] = defaultdict(list)
            for pod in cls.pods:
                if pod.key in chosen:
                    shares[chosen[pod.key]].append(plan.pinned(pod, chosen[pod.key]))
            for zone, members in shares.items():
                by_zone[zone].append(_Class(members))
            cls.pods = [p for p in cls.pods if p.key not in chosen]
        for zone in sorted(by_zone):
            self._place_group(by_zone[zone], zoned=True)
        # Bindings list pods in the order they may be bound: each passes every filter given
        # the ones before it. Zone by zone is not such an order; the plan's is.
        for key in chosen:
            if key in self.bindings:
                self.bindings[key] = self.bindings.pop(key)
        if not zones:
            why = "no pool offers a zone the pod's node constraints accept"
        self._report(group, {id(c): [(why, False)] for c in group})

    def _new_node_for(self, pod: Pod, kin: int, reasons: list[tuple[str, bool]]) -> bool:
        """A pod whose place depends on other pods': a node this run decided to boot if the
        constraints allow it there, else a new node of the first pool with an offering the
        constraints accept. The constraints are tested once per zone and capacity type (what
        a new node's domain is), on a node with a fresh hostname; among the groups that pass,
        the zone with the fewest nodes so far (any pool); the type is the packer's choice
        for the ``kin`` pods of its class that may share the node (one if they keep apart by
        hostname)."""
        if not self._fill_class([pod], None):
            return True
        state = CycleState()
        status = self.fw.run_pre_filter_plugins(state, pod)
        if not status.is_success():
            reasons.append((status.message, status.code is Code.UNSCHEDULABLE))
            return False
        cap = plan.host_cap(pod, None, self.topology)
        shares = kin if cap is None else max(min(kin, cap), 1)
        for view in self.views:
            accepted, why, transient = self._probe(view, pod)
            usable = [c for c in accepted if not self._blocked(c) and pod.requests.fits(c.allocatable)]
            if not usable:
                text = why if not accepted else f"no available offering can hold {_describe(pod.requests)}"
                reasons.append((f"pool {view.name}: {text}", transient or bool(accepted)))
                continue
            groups: dict[tuple[str, CapacityType], list[Candidate]] = defaultdict(list)
            for c in usable:
                groups[(c.offering.zone, c.offering.capacity_type)].append(c)
            passing, refusal = [], ""
            for group_key, members in groups.items():
                verdict = self.fw.run_filter_plugins(state, pod, offering_node_info(view, members[0], NEW_HOST))
                if verdict.is_success():
                    passing.append(group_key)
                else:
                    refusal = verdict.message
            if not passing:
                reasons.append((f"pool {view.name}: {refusal}", False))
                continue
            zone, capacity = min(passing, key=lambda g: (self.zone_load[g[0]], g))
            one_each = view.cell or bool(pod.host_ports)
            fills, _, _ = binpack.pack(
                [pod.requests], [1 if one_each else shares], groups[(zone, capacity)], self._budget(view), per_node=1 if one_each else None
            )
            if not fills:
                reasons.append((f"pool {view.name}: limit reached", True))
                continue
            node = self._new_node(view, fills[0].candidate, accepted=groups[(zone, capacity)])
            if self._place(pod, node.info, state):
                return True
            reasons.append((f"pool {view.name}: rejected at reserve or permit", True))
        return False

    def _place_with_devices(self, view: PoolView, classes: list[_Class], available: Sequence[Candidate], reasons: dict[int, list[tuple[str, bool]]]) -> None:
        """Pods with claims, one at a time: a node chosen for an earlier pod takes the next
        while its devices last (the allocator decides); otherwise a node of the cheapest
        type whose devices satisfy the claims."""
        for cls in classes:
            pending = list(cls.pods)
            cls.pods = []
            for pod in pending:
                single = _Class([pod])
                self._fill([single], [n.info for n in self.new_nodes.values() if n.view is view])
                if single.pods:
                    self._pack(view, [single], available, reasons)
                if single.pods:
                    cls.pods += single.pods
                    reasons[id(cls)] += reasons.pop(id(single), [])

    def _pack(self, view: PoolView, classes: list[_Class], available: Sequence[Candidate], reasons: dict[int, list[tuple[str, bool]]]) -> None:
        """Boot nodes of ``view`` for ``classes``; pods left over stay in their class."""
        classes = sorted(classes, key=lambda c: (-c.rep.requests.cpu, -c.rep.requests.memory, priority_key(c.rep)))
        available = self._floored(view, available, [c.rep.requests for c in classes])
        # A group is all batch pods or none, so its own requests are what it takes from a new
        # node; a high-priority pod is never limited by the batch estimate.
        # Pods with claims get a node each; more share it when its devices allow (via _fill).
        # So do pods with host ports (a group shares its ports: two of them never share a node).
        one_each = view.cell or any(c.rep.claims or c.rep.host_ports for c in classes)
        # So do pods that keep apart by hostname, up to what their constraints allow.
        per_node = 1 if one_each else plan.host_cap(classes[0].rep, None, self.topology)
        requests, counts = [c.rep.requests for c in classes], [len(c.pods) for c in classes]
        groups = [[i] for i in range(len(classes))]
        if len(classes) > binpack.MAX_CLASSES:
            if per_node is None and self._pack_similar(view, classes, available):
                if any(c.pods for c in classes):
                    self._pack(view, [c for c in classes if c.pods], available, reasons)
                return
            # Planned for each group's largest request, which every member fits (a limit
            # reached, or a group's typical pod fits nowhere: the packer still says why).
            groups = binpack.similar(requests, counts, binpack.MAX_CLASSES)[0]
            requests = [functools.reduce(Resources.max, (requests[i] for i in g)) for g in groups]
            counts = [sum(counts[i] for i in g) for g in groups]
        fills, _, why = binpack.pack(requests, counts, available, self._budget(view), per_node=per_node, tables=self.type_tables)
        queues = [deque(p for i in g for p in classes[i].pods) for g in groups]
        refused: set[PodKey] = set()
        for node, fill in self._new_nodes_for(view, fills, available):
            for g, k in enumerate(fill.counts):
                for _ in range(k):
                    pod = queues[g].popleft()
                    if not self._place(pod, node.info, CycleState()):
                        refused.add(pod.key)
        for g, members in enumerate(groups):
            left = {p.key for p in queues[g]}
            for cls in (classes[i] for i in members):
                cls.pods = [p for p in cls.pods if p.key in refused or p.key in left]
                if any(p.key in refused for p in cls.pods):
                    reasons[id(cls)].append((f"pool {view.name}: rejected at reserve or permit", True))
                if any(p.key in left for p in cls.pods):
                    limit = why.get(g, "")
                    text = f"pool {view.name}: limit on {limit[6:]} reached" if limit.startswith("limit:") else f"pool {view.name}: no room"
                    if per_node is not None and not one_each:
                        text += f" ({plan.why_apart(cls.rep)})"
                    reasons[id(cls)].append((text, True))

    def _pack_similar(self, view: PoolView, classes: list[_Class], available: Sequence[Candidate]) -> bool:
        """Many distinct requests: the packer plans nodes for groups of similar requests (its
        work grows with classes x nodes, and 10,000 pods of 10,000 sizes are 10,000 classes).
        Each group's pods, largest first, are dealt to the nodes planned for it back and forth,
        so every node gets about the group's typical pod; a pod its node cannot hold after all
        then goes to the tightest node with room. Nodes no pod took are not booted. Whether any
        pod was placed: the rest go round again."""
        groups, fills = binpack.pack_similar([c.rep.requests for c in classes], [len(c.pods) for c in classes], available, self._budget(view), self.type_tables)
        planned = [(node, fill.counts) for node, fill in self._new_nodes_for(view, fills, available)]
        placed: set[PodKey] = set()
        for g, members in enumerate(groups):
            pods = sorted((p for i in members for p in classes[i].pods), key=lambda p: (-p.requests.cpu, -p.requests.memory, p.key))
            takers = [(node, counts[g]) for node, counts in planned if counts[g]]
            rows = [[node for node, k in takers if k > r] for r in range(max((k for _, k in takers), default=0))]
            for pod, node in zip(pods, (node for r, row in enumerate(rows) for node in (row if r % 2 == 0 else row[::-1])), strict=False):
                if node.info.fit_count(node.info.fit_request(pod), 1) > 0 and self._place(pod, node.info, CycleState()):
                    placed.add(pod.key)
        for cls in classes:
            cls.pods = [p for p in cls.pods if p.key not in placed]
        self._fill(classes)
        for node, _ in planned:
            if not node.info.pods:
                self._forget(node.info.name)
        return bool(placed) or not any(c.pods for c in classes)

    def _new_nodes_for(self, view: PoolView, fills: list[binpack.Fill], available: Sequence[Candidate]) -> Iterator[tuple[_NewNode, binpack.Fill]]:
        """A new node for each copy of each fill, in turn, each in the emptiest zone that
        offers its type at no higher price."""
        same_type = self.s.by_type.get(available, _by_type)
        for fill in fills:
            chosen = fill.candidate
            # the same type and capacity type at no higher price, in every zone offering it
            zones = [c for c in same_type.get((id(chosen.itype), chosen.offering.capacity_type), ()) if c.price <= chosen.price] or [chosen]
            for _ in range(fill.copies):
                yield self._new_node(view, self._emptiest(zones), accepted=available), fill

    def _new_node(self, view: PoolView, candidate: Candidate, standby: bool = False, accepted: Sequence[Candidate] = ()) -> _NewNode:
        i = len(self.new_nodes)
        while True:
            digest = hashlib.sha256(f"{self.now}|{i}|{view.name}".encode()).hexdigest()[:8]
            name = f"{self.s.settings.nodes.name_tag}-{view.name}-{digest}"
            if name not in self.names_taken:
                break
            i += 1
        self.names_taken.add(name)
        info = offering_node_info(view, candidate, name)
        self.infos[name] = info
        self.zone_load[info.zone] += 1
        node = _NewNode(view, candidate, info, standby, accepted)
        self.new_nodes[name] = node
        self.open.update(info)
        return node

    def _forget(self, name: str) -> None:
        """A new node this decision will not boot after all."""
        self.zone_load[self.infos.pop(name).zone] -= 1
        del self.new_nodes[name]
        self.open.remove(name)

    def _emptiest(self, choices: list[Candidate]) -> Candidate:
        """The choice in the zone with the fewest nodes: where nothing asks for a zone, new
        nodes spread over the zones instead of piling into the first one."""
        return min(choices, key=lambda c: (self.zone_load[c.offering.zone], c.offering.zone))

    # -- 4. gangs -----------------------------------------------------------------------
    def settle_gangs(self) -> None:
        """Members still held at Permit when planning ends are rejected; Unreserve runs."""
        for waiting in self.fw.handle.iterate_over_waiting_pods():
            waiting.reject("pod group did not reach minMember in this computation", "PodGroup")
        for waiting, outcome in self.fw.take_resolved():
            if not outcome.is_success():
                self.failed[waiting.pod.key] = outcome.message

    def failed_gangs(self) -> dict[PodKey, str]:
        """Every member of each gang that failed, with why: the gang moves as a whole (a
        member no pool accepts stays unschedulable, in its turn)."""
        pods = {p.key: p for p in self.snapshot.pods}
        gangs = {(pods[k].namespace, pods[k].pod_group) for k in self.failed}
        stalled = {k: why for k, why in self.waiting.items() if k not in self.excluded and (pods[k].namespace, pods[k].pod_group) in gangs}
        return {**stalled, **self.failed}

    # -- 5. standby ---------------------------------------------------------------------
    def _standby_entries(self) -> Iterable[tuple[PoolView, str, CapacityType, str | None, int]]:
        for view in self.views:
            for entry in view.pool.standby:
                itype = entry.instance_type or self.s.settings.nodes.default_instance_type
                yield view, itype, CapacityType.SPOT if entry.spot else CapacityType.ON_DEMAND, entry.zone, entry.count

    def claim_standby(self) -> None:
        """Standby entries take idle nodes that match them (after pods had their pick)."""
        for view, itype, capacity, zone, count in self._standby_entries():
            matching = sorted(
                name
                for name, info in self.infos.items()
                if info.instance_type == itype
                and info.pool == view.name
                and info.capacity_type is capacity
                and (not zone or info.zone == zone)
                and name not in self.kept
                and not _holds_work(info)
                and self.node_state.get(name) in BINDABLE_STATES
            )
            taken = matching[:count]  # the first by name
            self.kept.update(taken)
            self.missing.append((view, itype, capacity, zone, count - len(taken)))

    def top_up_standby(self) -> None:
        for view, itype, capacity, zone, want in self.missing:
            if want <= 0:
                continue  # the entry is made up (most decisions): no offering to look through
            options = [
                c
                for c in view.candidates
                if c.itype.name == itype and c.offering.capacity_type is capacity and (not zone or c.offering.zone == zone) and not self._blocked(c)
            ]
            budget = self._budget(view)
            for _ in range(want):
                if not options or budget.copies(options[0].itype) == 0:
                    break
                budget.spend(options[0].itype)
                self.kept.add(self._new_node(view, options[0], standby=True).info.name)

    # -- 6. boot cap --------------------------------------------------------------------
    def cap_boots(self) -> list[_NewNode]:
        cap = self.s.settings.nodes.max_boots_per_loop
        ordered = sorted(
            self.new_nodes.values(),
            key=lambda n: (n.standby, min((priority_key(p) for p in n.info.pods.values()), default=()), n.info.name),
        )
        started, dropped = ordered[:cap], ordered[cap:]
        self.s.deferred = self._deferral(started, dropped)
        for node in dropped:
            for key in list(node.info.pods):
                self._unplace(key)
                self.waiting[key] = f"waiting for a boot slot (at most {cap} boots per loop)"
            self._forget(node.info.name)
        self._drop_incomplete_gangs()
        return [n for n in started if n.info.name in self.new_nodes]

    def _deferral(self, started: list[_NewNode], dropped: list[_NewNode]) -> DeferredPlan | None:
        """The dropped nodes, to be started by the next computations, if they can be."""
        later = [n for n in dropped if not n.standby]
        if not (later or self.carried) or self.last or not all(plain(p) for n in later for p in n.info.pods.values()):
            return None
        now_bound = {k for n in started for k in n.info.pods}
        nodes = tuple(DeferredNode(n.view.name, n.candidate, tuple(n.accepted), tuple(n.info.pods)) for n in later) + tuple(self.carried)
        pending = {k: v for k, v in self._class_keys().items() if k not in now_bound}
        return DeferredPlan(nodes, pending, self.s.views, tuple(v.name for v in self.views), frozenset(self.unavailable))

    def _class_keys(self) -> dict[PodKey, tuple]:
        """The pods left for new nodes -> their class key and requests (made only when a
        deferral is stored or checked)."""
        return {p.key: key for key, pods in self.left_for_new for p in pods}

    def reuse_deferred(self, classes: list[_Class]) -> None:
        """Place the pods the last capped plan left for later on the nodes it planned for them,
        if nothing they were planned from has changed; else (or if a pod does not fit after
        all) leave everything to ``place_on_new``. Only as many nodes as this loop may boot are
        made again; the rest stay as planned, their pods waiting for a boot slot (making
        thousands of nodes again in every loop to start ten was most of a loop's work)."""
        deferred = self.s.deferred
        views = {v.name: v for v in self.views}
        if deferred is None or not deferred.matches(self._class_keys(), self.s.views, tuple(views), frozenset(self.unavailable)):
            return
        pending = {p.key: p for c in classes for p in c.pods}
        cap = self.s.settings.nodes.max_boots_per_loop
        made: list[_NewNode] = []
        later: list[DeferredNode] = []
        budgets = {name: self._budget(view) for name, view in views.items()}
        for planned in deferred.nodes:
            keys = [k for k in planned.pods if k in pending]
            if not keys:
                continue  # its pods found room on nodes started since
            if len(made) >= cap:
                later.append(planned if len(keys) == len(planned.pods) else dataclasses.replace(planned, pods=tuple(keys)))
                continue
            budget = budgets[planned.pool]
            if budget.copies(planned.candidate.itype) == 0:  # the pool's limit was reached meanwhile (a replacement booted)
                self._undo(made)
                return
            budget.spend(planned.candidate.itype)
            node = self._new_node(views[planned.pool], planned.candidate, accepted=planned.accepted)
            made.append(node)
            for key in keys:
                pod = pending[key]
                if not (node.info.fit_count(node.info.fit_request(pod), 1) > 0 and self._place(pod, node.info, CycleState())):
                    self._undo(made)
                    return
        self.carried = later
        waiting = {k for n in later for k in n.pods}
        for key in waiting:
            self.waiting[key] = f"waiting for a boot slot (at most {cap} boots per loop)"
        for cls in classes:
            cls.pods = [p for p in cls.pods if p.key not in self.bindings and p.key not in waiting]

    def _undo(self, made: list[_NewNode]) -> None:
        for node in made:
            for placed in list(node.info.pods):
                self._unplace(placed)
            self._forget(node.info.name)

    def _drop_incomplete_gangs(self) -> None:
        """A gang that the cap left below its minimum fails as a whole."""
        bound = (self.infos[node].pods[key] for key, node in self.bindings.items())
        if any(pod.pod_group and pod.pod_group_min_member > 1 for pod in bound):  # (else no gang to count)
            self._fail_short_gangs()
        self._drop_empty_new_nodes()

    def _fail_short_gangs(self) -> None:
        members: dict[tuple[str, str], list[Pod]] = defaultdict(list)
        placed: dict[tuple[str, str], int] = defaultdict(int)
        for info in self.infos.values():
            for pod in info.pods.values():
                if pod.pod_group and pod.pod_group_min_member > 1:
                    placed[(pod.namespace, pod.pod_group)] += 1
                    if pod.key in self.bindings:
                        members[(pod.namespace, pod.pod_group)].append(pod)
        for group, pods in members.items():
            if placed[group] < pods[0].pod_group_min_member:
                for pod in pods:
                    self.failed[pod.key] = f"pod group {group[1]}: fewer than {pod.pod_group_min_member} members can be booted in this loop"

    def size_floor(self, view: PoolView) -> SizeFloor | None:
        """The pool's node size floor now (None: none), once per computation: ``share`` of
        the CPU its pods request on its nodes, at most ``maxCPU``, and the memory they ask
        for per CPU (to a tenth of a GiB)."""
        if view.name not in self._floors:
            share = view.pool.size_floor_share
            cpu = memory = 0
            if share and not view.cell:
                for info in self.infos.values():
                    if info.exists and info.pool == view.name:
                        asked = info.requested
                        cpu += asked.cpu
                        memory += asked.memory
            floor = floor_vcpu(view.pool, cpu)
            self._floors[view.name] = SizeFloor(floor, round(memory * 1000 / cpu / GIB, 1)) if floor > 0 else None
        return self._floors[view.name]

    def _floored(self, view: PoolView, offerings: Sequence[Candidate], asks: Sequence[Resources]) -> Sequence[Candidate]:
        """``offerings`` of at least the pool's node size floor (``pools[].nodeSizeFloor``),
        of the types among them suited to the pool's pods, where some of those hold each of
        ``asks`` and the pool's limits allow one; else of at least its vCPU, on the same
        terms; else all of them (a pool of small types only, pods larger than any type the
        floor leaves, or a pool near its limits are not held back by it). Pods that ask for
        GPUs or other extended resources are sized by those: a larger type of the same GPUs
        only adds CPU they do not use."""
        if any(extended(ask) for ask in asks):
            return offerings
        floor = self.size_floor(view)
        if floor is None:
            return offerings
        whole = math.ceil(floor.cpu)
        by_floor = self.s.floored.get(offerings, lambda _offerings: {})
        for gib_per_cpu in (floor.gib_per_cpu, 0.0) if floor.gib_per_cpu else (0.0,):
            large = by_floor.get((whole, gib_per_cpu))
            if large is None:
                large = by_floor[whole, gib_per_cpu] = suited([c for c in offerings if c.itype.vcpu >= whole], gib_per_cpu)
            if not large or len(large) == len(offerings) or not all(any(ask.fits(c.allocatable) for c in large) for ask in asks):
                continue
            budget = self._budget(view)  # (no limits: nothing is counted)
            if any(budget.copies(c.itype) != 0 for c in large):
                self.floor_applied[view.name] = floor if gib_per_cpu else dataclasses.replace(floor, gib_per_cpu=0.0)
                return large
        return offerings  # no floor's types hold these pods, or the pool's limits leave room only for smaller nodes: those, rather than none

    def right_size(self) -> None:
        """Give every new pod-holding node the cheapest type that holds what it ended up with,
        in its zone and capacity type: where new nodes went was chosen already (by the pods'
        constraints or to spread them over the zones)."""
        domains = self.s.domains
        sized: dict[tuple, Candidate | None] = {}  # nodes of one group in one domain that need the same: one answer
        for node in self.new_nodes.values():
            if node.standby or not node.info.pods or any(p.claims for p in node.info.pods.values()):
                continue  # a node chosen for its devices keeps its type
            if any(not plan.plannable(p) for p in node.info.pods.values()):
                continue  # a constraint on its instance type or a pool label: its type is part of the plan
            pods = node.info.pods.values()
            if node.view.batch is None:
                need = node.info.requested  # each pod counted as its requests
            else:
                # Other pods use up the batch estimate only where batch pods share the node.
                with_batch = any(p.batch for p in pods)
                need = Resources.total(counted_requests(p.requests, with_batch) for p in pods)
            o = node.candidate.offering
            # Offerings of the node's zone and capacity type with every extended resource it
            # needs (GPUs): a GPU node is not compared with every cheaper CPU type.
            needs = extended(need)
            key = (id(node.accepted), o.zone, o.capacity_type, needs)
            found = domains.get(key)
            if found is None or found[0] is not node.accepted:
                if len(domains) >= binpack.TABLES_KEPT:
                    domains.clear()
                found = domains[key] = (
                    node.accepted,
                    [
                        c
                        for c in node.accepted
                        if c.offering.zone == o.zone and c.offering.capacity_type is o.capacity_type and all(c.allocatable.get(n) > 0 for n in needs)
                    ],
                )
            accepted = self._floored(node.view, found[1], (need,))
            if len({self.key(p) for p in pods}) == 1:  # its pods accept every offering it was chosen among
                asked = (key, need, len(node.info.pods), node.candidate.price, len(accepted))
                if asked not in sized:
                    sized[asked] = binpack.right_size(need, len(node.info.pods), accepted, node.candidate.price, lambda _: True)
                best = sized[asked]
            else:
                best = binpack.right_size(need, len(node.info.pods), accepted, node.candidate.price, functools.partial(self._accepts, node))
            if best is not None:
                budget = self._budget(node.view)
                budget.spend(node.candidate.itype, -1)
                if budget.copies(best.itype) == 0:
                    continue
                fresh = offering_node_info(node.view, best, node.info.name)
                for pod in node.info.pods.values():
                    fresh.add_pod(pod)
                node.candidate, node.info = best, fresh
                self.infos[fresh.name] = fresh

    def merge_new_nodes(self) -> None:
        """A what-if that may boot one node at most (consolidation's replacement): when the
        plan boots several, all their pods go on one node instead, of the cheapest offering
        that every one of those nodes' pods accepts and that takes them all through the
        filters. Karpenter's consolidation asks the same: would the pods fit elsewhere plus one
        new node (its scheduler fills a new node while any type holds its pods, where the
        packer plans the cheapest fleet). Pods whose placement depends on other pods' (hard
        inter-pod constraints), with claims or of a gang are left as planned."""
        nodes = [n for n in self.new_nodes.values() if n.info.pods]
        if len(nodes) < 2 or any(n.standby or not n.accepted for n in nodes) or len({n.view.name for n in nodes}) > 1:
            return
        pods = sorted((p for n in nodes for p in n.info.pods.values()), key=priority_key)
        if any(p.inter_pod or p.claims or p.pod_group for p in pods):
            return
        shared = set.intersection(*({id(c) for c in n.accepted} for n in nodes))
        need = Resources.total((p.requests for p in pods), Resources({"pods": len(pods)}))
        view = nodes[0].view
        choices = sorted(
            (c for c in self._floored(view, nodes[0].accepted, (need,)) if id(c) in shared and need.fits(c.allocatable) and not self._blocked(c)),
            key=lambda c: (c.price, self.zone_load[c.offering.zone], c.offering.zone, c.itype.name),
        )
        budget = self._budget(view)  # what the pool may add once the planned nodes are not booted
        for n in nodes:
            budget.spend(n.candidate.itype, -1)
        for cand in choices[:MERGE_TRIES]:
            if budget.copies(cand.itype) == 0:
                continue
            trial = offering_node_info(view, cand, NEW_HOST)
            if not all(self._passes(pod, trial) for pod in pods):
                continue
            for n in nodes:
                for key in list(n.info.pods):
                    self._unplace(key)
                self._forget(n.info.name)
            merged = self._new_node(view, cand, accepted=nodes[0].accepted)
            for pod in pods:
                if not self._place(pod, merged.info, CycleState()):  # (no claims, no gang: Reserve and Permit have nothing to refuse)
                    self.waiting[pod.key] = f"pool {view.name}: rejected at reserve or permit on the one new node"
            return

    def _passes(self, pod: Pod, trial: NodeInfo) -> bool:
        """PreFilter and Filter pass for ``pod`` on ``trial``, which then holds it."""
        state = CycleState()
        if not (self.fw.run_pre_filter_plugins(state, pod).is_success() and self.fw.run_filter_plugins(state, pod, trial).is_success()):
            return False
        trial.add_pod(pod)
        return True

    def _accepts(self, node: _NewNode, cand: Candidate) -> bool:
        """The node's pods, of more than one group, accept it as ``cand`` (their inter-pod
        constraints hold already: the node keeps its zone, capacity type and name)."""
        probe_info = offering_node_info(node.view, cand, NEW_HOST)
        state = CycleState()
        return all(self.fw.run_filter_plugins(state, node_level(p), probe_info).is_success() for p in _distinct(node.info.pods.values()))

    def plan(self) -> list[_NewNode]:
        unbound = self.rebuild()
        self.open.smallest = smallest_request(unbound)
        classes = _classes(self.fw.sort_pods([p for p in unbound if p.key not in self.last]), self.key)
        then = _classes(self.fw.sort_pods([p for p in unbound if p.key in self.last]), self.key)
        # Pods come before standby on existing nodes; deferred gangs take what the rest left.
        self.place_on_existing(classes)
        self.place_on_existing(then)
        self.claim_standby()
        self.mark_expired()
        self.hold_back(classes + then)
        self.left_for_new = [(c.key, list(c.pods)) for c in classes + then if c.pods]
        self.reuse_deferred(classes)
        self.place_on_new(classes)
        self.place_on_new(then)
        self.settle_gangs()
        if self.failed:
            return []
        self.right_size()
        if self.snapshot.one_new_node:
            self.merge_new_nodes()
        self.top_up_standby()
        return self.cap_boots()

    def hold_back(self, classes: list[_Class]) -> None:
        """Pods a node was booted for in vain (``snapshot.held``), and the pods of their
        class, get no new node: they are unschedulable, with the reason, until the hold ends.
        Nor does a pod a node is still booting for (``snapshot.on_the_way``): it waits."""
        held, on_the_way = self.snapshot.held, self.snapshot.on_the_way
        if not held and not on_the_way:
            return
        for c in classes:
            why = next((held[p.key] for p in c.pods if p.key in held), None)
            if why is not None:
                for pod in c.pods:
                    self.unschedulable[pod.key] = why
                c.pods = []
            elif on_the_way and any(p.key in on_the_way for p in c.pods):
                for pod in c.pods:
                    if pod.key in on_the_way:
                        self.waiting[pod.key] = on_the_way[pod.key]
                c.pods = [p for p in c.pods if p.key not in on_the_way]

    # -- 7. stopping --------------------------------------------------------------------
    def _idle_since(self) -> dict[str, float]:
        """Existing nodes nothing needs (no pods, not kept for standby), with since when, by name."""
        out = {}
        infos, kept, reserved, since = self.infos, self.kept, self.snapshot.reserved | self.snapshot.operator_held, self.snapshot.unneeded_since
        for name, state in self.node_state.items():  # the existing live nodes, by name (as the picture was made)
            if state in _MAY_IDLE and name not in kept and name not in reserved and not _holds_work(infos[name]):
                out[name] = since.get(NodeName(name), self.now)
        return out

    def mark_expired(self) -> None:
        """Nodes whose idle grace is over are stopped now and no longer count against limits."""
        grace = self.s.settings.nodes.idle_grace
        self.stopping = {name for name, since in self._idle_since().items() if self.now - since >= grace}

    def stops(self) -> tuple[list[StopOrder], dict[NodeName, float]]:
        grace = self.s.settings.nodes.idle_grace
        stops: list[StopOrder] = []
        unneeded: dict[NodeName, float] = {}
        for name, since in self._idle_since().items():
            idle = self.now - since
            if idle >= grace:
                stops.append(StopOrder(NodeName(name), f"unneeded for {idle:.0f}s (idle grace {grace:g}s)"))
            else:
                unneeded[NodeName(name)] = since
        return stops, unneeded


_NAME = operator.attrgetter("name")
_ANTI_PODS = operator.attrgetter("anti_pods")
_MAY_IDLE = frozenset({NodeState.CREATING, NodeState.CREATED, NodeState.AVAILABLE})  # the states an unneeded node is stopped from


def _shares_prefilter(pod: Pod) -> bool:
    """Whether the pods of ``pod``'s class may share one PreFilter answer while pods are
    placed (as the pods of a class placed on existing nodes do): with no hard spread or
    required (anti-)affinity of its own, nothing in its PreFilter depends on where other pods
    went, save existing pods' anti-affinity (a placed pod with such terms starts the answers
    again); and nothing of its Reserve is its own (no claims, volumes or gang)."""
    return not (pod.inter_pod or pod.host_ports or pod.claims or pod.volume_claims or pod.pod_group)


def _holds_work(info: NodeInfo) -> bool:
    """Pods the node is there for: DaemonSet and mirror pods never make a node needed."""
    return len(info.pods) > info.node_pods


def smallest_request(pods: Iterable[Pod]) -> Resources:
    """The least cpu and the least memory any of ``pods`` asks for: a node without that
    much room takes none of them."""
    requests = [p.requests for p in pods]
    return Resources({"cpu": min((r.cpu for r in requests), default=0), "memory": min((r.memory for r in requests), default=0)})


def _limits_budget(pool: Pool) -> binpack.Budget:
    """What the pool's limits allow it in all (an empty budget where it has none)."""
    limits = pool.limits
    return binpack.Budget(limits.nodes, limits.cpu, limits.memory)


def _offering_blind(pod: Pod, moving: bool = False) -> bool:
    """Whether the filters decide alike on every offering of a pool for this pod (with no
    requests): nothing in it tells types, zones or capacity types apart (a pool's offerings
    share its labels and taints; only the well-known type, zone and capacity labels differ).
    ``moving``: a placed pod as a what-if places it again, without its node's name."""
    return not (
        (pod.node_name and not moving)
        or pod.node_selector
        or pod.affinity
        or pod.instance_type
        or pod.zone
        or pod.capacity_policy is not CapacityPolicy.ANY
        or pod.volume_claims
        or pod.claims
        or pod.host_ports
    )


def _keeps_floor(pod: Pod) -> bool:
    """Whether nothing in ``pod``, placed again by a what-if, lets its new node's size floor
    go (see ``sure_floors``)."""
    return _offering_blind(pod, moving=True) and not (pod.inter_pod or pod.pod_group or pod.batch or extended(pod.requests))


def node_level(pod: Pod) -> Pod:
    """The pod without its inter-pod constraints: what a node's labels alone decide."""
    return dataclasses.replace(pod, spread=(), pod_affinity=NO_AFFINITY) if pod.spread or pod.pod_affinity else pod


def _summed(scores: Iterable[dict[str, int]]) -> dict[str, int]:
    """Each node's total over the score plugins."""
    totals: dict[str, int] = {}
    for by_node in scores:
        if not totals:
            totals = dict(by_node)
            continue
        for name, value in by_node.items():
            totals[name] += value
    return totals


def _distinct(pods: Iterable[Pod]) -> list[Pod]:
    seen: dict[tuple, Pod] = {}
    for pod in pods:
        seen.setdefault((constraint_key(pod), pod.requests), pod)
    return list(seen.values())


def _describe(requests: Resources) -> str:
    return ", ".join(f"{k}={v}" for k, v in requests.to_quantities().items()) or "nothing"


class BindingNodeScaler:
    """Decides which waiting pod goes where, what to boot and what to stop."""

    def __init__(self, settings: ScalerSettings, catalog: Catalog, registry: Registry | None = None) -> None:
        self.settings = settings
        self.catalog = catalog
        self.registry = registry
        self.framework = Framework(settings.profile, registry, settings.seed)  # each decision runs a fresh copy
        # Whether pods a computation placed on an existing node may stay there for the next
        # (see ``_Run.keep_placed``): every plugin is one of ours, whose answers for such
        # pods this project knows.
        self.keeps_placed = all(type(p) in BUILTIN_PLUGINS for p in self.framework.plugins.values())
        self.regular_pods: ByIdentity[Pod, Pod] = ByIdentity(REGULAR_KEPT)  # a batch pod -> it as_regular (the same copy while it waits)
        self.views = pool_views(list(settings.pools), catalog, settings.nodes.volume_size, settings.colocation)
        self._views_daemon_sets: tuple = ()
        # (pool, pod constraints) -> accepted offerings: the same answer every time, so it
        # is kept across computations (a cache of a pure function, not carried state).
        self.probe_memo: dict[tuple, tuple[tuple[Candidate, ...], str, bool]] = {}
        # What the packer derives from a list of offerings, and the largest allocatables of
        # one, are pure functions of the offerings (their prices included) too.
        self.type_tables = binpack.TypeTables()
        self.frontiers: ByIdentity[Sequence[Candidate], list[Resources]] = ByIdentity(binpack.TABLES_KEPT)  # offerings -> their frontier
        # offerings -> (instance type's id, capacity type) -> those offerings: where a new node may go
        self.by_type: ByIdentity[Sequence[Candidate], dict[tuple[int, CapacityType], list[Candidate]]] = ByIdentity(binpack.TABLES_KEPT)
        # (offerings' id, zone, capacity type, extended resources) -> (the offerings, those of
        # that zone and capacity type with those resources): what right-sizing looks through
        self.domains: dict[tuple, tuple[Sequence[Candidate], list[Candidate]]] = {}
        # offerings -> (whole vCPU floor, GiB per CPU) -> those of at least that many vCPU and
        # suited to that mix: the same list object each time, so what the packer derives from
        # it is kept too (see _floored)
        self.floored: ByIdentity[Sequence[Candidate], dict[tuple[int, float], list[Candidate]]] = ByIdentity(binpack.TABLES_KEPT)
        self.pod_keys: dict[tuple[int, bool], tuple[Pod, tuple]] = {}  # (id(pod), node_only) -> (the pod, its constraint_key)
        # each existing node as computations start from it
        self.pictures = NodePictures(catalog, settings.nodes.volume_size, self._views_daemon_sets, regular=not settings.colocation)
        # The nodes the last capped plan left for later, reused while what they were planned
        # from stays the same (checked in full before each use; see ``deferred``).
        self.deferred: DeferredPlan | None = None
        self._loads: PoolLoads | None = None  # the last snapshot's, for sure_floors
        self._pods_load: ByIdentity[tuple[Pod, ...], tuple[int, bool]] = ByIdentity(PODS_LOADS_KEPT)  # a node's pods -> pods_load of them
        self._floor_kept_for: ByIdentity[Pod, bool] = ByIdentity(FLOOR_PODS_KEPT)  # a moving pod -> _keeps_floor of it (asked at every quick test)
        self._largest_kept: dict[str, tuple[PoolView, list[Resources]]] = {}  # pool -> (its view, _largest of it)

    def views_for(self, daemon_sets: tuple) -> list[PoolView]:
        """The pools' offerings net of these DaemonSets, and the node pictures allowing for
        them (both rebuilt only when they change)."""
        if daemon_sets != self._views_daemon_sets:
            settings = self.settings
            self.views = pool_views(list(settings.pools), self.catalog, settings.nodes.volume_size, settings.colocation, daemon_sets)
            self._views_daemon_sets = daemon_sets
            self.probe_memo.clear()
            self.type_tables = binpack.TypeTables()
            self.frontiers.clear()
            self.by_type.clear()
            self.domains.clear()
            self.floored.clear()
            self.pictures = NodePictures(self.catalog, settings.nodes.volume_size, daemon_sets, regular=not settings.colocation)
        return self.views

    def sure_floors(self, snapshot: ClusterSnapshot, leaving: Collection[str], pods: Sequence[Pod]) -> dict[str, int]:
        """Per pool, the vCPU that every new node a computation on ``snapshot`` without the
        nodes ``leaving`` boots for ``pods`` surely has: its node size floor, counted from
        the pool's other nodes alone (what the computation places on them only raises it).
        Consolidation's quick test prices a replacement from these. A pool is named only
        where every new node for these pods goes through ``_floored`` and it cannot let the
        floor go: no other pod waits, none of these asks for GPUs or batch resources, tells
        offerings apart (``_offering_blind``), keeps near or apart from other pods or is of a
        gang, no placed pod keeps others away by a key other than the hostname, no default
        spread constraint is hard, no offering is marked unavailable, no capped plan is kept,
        the pool has no limits, and each of these pods fits one of its types of at least its
        ``maxCPU``."""
        if snapshot.by_node.waiting or snapshot.unavailable or self.deferred is not None or any(c.hard for c in self.settings.spread_defaults):
            return {}
        if not all(self._floor_kept_for.get(p, _keeps_floor) for p in pods):
            return {}
        if self._loads is None or self._loads.snapshot is not snapshot:
            self._loads = PoolLoads(snapshot, lambda pods: self._pods_load.get(pods, pods_load))
        if self._loads.repels:
            return {}
        asks = list(dict.fromkeys(p.requests for p in pods))
        out = {}
        for view in self.views_for(snapshot.daemon_sets):
            if view.cell or _limits_budget(view.pool) != binpack.Budget():
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
            kept = self._largest_kept[view.name] = (view, _frontier_of([c for c in view.candidates if c.itype.vcpu >= whole]))
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
            run = _Run(self, snapshot, now, excluded, last)
            try:
                started = run.plan()
            finally:
                self.pictures.spoiled(run.changed)  # lent to the run, which changed these
            if not run.failed:
                break
            failed = run.failed_gangs()
            run.close()
            excluded = {**excluded, **{k: why for k, why in failed.items() if k in last}}
            last = (last | failed.keys()) - excluded.keys()
        try:
            stops, unneeded = run.stops()
            specs = tuple(_spec(n, run.floor_applied.get(n.view.name)) for n in started)
            return Decision(
                start=specs,
                stop=tuple(stops),
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


def _classes(pods: list[Pod], key_of: Callable[[Pod], tuple]) -> list[_Class]:
    """Identical pods grouped, classes in the order of their first member."""
    classes: dict[tuple, _Class] = {}
    for pod in pods:
        key = (key_of(pod), pod.requests)
        if key in classes:
            classes[key].pods.append(pod)
        else:
            classes[key] = _Class([pod], key)
    return list(classes.values())


def _frontier_of(offerings: Sequence[Candidate]) -> list[Resources]:
    return binpack.frontier([o.allocatable for o in offerings])


def _by_type(offerings: Sequence[Candidate]) -> dict[tuple[int, CapacityType], list[Candidate]]:
    """The offerings by instance type (its id) and capacity type."""
    found: dict[tuple[int, CapacityType], list[Candidate]] = {}
    for c in offerings:
        found.setdefault((id(c.itype), c.offering.capacity_type), []).append(c)
    return found


def _spec(node: _NewNode, size_floor: SizeFloor | None) -> NodeSpec:
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
    )
