"""One computation's working state (``Run``) and the operations every step of the plan uses:
place or unplace a pod, make or forget a new node, what a pool may still add, which zones and
offerings are open. The steps themselves are functions over a ``Run``, one module each:
``existing`` (the picture, and existing nodes), ``new_nodes`` (pools, zones, devices),
``gangs``, ``standby``, ``boot_cap`` (the cap and deferral), ``sizing`` (floor, right-size,
merge) and ``stops``; ``scaler.plan`` runs them in order."""

from __future__ import annotations

import hashlib
import operator
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nodemanager.config.schema import NODE_NAME_DIGITS, Pool
from nodemanager.dra import ResourceSlice
from nodemanager.dra.context import instance_slices
from nodemanager.model import CapacityType, NodeState, Pod, PodKey, Resources
from nodemanager.model.interpod import NO_AFFINITY
from nodemanager.model.labels import HOSTNAME, ZONE
from nodemanager.model.selectors import HARD_EFFECTS, untolerated
from nodemanager.scaler import binpack
from nodemanager.scaler.by_identity import ByIdentity
from nodemanager.scaler.decision import SizeFloor
from nodemanager.scaler.deferred import DeferredNode
from nodemanager.scaler.memory import PROBE_MEMO_SIZE, Memory
from nodemanager.scaler.open_nodes import OpenNodes
from nodemanager.scaler.pools import Candidate, PoolView, offering_node_info
from nodemanager.scaler.size_floor import JobSizes
from nodemanager.scaler.snapshot import ClusterSnapshot
from nodemanager.scaler.steering import Steer
from nodemanager.scaler.unavailability import ANY_TYPE
from nodemanager.scheduling import CycleState, NodeInfo
from nodemanager.scheduling.plugins.dynamic_resources import DeviceState
from nodemanager.scheduling.status import Code
from nodemanager.scheduling.topology import PodTopology

NEW_HOST = "\x00a new node"  # the hostname domain of a node this run may still create: it holds no pod
_NAME = operator.attrgetter("name")


class ConstraintKey(tuple):
    """A ``constraint_key``, hashed once: its parts are dataclasses nested deep (selectors,
    terms, tolerations), and a key is looked up many times per pod in a computation (its
    class, its pool's answer, its node's kinds of pod); hashing them anew each time cost a
    few percent of a decision of 5,000 pods with inter-pod constraints. Equal to the tuple
    of its parts, and hashed as that tuple is."""

    _hash: int

    def __new__(cls, parts: Iterable[object]) -> ConstraintKey:
        key = super().__new__(cls, parts)
        key._hash = tuple.__hash__(key)
        return key

    def __hash__(self) -> int:
        return self._hash


def constraint_key(pod: Pod, node_only: bool = False) -> ConstraintKey:
    """Everything but the request that decides where a pod may go (and its rank); with
    ``node_only``, only what a node's own labels and taints decide."""
    group = (pod.namespace, pod.pod_group, pod.pod_group_min_member) if pod.pod_group else ()
    batch = pod.batch  # never packed with other pods
    return ConstraintKey(
        (
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
    )


@dataclass
class PodClass:
    """Waiting pods that are interchangeable for scheduling."""

    pods: list[Pod]
    key: tuple | None = None  # (class key, requests) as grouped; None for a share split off while placing

    @property
    def rep(self) -> Pod:
        return self.pods[0]


@dataclass
class NewNode:
    view: PoolView
    candidate: Candidate
    info: NodeInfo
    standby: bool = False
    accepted: Sequence[Candidate] = ()  # offerings its first pods' constraints accept


class Run:
    """The working state of one computation."""

    def __init__(self, memory: Memory, snapshot: ClusterSnapshot, now: float, excluded: dict[PodKey, str], last: frozenset[PodKey]) -> None:
        self.memory = memory
        self.excluded = excluded  # gang members that cannot all be placed: left out entirely
        self.last = last  # members of gangs that failed in their turn: planned after the rest
        self.left_for_new: list[tuple[tuple | None, list[Pod]]] = []  # the pods existing nodes did not take, by class key
        self.carried: list[DeferredNode] = []  # deferred nodes past this loop's boot cap: left as planned
        self.next_start: dict[int, int] = {}  # per readiness rank: where the next search of existing nodes begins
        self.failed: dict[PodKey, str] = {}  # gang members found to fail in this run
        self.snapshot = snapshot
        self.now = now
        self.fw = memory.framework.fresh()
        self.fw.handle.now = now
        every_view = memory.views_for(snapshot.daemon_sets)
        self.view_by_name = {v.name: v for v in every_view}  # existing nodes of paused pools too
        self.views = [v for v in every_view if v.name not in snapshot.paused_pools]  # pools that may boot now
        self.infos: dict[str, NodeInfo] = {}
        self.changed: set[str] = set()  # nodes whose pictures this run placed or unplaced pods on (see NodePictures)
        self.moves = 0  # pods placed and unplaced so far (what changed a node's room since a RoomIndex looked)
        self.node_state: dict[str, NodeState] = {}
        self.fw.handle.node_infos = self.infos
        self.fw.handle.volumes = snapshot.volumes
        self.topology = PodTopology(self.infos, snapshot.namespaces)
        self.fw.handle.topology = self.topology
        # Spread reaches domains with no node yet: what the pools' offerings give a new node.
        self.fw.handle.possible_domains = self.possible_domains
        self.bindings: dict[PodKey, str] = {}
        self.unschedulable: dict[PodKey, str] = {}
        self.waiting: dict[PodKey, str] = {}
        self.new_nodes: dict[str, NewNode] = {}
        self.names_taken = set(map(_NAME, snapshot.nodes))  # (in C: every record, at every decision)
        self.unavailable = {k for k, until in snapshot.unavailable.items() if until > now}
        # Capacity reservations: the instances each has left for new nodes, counted as this
        # run plans nodes into them (``new_node``, ``forget``, ``moved``); those with none left
        # are not offered (``blocked``).
        self.left_at_start = {r.id: r.available for r in memory.catalog.reservations.values()} | dict(snapshot.reservations_left)
        self.left = dict(self.left_at_start)
        self.spent = {r for r, left in self.left.items() if left <= 0}
        self._available_memo: ByIdentity[tuple[Candidate, ...], tuple[Candidate, ...]] = ByIdentity(PROBE_MEMO_SIZE)
        self.kept: set[str] = set()  # nodes held for standby entries
        self.missing: list[tuple[PoolView, str, CapacityType, str | None, int]] = []  # standby to boot
        self.stopping: set[str] = set()  # idle past the grace: stopped by this decision
        self.unbooted: list[Pod] = []  # pods of new nodes not booted after all (minValues, reservations): placed again where they fit
        # Pods placed at a step of Karpenter's preferences ladder (``preferences``) -> the pod
        # itself, which is what their node records: their preferences keep no other pod away.
        self.stepped: dict[PodKey, Pod] = {}
        self.devices: DeviceState | None = None
        if snapshot.devices is not None:
            self.devices = DeviceState(snapshot.devices, self._slices_for)
            self.fw.handle.devices = self.devices
        self._claim_keys: dict[tuple[str, ...], tuple] = {}
        self.open = OpenNodes(Resources(), {v.name: i for i, v in enumerate(self.views)})  # new nodes with room left
        self.zone_load: Counter[str] = Counter()  # nodes per zone, live and decided: new nodes go to the emptiest
        self.type_tables = memory.type_tables  # the packer's figures per candidate list
        self._floors: dict[str, SizeFloor | None] = {}  # pool -> its node size floor (see sizing.floored)
        # pool -> the floor that left types out of its new nodes' choice in this run (its vCPU
        # alone, where the suited types were let go)
        self.floor_applied: dict[str, SizeFloor] = {}
        self.jobs = JobSizes(snapshot.pods)  # the snapshot's Jobs' pods (see sizing.floor_holds)
        # What a pod's node affinity steers its new nodes to (``new_nodes._steer``), and the
        # offerings of a probe's answer that meet it.
        self.steers: dict[tuple, Steer | None] = {}
        self.steered: dict[tuple[int, Steer], tuple[tuple[Candidate, ...], tuple[Candidate, ...]]] = {}

    def close(self) -> None:
        """Drop what refers back to this run (its bound methods, held by the framework's
        handle and by the device state), so that the run and all it made are freed as soon
        as it is done with, rather than left to the cycle collector: every computation's
        run, framework and plugins were cyclic garbage, walked by the collector."""
        self.fw.handle.possible_domains = None
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
        itype = self.memory.catalog.get(info.instance_type)
        return list(instance_slices(itype, info.name if info.exists else "")) if itype else []

    def key(self, pod: Pod, node_only: bool = False) -> tuple:
        """constraint_key, plus what the pod's claims ask for (claims of the same shape are
        interchangeable, whatever their names)."""
        if not pod.claims:
            # Pods are immutable and the cache keeps the same objects between computations:
            # a pod's key is made once (thousands wait through many computations).
            kept = self.memory.pod_keys
            known = kept.get((id(pod), node_only))
            if known is None or known[0] is not pod:
                known = kept[id(pod), node_only] = (pod, constraint_key(pod, node_only))
            return known[1]
        found = self._claim_keys.get(pod.claims)
        if found is None:
            claims = self.devices.context.claims if self.devices else {}
            found = tuple((c.requests, c.constraints, c.allocation is not None) if (c := claims.get(k)) is not None else ("missing", k) for k in pod.claims)
            self._claim_keys[pod.claims] = found
        return ConstraintKey((*constraint_key(pod, node_only), found))

    def possible_domains(self, pod: Pod, key: str) -> frozenset[str]:
        """The values of the label ``key`` that a new node the pod could run on may have:
        a fresh hostname, or what some offering gives such a node (``possible_zones``)."""
        if key == HOSTNAME:
            return frozenset({NEW_HOST})
        return self.possible_zones(pod) if key == ZONE else self._possible_values(pod, key)

    def possible_zones(self, pod: Pod) -> frozenset[str]:
        return self._possible_values(pod, ZONE)

    def _possible_values(self, pod: Pod, key: str) -> frozenset[str]:
        """Values of ``key`` on the nodes the pools could boot for the pod: an offering its
        node constraints accept, not marked unavailable, of a pool whose taints it tolerates.
        A value only an untolerated pool gives is no spread domain for the pod (whatever
        its ``nodeTaintsPolicy``: that policy is about nodes that exist), or the pod would be
        held to a domain no node of its can ever be in."""
        values: set[str] = set()
        for view in self.views:
            if view.taints and untolerated(view.taints, pod.tolerations, HARD_EFFECTS):
                continue
            for cand in view.candidates:
                if (key == ZONE and cand.offering.zone in values) or self.blocked(cand):
                    continue
                info = offering_node_info(view, cand)
                value = info.labels.get(key)
                if value is not None and value not in values and pod.accepts_node(info.labels, info.name):
                    values.add(value)
        return frozenset(values)

    def blocked(self, candidate: Candidate) -> bool:
        """Marked unavailable (the offering itself, or its whole zone), or of a reservation
        with no instance left."""
        o = candidate.offering
        return o.key in self.unavailable or (ANY_TYPE, o.capacity_type, o.zone) in self.unavailable or (bool(self.spent) and o.reservation in self.spent)

    def place(self, pod: Pod, info: NodeInfo, state: CycleState) -> bool:
        """Assume ``pod`` onto ``info``: Reserve, then Permit. False (and undone) on failure."""
        assert pod.key not in self.bindings, f"{pod.key} placed twice"
        self.changed.add(info.name)
        recorded = self.stepped.get(pod.key, pod)
        info.add_pod(recorded)
        if self.fw.run_reserve_and_permit(state, pod, info.name).code in (Code.SUCCESS, Code.WAIT):
            self.moves += 1
            self.bindings[pod.key] = info.name
            self.topology.added(recorded, info)
            if info.name in self.new_nodes:
                self.open.update(info)
            return True
        info.remove_pod(pod.key)
        return False

    def unplace(self, key: PodKey) -> None:
        node = self.bindings.pop(key)
        self.moves += 1
        self.changed.add(node)
        self.topology.removed(self.infos[node].remove_pod(key), self.infos[node])
        if node in self.new_nodes:
            self.open.update(self.infos[node])

    def budget(self, view: PoolView) -> binpack.Budget:
        """What the pool may still add, given its live nodes and the ones decided so far."""
        budget = limits_budget(view.pool)
        if budget == binpack.Budget():
            return budget  # no limits: nothing to count
        for name, info in self.infos.items():
            itype = self.memory.catalog.get(info.instance_type)
            if info.pool == view.name and itype is not None and name not in self.stopping:
                budget.spend(itype)
        return budget

    def drop_empty_new_nodes(self) -> None:
        for name, node in list(self.new_nodes.items()):
            if not node.info.pods and not node.standby:
                self.forget(name)

    def available(self, accepted: tuple[Candidate, ...]) -> tuple[Candidate, ...]:
        """``accepted`` less the offerings marked unavailable, once per answer of ``new_nodes.probe``
        in this computation."""
        if not self.unavailable and not self.spent:
            return accepted
        return self._available_memo.get(accepted, lambda offerings: tuple(c for c in offerings if not self.blocked(c)))

    def frontier(self, offerings: Sequence[Candidate]) -> list[Resources]:
        """``binpack.frontier`` of the offerings' allocatables, once per list of offerings (a
        pool's accepted offerings are the same for every group with the same constraints, and
        the scaler keeps them across computations)."""
        return self.memory.frontiers.get(offerings, frontier_of)

    def new_node(self, view: PoolView, candidate: Candidate, standby: bool = False, accepted: Sequence[Candidate] = ()) -> NewNode:
        i = len(self.new_nodes)
        while True:
            # 48 bits: names stay apart over a controller's life (100,000 nodes: a 1 in 50,000
            # chance that two ever share one; 32 bits made it likely)
            digest = hashlib.sha256(f"{self.now}|{i}|{view.name}".encode()).hexdigest()[:NODE_NAME_DIGITS]
            name = f"{self.memory.settings.nodes.name_tag}-{view.name}-{digest}"
            if name not in self.names_taken:
                break
            i += 1
        self.names_taken.add(name)
        self._count(candidate, -1)
        info = offering_node_info(view, candidate, name)
        self.infos[name] = info
        self.zone_load[info.zone] += 1
        node = NewNode(view, candidate, info, standby, accepted)
        self.new_nodes[name] = node
        self.open.update(info)
        return node

    def forget(self, name: str) -> None:
        """A new node this decision will not boot after all."""
        self.zone_load[self.infos.pop(name).zone] -= 1
        self._count(self.new_nodes[name].candidate, 1)
        del self.new_nodes[name]
        self.open.remove(name)

    def moved(self, node: NewNode, candidate: Candidate) -> None:
        """A new node planned as another offering (right-sized, or out of a spent
        reservation), with the same pods."""
        self._count(node.candidate, 1)
        self._count(candidate, -1)
        fresh = offering_node_info(node.view, candidate, node.info.name)
        for pod in node.info.pods.values():
            fresh.add_pod(pod)
        node.candidate, node.info = candidate, fresh
        self.infos[fresh.name] = fresh

    def _count(self, candidate: Candidate, change: int) -> None:
        """A node planned into (-1) or out of (+1) the candidate's reservation, if it has one."""
        reservation = candidate.offering.reservation
        if not reservation:
            return
        left = self.left[reservation] = self.left.get(reservation, 0) + change
        was = reservation in self.spent
        if (left <= 0) != was:
            (self.spent.add if left <= 0 else self.spent.discard)(reservation)
            self._available_memo.clear()  # (what ``available`` answered counted it as it was)

    def emptiest(self, choices: list[Candidate]) -> Candidate:
        """The choice in the zone with the fewest nodes: where nothing asks for a zone, new
        nodes spread over the zones instead of piling into the first one."""
        return min(choices, key=lambda c: (self.zone_load[c.offering.zone], c.offering.zone))


def holds_work(info: NodeInfo) -> bool:
    """Pods the node is there for: DaemonSet and mirror pods never make a node needed."""
    return len(info.pods) > info.node_pods


def limits_budget(pool: Pool) -> binpack.Budget:
    """What the pool's limits allow it in all (an empty budget where it has none)."""
    limits = pool.limits
    return binpack.Budget(limits.nodes, limits.cpu, limits.memory)


def node_level(pod: Pod) -> Pod:
    """The pod without its inter-pod constraints: what a node's labels alone decide."""
    return pod.constrained(spread=(), pod_affinity=NO_AFFINITY) if pod.spread or pod.pod_affinity else pod


def frontier_of(offerings: Sequence[Candidate]) -> list[Resources]:
    return binpack.frontier([o.allocatable for o in offerings])
