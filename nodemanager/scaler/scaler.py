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
   capacity (PodGroup holds members at Permit until then).
5. Standby pools take idle matching nodes and are topped up.
6. The boot cap keeps the highest-priority boots; no binding points at a node that will
   not be started.
7. Nodes nothing needs are stopped once unneeded for the idle grace period.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from cloud.catalog import Catalog
from nodemanager.config.schema import NodeDefaults, Pool
from nodemanager.model import BINDABLE_STATES, LIVE_STATES, CapacityType, NodeName, NodeState, Pod, PodKey, PodPhase, Resources
from nodemanager.scaler import binpack
from nodemanager.scaler.decision import Decision, NodeSpec, StopOrder
from nodemanager.scaler.pools import Candidate, PoolView, node_node_info, offering_node_info, pool_views
from nodemanager.scaler.snapshot import ClusterSnapshot
from nodemanager.scheduling import CycleState, Framework, NodeInfo, Profile, Registry
from nodemanager.scheduling.plugins.queue_sort import priority_key
from nodemanager.scheduling.profile import DEFAULT_PROFILE
from nodemanager.scheduling.status import Code

_READINESS = {NodeState.AVAILABLE: 0, NodeState.CLAIMED: 0, NodeState.CREATED: 1, NodeState.CREATING: 2}


@dataclass(frozen=True)
class ScalerSettings:
    pools: tuple[Pool, ...]
    nodes: NodeDefaults = field(default_factory=NodeDefaults)
    profile: Profile = DEFAULT_PROFILE
    seed: int = 0


def constraint_key(pod: Pod) -> tuple:
    """Everything but the request that decides where a pod may go (and its rank)."""
    group = (pod.namespace, pod.pod_group, pod.pod_group_min_member) if pod.pod_group else ()
    return (
        pod.priority,
        tuple(sorted(pod.node_selector.items())),
        pod.affinity,
        pod.tolerations,
        pod.instance_type,
        pod.capacity_policy,
        pod.zone,
        group,
    )


@dataclass
class _Class:
    """Waiting pods that are interchangeable for scheduling."""

    pods: list[Pod]

    @property
    def rep(self) -> Pod:
        return self.pods[0]


@dataclass
class _NewNode:
    view: PoolView
    candidate: Candidate
    info: NodeInfo
    standby: bool = False
    rank: tuple = ()


class _Run:
    """The working state of one computation."""

    def __init__(self, scaler: BindingNodeScaler, snapshot: ClusterSnapshot, now: float) -> None:
        self.s = scaler
        self.snapshot = snapshot
        self.now = now
        self.fw = Framework(scaler.settings.profile, scaler.registry, scaler.settings.seed)
        self.fw.handle.now = now
        self.views = scaler.views
        self.view_by_name = {v.name: v for v in self.views}
        self.infos: dict[str, NodeInfo] = {}
        self.node_state: dict[str, NodeState] = {}
        self.fw.handle.node_infos = self.infos
        self.bindings: dict[PodKey, str] = {}
        self.unschedulable: dict[PodKey, str] = {}
        self.waiting: dict[PodKey, str] = {}
        self.new_nodes: dict[str, _NewNode] = {}
        self.names_taken = {n.name for n in snapshot.nodes}
        self.budgets: dict[str, binpack.Budget] = {}
        self.unavailable = {k for k, until in snapshot.unavailable.items() if until > now}

    # -- 1. the picture -----------------------------------------------------------------
    def rebuild(self) -> list[Pod]:
        pods = {p.key: p for p in self.snapshot.pods if not p.is_terminal}
        waiting = {k: p for k, p in pods.items() if not p.node_name and p.phase is PodPhase.PENDING}
        volume = self.s.settings.nodes.volume_size
        for node in sorted(self.snapshot.nodes, key=lambda n: n.name):
            if node.state not in LIVE_STATES:
                continue
            self.infos[node.name] = node_node_info(node, self.view_by_name.get(node.pool), self.s.catalog, volume)
            self.node_state[node.name] = node.state
        for pod in sorted(pods.values(), key=lambda p: p.key):
            if pod.node_name and pod.node_name in self.infos:
                self.infos[pod.node_name].add_pod(pod)
        for node in sorted(self.snapshot.nodes, key=lambda n: n.name):
            info = self.infos.get(node.name)
            if info is None:
                continue
            for key in node.bound_pods:
                pod = waiting.get(key)
                if pod is not None and key not in self.bindings and key not in info.pods:
                    info.add_pod(pod)
                    self.bindings[key] = node.name
        return [p for k, p in waiting.items() if k not in self.bindings]

    # -- placing ------------------------------------------------------------------------
    def _place(self, pod: Pod, info: NodeInfo, state: CycleState) -> bool:
        """Assume ``pod`` onto ``info``: Reserve, then Permit. False (and undone) on failure."""
        info.add_pod(pod)
        if not self.fw.run_reserve_plugins(state, pod, info.name).is_success():
            info.remove_pod(pod.key)
            return False
        status = self.fw.run_permit_plugins(state, pod, info.name)
        if status.code in (Code.SUCCESS, Code.WAIT):
            self.bindings[pod.key] = info.name
            return True
        self.fw.run_unreserve_plugins(state, pod, info.name)
        info.remove_pod(pod.key)
        return False

    def _unplace(self, key: PodKey) -> None:
        node = self.bindings.pop(key)
        self.infos[node].remove_pod(key)

    # -- 2. existing nodes --------------------------------------------------------------
    def place_on_existing(self, classes: list[_Class]) -> None:
        candidates = [info for name, info in self.infos.items() if self.node_state.get(name) in _READINESS]
        if not candidates:
            return
        for cls in classes:
            pod = cls.rep
            state = CycleState()
            if not self.fw.run_pre_filter_plugins(state, pod).is_success():
                continue
            feasible = [i for i in candidates if self.fw.run_filter_plugins(state, pod, i).is_success()]
            if not feasible:
                continue
            scores, status = self.fw.run_score_plugins(state, pod, feasible)
            totals = {i.name: sum(s[i.name] for s in scores.values()) for i in feasible} if status.is_success() else {}
            feasible.sort(key=lambda i: (_READINESS[self.node_state[i.name]], -totals.get(i.name, 0), i.name))
            left = deque(cls.pods)
            refused: list[Pod] = []
            for info in feasible:
                for _ in range(info.fit_count(pod.requests, len(left))):
                    candidate = left.popleft()
                    if not self._place(candidate, info, CycleState()):
                        refused.append(candidate)
                        break
                if not left:
                    break
            cls.pods = refused + list(left)

    # -- 3. new nodes -------------------------------------------------------------------
    def _probe(self, view: PoolView, pod: Pod) -> tuple[list[Candidate], str]:
        """The pool's offerings this pod's constraints accept (any size), or why none."""
        probe = dataclasses.replace(pod, requests=Resources())
        state = CycleState()
        status = self.fw.run_pre_filter_plugins(state, probe)
        if not status.is_success():
            return [], status.message
        accepted: list[Candidate] = []
        reasons: dict[str, int] = defaultdict(int)
        for cand in view.candidates:
            status = self.fw.run_filter_plugins(state, probe, offering_node_info(view, cand))
            if status.is_success():
                accepted.append(cand)
            else:
                reasons[status.message] += 1
        top = max(sorted(reasons), key=lambda r: reasons[r]) if reasons else "the pool offers no instance type"
        return accepted, top

    def _budget(self, view: PoolView) -> binpack.Budget:
        budget = self.budgets.get(view.name)
        if budget is None:
            limits = view.pool.limits
            budget = binpack.Budget(limits.nodes, limits.cpu, limits.memory)
            for name, info in self.infos.items():
                itype = self.s.catalog.get(info.instance_type)
                if info.pool == view.name and itype is not None and name not in self.new_nodes:
                    budget.spend(itype)
            self.budgets[view.name] = budget
        return budget

    def place_on_new(self, classes: list[_Class]) -> None:
        groups: dict[tuple, list[_Class]] = defaultdict(list)
        for cls in classes:
            if cls.pods:
                groups[constraint_key(cls.rep)].append(cls)
        for key in sorted(groups, key=lambda k: priority_key(groups[k][0].rep)):
            self._place_group(groups[key])

    def _place_group(self, group: list[_Class]) -> None:
        rep = group[0].rep
        reasons: list[str] = []
        pending = list(group)
        for view in self.views:
            if not pending:
                break
            accepted, why = self._probe(view, rep)
            if not accepted:
                reasons.append(f"pool {view.name}: {why}")
                continue
            fits = [c for c in pending if any(c.rep.requests.fits(cand.allocatable) for cand in accepted)]
            if not fits:
                reasons.append(f"pool {view.name}: no instance type can hold {_describe(pending[0].rep.requests)}")
                continue
            available = [c for c in accepted if c.offering.key not in self.unavailable]
            self._pack(view, fits, available, accepted)
            pending = [c for c in pending if c not in fits]
        for cls in pending:
            reason = "; ".join(reasons) or "no pool accepts the pod"
            for pod in cls.pods:
                self.unschedulable[pod.key] = reason
            cls.pods = []

    def _pack(self, view: PoolView, classes: list[_Class], available: list[Candidate], accepted: list[Candidate]) -> None:
        classes = sorted(classes, key=lambda c: (-c.rep.requests.cpu, -c.rep.requests.memory, priority_key(c.rep)))
        if not available:
            for cls in classes:
                for pod in cls.pods:
                    self.waiting[pod.key] = f"pool {view.name}: every fitting offering is marked unavailable after capacity errors"
                cls.pods = []
            return
        fills, _left, why = binpack.pack([c.rep.requests for c in classes], [len(c.pods) for c in classes], available, self._budget(view), cell=view.cell)
        queues = [deque(c.pods) for c in classes]
        for fill in fills:
            for _ in range(fill.copies):
                node = self._new_node(view, fill.candidate)
                for i, k in enumerate(fill.counts):
                    for _ in range(k):
                        pod = queues[i].popleft()
                        if not self._place(pod, node.info, CycleState()):
                            self.waiting[pod.key] = "rejected at reserve or permit"
        for i, queue in enumerate(queues):
            reason = why.get(i, "fit")
            for pod in queue:
                if reason.startswith("limit:"):
                    self.waiting[pod.key] = f"pool {view.name}: limit on {reason[6:]} reached"
                else:
                    fits_somewhere = any(pod.requests.fits(c.allocatable) for c in accepted)
                    self.waiting[pod.key] = f"pool {view.name}: every fitting offering is marked unavailable" if fits_somewhere else "no fitting type"
        for cls in classes:
            cls.pods = []

    def _new_node(self, view: PoolView, candidate: Candidate, standby: bool = False) -> _NewNode:
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
        node = _NewNode(view, candidate, info, standby)
        self.new_nodes[name] = node
        return node

    # -- 4. gangs -----------------------------------------------------------------------
    def settle_gangs(self) -> None:
        """Members still held at Permit when planning ends are rejected; Unreserve runs."""
        for waiting in self.fw.handle.iterate_over_waiting_pods():
            waiting.reject("pod group did not reach minMember in this computation", "PodGroup")
        for waiting, outcome in self.fw.take_resolved():
            if not outcome.is_success() and waiting.pod.key in self.bindings:
                self._unplace(waiting.pod.key)
                self.waiting[waiting.pod.key] = outcome.message

    # -- 5. standby ---------------------------------------------------------------------
    def standby(self) -> set[str]:
        """Fill every standby entry from idle nodes, booting what is missing; the names kept."""
        kept: set[str] = set()
        for view in self.views:
            for entry in view.pool.standby:
                itype = entry.instance_type or self.s.settings.nodes.default_instance_type
                capacity = CapacityType.SPOT if entry.spot else CapacityType.ON_DEMAND
                want = entry.count
                for name, info in sorted(self.infos.items()):
                    if want == 0:
                        break
                    if (
                        name not in kept
                        and not info.pods
                        and info.pool == view.name
                        and info.instance_type == itype
                        and info.capacity_type is capacity
                        and (not entry.zone or info.zone == entry.zone)
                        and (name in self.new_nodes or self.node_state.get(name) in BINDABLE_STATES)
                    ):
                        kept.add(name)
                        want -= 1
                options = [
                    c
                    for c in view.candidates
                    if c.itype.name == itype and c.offering.capacity_type is capacity and (not entry.zone or c.offering.zone == entry.zone)
                ]
                options = [c for c in options if c.offering.key not in self.unavailable]
                budget = self._budget(view)
                for _ in range(want):
                    if not options or budget.copies(options[0].itype) == 0:
                        break
                    budget.spend(options[0].itype)
                    kept.add(self._new_node(view, options[0], standby=True).info.name)
        return kept

    # -- 6. boot cap --------------------------------------------------------------------
    def cap_boots(self) -> list[_NewNode]:
        cap = self.s.settings.nodes.max_boots_per_loop
        ordered = sorted(
            self.new_nodes.values(),
            key=lambda n: (n.standby, min((priority_key(p) for p in n.info.pods.values()), default=()), n.info.name),
        )
        started, dropped = ordered[:cap], ordered[cap:]
        for node in dropped:
            for key in list(node.info.pods):
                self._unplace(key)
                self.waiting[key] = f"waiting for a boot slot (at most {cap} boots per loop)"
            del self.infos[node.info.name]
            del self.new_nodes[node.info.name]
        self._drop_incomplete_gangs()
        return [n for n in started if n.info.name in self.new_nodes]

    def _drop_incomplete_gangs(self) -> None:
        """After the cap, a gang that lost members below its minimum loses them all."""
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
                    self._unplace(pod.key)
                    self.waiting[pod.key] = f"pod group {group[1]}: fewer than {pod.pod_group_min_member} members can be placed in this loop"
        for name, node in list(self.new_nodes.items()):
            if not node.info.pods and not node.standby:
                del self.new_nodes[name]
                del self.infos[name]

    def right_size(self) -> None:
        """Give every new pod-holding node the cheapest type that holds what it ended up with."""
        for node in self.new_nodes.values():
            if node.standby or not node.info.pods:
                continue
            accepted = [c for c in node.view.candidates if c.offering.key not in self.unavailable and self._accepts(node, c)]
            best = binpack.right_size(node.info.requested, len(node.info.pods), accepted, node.view.cell)
            budget = self._budget(node.view)
            if best is not None and best.price < node.candidate.price:
                budget.spend(node.candidate.itype, -1)
                if budget.copies(best.itype) == 0:
                    budget.spend(node.candidate.itype)
                    continue
                budget.spend(best.itype)
                fresh = offering_node_info(node.view, best, node.info.name)
                for pod in node.info.pods.values():
                    fresh.add_pod(pod)
                node.candidate, node.info = best, fresh
                self.infos[fresh.name] = fresh

    def _accepts(self, node: _NewNode, cand: Candidate) -> bool:
        probe_info = offering_node_info(node.view, cand)
        state = CycleState()
        return all(self.fw.run_filter_plugins(state, p, probe_info).is_success() for p in _distinct(node.info.pods.values()))

    # -- 7. stopping --------------------------------------------------------------------
    def stops(self, standby: set[str]) -> tuple[list[StopOrder], dict[NodeName, float]]:
        grace = self.s.settings.nodes.idle_grace
        stops: list[StopOrder] = []
        unneeded: dict[NodeName, float] = {}
        for name, info in sorted(self.infos.items()):
            if name in self.new_nodes or info.pods or name in standby:
                continue
            if self.node_state.get(name) not in (NodeState.CREATING, NodeState.CREATED, NodeState.AVAILABLE):
                continue
            since = self.snapshot.unneeded_since.get(NodeName(name), self.now)
            idle = self.now - since
            if idle >= grace:
                stops.append(StopOrder(NodeName(name), f"unneeded for {idle:g}s (idle grace {grace:g}s)"))
            else:
                unneeded[NodeName(name)] = since
        return stops, unneeded


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
        self.views = pool_views(list(settings.pools), catalog, settings.nodes.volume_size)

    def compute(self, snapshot: ClusterSnapshot, now: float) -> Decision:
        run = _Run(self, snapshot, now)
        unbound = run.rebuild()
        classes = _classes(run.fw.sort_pods(unbound))
        run.place_on_existing(classes)
        run.place_on_new(classes)
        run.settle_gangs()
        run.right_size()
        kept = run.standby()
        started = run.cap_boots()
        stops, unneeded = run.stops(kept)
        specs = tuple(_spec(n) for n in started)
        return Decision(
            start=specs,
            stop=tuple(stops),
            bindings=dict(sorted((k, NodeName(v)) for k, v in run.bindings.items())),
            unschedulable=dict(sorted(run.unschedulable.items())),
            waiting=dict(sorted((k, v) for k, v in run.waiting.items() if k not in run.bindings)),
            unneeded_since=unneeded,
        )


def _classes(pods: list[Pod]) -> list[_Class]:
    """Identical pods grouped, classes in the order of their first member."""
    classes: dict[tuple, _Class] = {}
    for pod in pods:
        key = (constraint_key(pod), pod.requests)
        if key in classes:
            classes[key].pods.append(pod)
        else:
            classes[key] = _Class([pod])
    return list(classes.values())


def _spec(node: _NewNode) -> NodeSpec:
    c = node.candidate
    return NodeSpec(
        name=NodeName(node.info.name),
        pool=node.view.name,
        instance_type=c.itype.name,
        capacity_type=c.offering.capacity_type,
        zone=c.offering.zone,
        price=c.price,
        allocatable=c.allocatable,
        labels=dict(node.info.labels),
        taints=node.view.taints,
        pods=tuple(sorted(node.info.pods)),
        standby=node.standby,
    )
