"""Consolidation: would these nodes' pods fit on the other nodes, plus at most one node
that costs less than they do? The scaler that provisions answers it, on the cluster as it
would be without them (Karpenter's shape: one scheduler for provisioning and disruption),
so a consolidation never plans what provisioning would not."""

from __future__ import annotations

import bisect
import dataclasses
import math
import operator
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

from nodemanager.model import LIVE_STATES, CapacityType, Node, NodeName, NodeState, Pod, PodKey, PodPhase
from nodemanager.model.by_node import PodsByNode
from nodemanager.model.resources import CPU, MEMORY, extended
from nodemanager.model.selectors import HARD_EFFECTS, Toleration, untolerated
from nodemanager.scaler.by_identity import ByIdentity
from nodemanager.scaler.decision import Decision, NodeSpec
from nodemanager.scaler.pools import PoolView
from nodemanager.scaler.snapshot import ClusterSnapshot
from nodemanager.scaler.usable import UsableOfferings, placement_key

SPOT_TO_SPOT_CHOICES = 15  # cheaper spot types needed before a spot node is replaced by spot (Karpenter's; the default of spotToSpotMinTypes)
MULTI_NODE_MAX = 100  # candidates multi-node consolidation considers at once (Karpenter's)
SIZES_KEPT = 256  # kinds of moving pods (and placements) whose cheaper offerings the quick test keeps
PODS_KEPT = 65536  # placed pods whose moving copies the what-ifs keep
TURNED_DOWN_KEPT = 4096  # sets of nodes turned down in one cluster that best remembers (a bound on memory)
HELD_KEPT = 8192  # nodes' pod tuples whose asks and own_node the quick test keeps (beyond most clusters' nodes; each holds its pods)
_KEY = operator.attrgetter("key")


@dataclass(frozen=True)
class Command:
    """A disruption to carry out (Karpenter's command): remove ``nodes``, booting
    ``replacements`` first (a consolidation has at most one)."""

    nodes: tuple[NodeName, ...]
    replacements: tuple[NodeSpec, ...]
    price: float  # what the nodes cost, per hour
    pods: int  # pods that move
    destinations: Mapping[PodKey, NodeName] = dataclasses.field(default_factory=dict, compare=False)  # where each would go (a new node by its name)

    @property
    def savings(self) -> float:
        return self.price - sum(r.price for r in self.replacements)

    def describe(self) -> str:
        what = "replace with " + ", ".join(f"{r.instance_type} ({r.capacity_type})" for r in self.replacements) if self.replacements else "delete"
        return f"{what}: {len(self.nodes)} node(s), {self.pods} pod(s) move, saves ${self.savings:.4f}/h"


class Planner:
    """Asks the scaler what would become of candidate nodes' pods."""

    def __init__(
        self,
        compute: Callable[[ClusterSnapshot], Decision],
        price_of: Callable[[Node], float],
        spot_choices: Callable[[Node], int],
        *,
        spot_minimum: Callable[[Node], int] = lambda _node: SPOT_TO_SPOT_CHOICES,
        sizes_below: Callable[[float, Sequence[Pod]], Sequence[tuple[int, int]]] = lambda _price, _pods: (),
        takes_more: Callable[[Node], bool] = lambda _node: True,
        own_nodes: Callable[[tuple[Pod, ...]], Sequence[bool]] = lambda pods: (False,) * len(pods),
        price_factor: Callable[[Sequence[Node]], float] = lambda _nodes: 1.0,
        floors: Callable[[ClusterSnapshot, set[str], Sequence[Pod]], Mapping[str, int]] = lambda _snapshot, _names, _pods: {},
        cheapest: Callable[[Sequence[Pod], Mapping[str, int], tuple[int, int]], float] = lambda _pods, _floors, _holding: 0.0,
        worth: Callable[[ClusterSnapshot, Command], str] = lambda _snapshot, _command: "",
        promising: Callable[[ClusterSnapshot, Sequence[Node]], str] = lambda _snapshot, _nodes: "",
        needs: Callable[[Pod], Needs] = lambda _pod: (None, ()),
    ) -> None:
        self.compute = compute  # the scaler's compute at this instant
        self.price_of = price_of
        self.spot_choices = spot_choices  # spot types of the node's pool cheaper than it
        self.spot_minimum = spot_minimum  # how many of them a spot-to-spot replacement needs (the pool's spotToSpotMinTypes)
        self.sizes_below = sizes_below  # the (CPU, memory) of offerings under a price that all these pods may use, none larger in both
        self.takes_more = takes_more  # False for a node that never holds a second pod (a cell pool's): fixed for a node
        self.own_nodes = own_nodes  # for a node's pods, whether each may go only to such nodes (a new node holds it alone)
        self.price_factor = price_factor  # a replacement may cost at most this share of what it replaces
        self.floors = floors  # per pool, the vCPU a new node of it for these pods surely has, without these nodes (the scaler's sure_floors)
        self.cheapest = cheapest  # the least price of an offering some of these pods may use, of at least those vCPU, holding this much
        self.worth = worth  # why a consolidation found is not worth its evictions ("" if it is)
        self.promising = promising  # why no consolidation of these nodes can be worth it, before the what-if ("" if one may)
        self.needs = needs  # what keeps a pod off a node besides CPU and memory, as the scaler's filters judge it
        self.evaluations = 0
        # The last snapshot's room, kept with it: an id could be reused once a snapshot is freed.
        self._room: _Room | None = None
        self._rooms: dict[frozenset, _Room] = {}  # the last snapshot's room of the nodes some pods may go to, by the pods' needs (see _room_for)
        self._tainted = False  # whether a node of the last snapshot has a taint no pod without tolerations may ignore
        # Each node's room as the last room counted it, with its record and pods: the same
        # objects while they are unchanged, as most nodes' are from one pass to the next.
        self._free: dict[str, _Free] = {}
        self._asked: ByIdentity[tuple[Pod, ...], tuple[tuple[tuple[int, int], ...], tuple[int, int]]] = ByIdentity(HELD_KEPT)  # a node's pods -> _asks_of them
        self._needed: ByIdentity[tuple[Pod, ...], frozenset[Needs]] = ByIdentity(HELD_KEPT)  # a node's pods -> their needs
        self._moved: ByIdentity[Pod, Pod] = ByIdentity(PODS_KEPT)  # a placed pod -> it waiting again (what-ifs move the same pods pass after pass)
        self._turned_down: dict[frozenset[NodeName], str] = {}  # sets of nodes that cannot consolidate in this cluster, and why (see best)
        self._turned_down_in: Hashable = None  # ... the cluster: ``best``'s key

    def _hopeless(self, snapshot: ClusterSnapshot, nodes: Sequence[Node]) -> bool:
        """A quick test before the what-if, with room counted generously (only CPU and
        memory, every other node as if it took any of the pods, where one of them tolerates
        its taints and has room for what it asks of other resources, such as GPUs), so a
        consolidation that may work is never skipped. It cannot work if the nodes' pods exceed the room the other nodes have
        plus the largest node that costs less than they do (at most their pools'
        consolidationPriceImprovementFactor of it); or if the pods no other node has room
        for, which must all go on that one node, fit on no offering that costs less and
        that all of them may use (their selectors, affinity and tolerations allow it), or are
        more than one and one of them may go only to a cell pool's nodes (which hold one pod);
        or if the other nodes cannot hold them all (each resource alone tells: ``overflow``)
        and no offering that some of them may use and that holds what they cannot costs
        less, of at least the vCPU its pool's node size floor surely has then (``floors``: a
        pool of 16-vCPU nodes cannot replace one of them with a new node of the same floor
        for less)."""
        names = {n.name for n in nodes}
        # Each node's pods (its tuple, the same object while they are) and what is derived
        # from them, kept by that tuple: every pass tests the same candidates again.
        held = [snapshot.by_node.held(name) for name in names]
        asked = [self._asked.get(on, _asks_of) for on in held]
        if len(held) == 1:
            moving, asks, own = held[0], asked[0][0], self.own_nodes(held[0])
        else:
            moving, asks, own = [p for on in held for p in on], [a for each in asked for a in each[0]], [o for on in held for o in self.own_nodes(on)]
        room = self._room_for(snapshot, frozenset().union(*(self._needed.get(on, self._needs_of) for on in held)))
        price = sum(self.price_of(n) for n in nodes)
        factor = self.price_factor(nodes)
        if factor < 1.0:  # a replacement may cost this much at most (a little over: never too strict)
            price *= factor * (1 + 1e-9)
        sizes = self.sizes_below(price, ())
        big = (max((c for c, _ in sizes), default=0), max((m for _, m in sizes), default=0))
        total = room.total_without(names)
        for i in (0, 1):
            if sum(each[1][i] for each in asked) > total[i] + big[i]:
                return True
        roomiest = room.maximal_without(names)
        # (a cell pool's nodes take no more: a pod that may go only to one has no room elsewhere)
        homeless = [p for p, r, alone in zip(moving, asks, own, strict=True) if alone or not _holds(roomiest, r)]
        if len(homeless) > 1 and any(own):
            return True
        need = (sum(p.requests.cpu for p in homeless), sum(p.requests.memory for p in homeless))
        if homeless and not _holds(self.sizes_below(price, homeless), need):
            return True
        over = room.overflow(names, asks)
        if over == (0, 0):
            return False  # perhaps a deletion
        # A new node must hold at least that much, and be as large as its pool's node size floor.
        return self.cheapest(moving, self.floors(snapshot, names, moving), over) >= price

    def _room_in(self, snapshot: ClusterSnapshot) -> _Room:
        """The room of the snapshot's nodes that take more pods, counted again only for the
        nodes whose record or pods changed since the last room was."""
        by_node, before = snapshot.by_node, self._free
        entries: dict[str, _Free] = {}
        free: dict[str, tuple[int, int]] = {}
        for n in snapshot.nodes:
            on = by_node.on(n.name)
            entry = before.get(n.name)
            if entry is None or entry[0] is not n or entry[1] is not on:
                room, other = None, {}
                if n.state in LIVE_STATES and self.takes_more(n):
                    held = by_node.held(n.name)
                    cpu, memory = _asks_of(held)[1]
                    room = (n.allocatable.cpu - cpu, n.allocatable.memory - memory)
                    other = self._other_room(n, held)
                entry = (n, on, room, other)
            entries[n.name] = entry
            if entry[2] is not None:
                free[n.name] = entry[2]
        self._free = entries
        return _Room(snapshot, free)

    def _room_for(self, snapshot: ClusterSnapshot, needs: frozenset[Needs]) -> _Room:
        """The room of the snapshot's nodes that a pod of one of these ``needs`` may go to,
        as far as their taints and the room for extended resources tell; each such set of
        nodes counted once a snapshot (the candidates' pods are of a few kinds)."""
        if self._room is None or self._room.snapshot is not snapshot:
            self._room = self._room_in(snapshot)
            self._rooms = {}
            self._tainted = any(untolerated(e[0].taints, (), HARD_EFFECTS) for e in self._free.values() if e[2] is not None)
        if not any(other or (tolerations is not None and self._tainted) for tolerations, other in needs):
            return self._room
        room = self._rooms.get(needs)
        if room is None:
            entries = self._free
            room = self._rooms[needs] = _Room(snapshot, {name: f for name, f in self._room.free.items() if _may_take(entries[name], needs)})
        return room

    def _needs_of(self, held: tuple[Pod, ...]) -> frozenset[Needs]:
        return frozenset(map(self.needs, held))

    def _other_room(self, node: Node, held: tuple[Pod, ...]) -> dict[str, int]:
        """The room ``node`` has free for extended resources, as ``needs`` counts its pods'
        asks (never less than the filters see free); none on a node that has none."""
        if not extended(node.allocatable):
            return {}
        free = {r: a for r, a in node.allocatable.items() if r not in _CPU_MEMORY}
        for pod in held:
            for r, a in self.needs(pod)[1]:
                free[r] = free.get(r, 0) - a
        return free

    def relocate(self, snapshot: ClusterSnapshot, nodes: Sequence[Node], one_new_node: bool = False) -> tuple[Command | None, str]:
        """``relocate`` with this planner's scaler and prices, counted."""
        self.evaluations += 1
        return relocate(self.compute, self.price_of, snapshot, nodes, one_new_node, moved=self._waiting_again)

    def _waiting_again(self, pod: Pod) -> Pod:
        return self._moved.get(pod, waiting_again)

    def consolidate(self, snapshot: ClusterSnapshot, nodes: Sequence[Node]) -> tuple[Command | None, str]:
        """The consolidation of ``nodes``: their pods elsewhere plus at most one node that
        costs strictly less (and at most ``price_factor`` of them), never of their type, and
        ``worth`` its evictions; or None and why not."""
        moved, why, _ = self._consolidate(snapshot, nodes)
        return self._weighed(snapshot, moved) if moved is not None else (None, why)

    def _tried(self, snapshot: ClusterSnapshot, nodes: Sequence[Node]) -> tuple[Command | None, str]:
        """``consolidate``, but a set of nodes turned down in this same cluster for a reason
        only a change of the cluster can undo is not asked again (see ``best``)."""
        key = frozenset(n.name for n in nodes)
        why = self._turned_down.get(key)
        if why is not None:
            return None, why
        moved, why, lasting = self._consolidate(snapshot, nodes)
        if moved is not None:
            return self._weighed(snapshot, moved)
        if lasting:
            if len(self._turned_down) >= TURNED_DOWN_KEPT:
                self._turned_down.clear()
            self._turned_down[key] = why
        return None, why

    def _weighed(self, snapshot: ClusterSnapshot, moved: Command) -> tuple[Command | None, str]:
        why = self.worth(snapshot, moved) if moved.savings > 0 else ""
        return (None, why) if why else (moved, "")

    def _consolidate(self, snapshot: ClusterSnapshot, nodes: Sequence[Node]) -> tuple[Command | None, str, bool]:
        """``consolidate`` short of weighing the evictions: the move, or None and why not;
        and whether that why holds for as long as the cluster is the same (not when
        ``promising`` turned it down: as their pods run on, a move may pay)."""
        if self._hopeless(snapshot, nodes):
            return None, "its pods fit neither on the other nodes nor with them on a cheaper node", True
        if why := self.promising(snapshot, nodes):
            return None, why, False
        moved, why = self.relocate(snapshot, nodes, one_new_node=True)
        if moved is None:
            return None, why, True
        if any(s.standby for s in moved.replacements):
            return None, "its pods would take a standby node", True
        if len(moved.replacements) > 1:
            return None, f"its pods would need {len(moved.replacements)} new nodes", True
        factor = self.price_factor(nodes) if moved.replacements else 1.0
        for replacement in moved.replacements:
            if replacement.price >= moved.price:
                return None, f"a replacement ({replacement.instance_type}, ${replacement.price:.4f}/h) would not be cheaper than ${moved.price:.4f}/h", True
            if replacement.price > moved.price * factor * (1 + 1e-9):  # (a saving of exactly the share asked is enough)
                return (
                    None,
                    f"a replacement ({replacement.instance_type}, ${replacement.price:.4f}/h) would save less than "
                    f"{1 - factor:.0%} of ${moved.price:.4f}/h (consolidationPriceImprovementFactor {factor:g})",
                    True,
                )
            same = [n for n in nodes if (n.instance_type, n.capacity_type) == (replacement.instance_type, replacement.capacity_type)]
            if same:
                return None, f"the replacement would be the same type as {same[0].name} ({replacement.instance_type})", True
            spot = replacement.capacity_type is CapacityType.SPOT
            if spot and len(nodes) == 1 and nodes[0].is_spot and (have := self.spot_choices(nodes[0])) < (need := self.spot_minimum(nodes[0])):
                return None, f"spot to spot needs {need} cheaper spot types (has {have})", True
        return moved, "", True

    def best(
        self, snapshot: ClusterSnapshot, candidates: Sequence[Node], single_tries: int, together: int | None = None, cluster: Hashable = None
    ) -> tuple[Command | None, dict[NodeName, str]]:
        """Karpenter's order: the longest prefix of ``candidates`` (cheapest to disrupt first,
        at most ``together`` of them) that consolidates together, found by bisection; else
        one node at a time, at most ``single_tries`` of them. Also why each single candidate
        tried did not. Nodes that never hold a second pod (a cell pool's) are left out of the
        prefix: each of their pods needs a new node of its own, so two of them made every
        longer prefix fail, and the bisection stopped short of the merges of the nodes after
        them (they are tried one at a time).

        ``cluster``: what ``snapshot`` was made of, equal for the same cluster (None: not
        known). A pass that found only moves not worth their evictions yet is made again
        later on the same cluster; the sets of nodes it turned down for other reasons (their
        pods would not fit, the replacement would cost as much) are not asked again then."""
        if cluster is None or cluster != self._turned_down_in:
            self._turned_down = {}
        self._turned_down_in = cluster
        why: dict[NodeName, str] = {}
        merging = [n for n in candidates[:together] if self.takes_more(n)]  # (None: all of them)
        lo, hi, found = 2, min(len(merging), MULTI_NODE_MAX), None
        while lo <= hi:
            mid = (lo + hi) // 2
            result, _ = self._tried(snapshot, merging[:mid])
            if result is not None and result.savings > 0:
                found, lo = result, mid + 1
            else:
                hi = mid - 1
        if found is not None:
            return found, why
        for node in candidates[:single_tries]:
            result, reason = self._tried(snapshot, [node])
            if result is not None:
                return result, why
            why[node.name] = reason
        return None, why


def relocate(
    compute: Callable[[ClusterSnapshot], Decision],
    price_of: Callable[[Node], float],
    snapshot: ClusterSnapshot,
    nodes: Sequence[Node],
    one_new_node: bool = False,
    *,
    moved: Callable[[Pod], Pod] | None = None,
) -> tuple[Command | None, str]:
    """Where ``nodes``' pods would go without them (the other nodes, and the new nodes the
    scaler would boot for them; with ``one_new_node``, on one new node if it would boot
    several), or None and why they could not all go. ``moved``: ``waiting_again``, or the
    same copy of it kept for each pod."""
    names = {n.name for n in nodes}
    by_node = snapshot.by_node
    held = sorted((p for name in names for p in by_node.held(name)), key=_KEY)
    moving = list(map(moved or waiting_again, held))
    waiting = by_node.waiting + tuple(moving)
    staying = {name: on for name, on in by_node.placed.items() if name not in names}  # the pods of every other node, as they were
    pods = waiting + tuple(p for on in staying.values() for p in on)
    what_if = dataclasses.replace(
        snapshot,
        one_new_node=one_new_node,
        pods=pods,
        nodes=tuple(dataclasses.replace(n, state=NodeState.TERMINATING) if n.name in names else n for n in snapshot.nodes),
        grouped=PodsByNode(pods, waiting, staying),
    )
    decision = compute(what_if)
    missing = [p.key for p in moving if p.key not in decision.bindings]
    if missing:
        why = decision.waiting.get(missing[0]) or decision.unschedulable.get(missing[0]) or "no room"
        return None, f"{len(missing)} pod(s) would not fit elsewhere ({why})"
    # The cluster is settled (nothing to boot without the change): whatever the what-if
    # boots, it boots for this change, standby made up for included.
    destinations = {p.key: decision.bindings[p.key] for p in moving}
    return Command(tuple(sorted(names)), tuple(decision.start), sum(price_of(n) for n in nodes), len(moving), destinations), ""


def waiting_again(pod: Pod) -> Pod:
    """A placed pod as a what-if places it again: unbound and pending."""
    return pod.living(node_name="", phase=PodPhase.PENDING)


class _Room:
    """The room (CPU, memory) each node that takes more pods has free in a snapshot, summed
    and as its maximal points, so each quick test leaves its own nodes out without a pass
    over every node (a pass over 60 nodes for each of a day's 6,400 quick tests was a
    twentieth of the README's day)."""

    def __init__(self, snapshot: ClusterSnapshot, free: dict[str, tuple[int, int]]) -> None:
        self.snapshot = snapshot
        self.free = free
        self.total = (sum(max(f[0], 0) for f in free.values()), sum(max(f[1], 0) for f in free.values()))
        self._maximal = maximal(list(free.values()))
        self._on_maximal = set(self._maximal)
        # each resource's room, largest first, with the node that has it (see overflow)
        self._by_room = [sorted(((f[i], name) for name, f in free.items() if f[i] >= 0), reverse=True) for i in (0, 1)]

    def total_without(self, names: set[str]) -> tuple[int, int]:
        """The room all but these nodes have free, summed (what is taken counts as none)."""
        out = [f for name in names if (f := self.free.get(name)) is not None]
        return (self.total[0] - sum(max(f[0], 0) for f in out), self.total[1] - sum(max(f[1], 0) for f in out))

    def maximal_without(self, names: set[str]) -> list[tuple[int, int]]:
        """The maximal points of all but these nodes' room: the snapshot's, unless one of
        these nodes is among them (points another dominates make no difference)."""
        if any(self.free.get(name) in self._on_maximal for name in names):
            return maximal([f for name, f in self.free.items() if name not in names])
        return self._maximal

    def overflow(self, names: set[str], asks: Sequence[tuple[int, int]]) -> tuple[int, int]:
        """The CPU and memory of ``asks`` that all but these nodes cannot hold, at least, as
        each resource alone tells: the k largest asks of it go only to nodes with at least
        the k-th largest free, so what they ask beyond what those nodes have free together
        goes to a new node. (0, 0): they may all fit. This sees what the sum of the room
        cannot: a node's pods of 2 CPU each fit on no number of nodes with 1.5 CPU free."""
        out = [0, 0]
        for i, rooms in enumerate(self._by_room):
            need = room = at = 0
            for ask in sorted((a[i] for a in asks), reverse=True):
                need += ask
                while at < len(rooms) and rooms[at][0] >= ask:
                    if rooms[at][1] not in names:
                        room += rooms[at][0]
                    at += 1
                out[i] = max(out[i], need - room)
        return out[0], out[1]


class CheaperSizes:
    """The quick test's offerings: the (CPU, memory) of those under a price that every one
    of some pods may use (none: of any pool), those another is at least as large as in both
    left out. Kept per kind of pods (their ``placement_key``s) and per price step."""

    def __init__(self, views: Sequence[PoolView], asks: Callable[[Pod], tuple[tuple[str, int], ...]] = lambda _pod: ()) -> None:
        self.views = views
        self.asks = asks  # the extended resources a pod asks that the filters check (Needs)
        self.usable = UsableOfferings(views, limit=SIZES_KEPT)
        self._cells = frozenset(v.name for v in views if v.cell)
        self._own: ByIdentity[tuple[Pod, ...], tuple[bool, ...]] = ByIdentity(HELD_KEPT)  # a node's pods -> own_node of each (each quick test asks it)
        # (kinds, extended resources asked) -> (offers by price, sizes below each)
        self._kinds: dict[tuple, tuple[list[tuple[float, int, int]], dict[int, list[tuple[int, int]]]]] = {}
        self._floored: dict[tuple[frozenset, tuple], list[tuple[float, int, int]]] = {}  # (kinds, floors) -> their offers by price (see cheapest)

    def own_nodes(self, pods: tuple[Pod, ...]) -> tuple[bool, ...]:
        """``own_node`` of each of a node's pods, kept while they are the same tuple."""
        return self._own.get(pods, lambda on: tuple(map(self.own_node, on)))

    def own_node(self, pod: Pod) -> bool:
        """Every offering ``pod`` may use is a cell pool's: a new node holds it alone."""
        usable = self.usable.of(pod)
        return bool(usable) and all(pool in self._cells for pool, _ in usable)

    def below(self, price: float, pods: Sequence[Pod]) -> list[tuple[int, int]]:
        """The (CPU, memory) of the offerings under ``price`` that all ``pods`` may use and
        that hold what they ask together of extended resources (GPUs, say), as maximal points."""
        each = {placement_key(p): p for p in pods}  # one pod of each kind
        other: dict[str, int] = {}
        for pod in pods:
            for r, a in self.asks(pod):
                other[r] = other.get(r, 0) + a
        kind = (frozenset(each), tuple(sorted(other.items())))
        entry = self._kinds.get(kind)
        if entry is None:
            if len(self._kinds) >= SIZES_KEPT:
                self._kinds.clear()
            usable = (c for _, c in self.usable.shared(each.values()) if all(c.allocatable.get(r) >= a for r, a in other.items()))
            offers = sorted((c.price, c.allocatable.cpu, c.allocatable.memory) for c in usable)
            entry = self._kinds[kind] = (offers, {})
        offers, found = entry
        at = bisect.bisect_left(offers, (price,))
        if at not in found:
            found[at] = maximal([(cpu, memory) for _, cpu, memory in offers[:at]])
        return found[at]

    def cheapest(self, pods: Sequence[Pod], floors: Mapping[str, int], holding: tuple[int, int]) -> float:
        """The least price of an offering that some of ``pods`` may use, of at least as many
        vCPU as ``floors`` names for its pool, with at least ``holding`` (CPU, memory)
        allocatable (inf: none)."""
        kinds = {placement_key(p): p for p in pods}
        key = (frozenset(kinds), tuple(sorted(floors.items())))
        offers = self._floored.get(key)
        if offers is None:
            if len(self._floored) >= SIZES_KEPT:
                self._floored.clear()
            usable = {id(c): c for p in kinds.values() for pool, c in self.usable.of(p) if c.itype.vcpu >= floors.get(pool, 0)}
            offers = self._floored[key] = sorted((c.price, c.allocatable.cpu, c.allocatable.memory) for c in usable.values())
        return next((price for price, cpu, memory in offers if cpu >= holding[0] and memory >= holding[1]), math.inf)


# a node, its pods, its CPU and memory free and its other resources' (None and {}: it takes no more pods)
_Free = tuple[Node, tuple[Pod, ...], tuple[int, int] | None, dict[str, int]]
_CPU_MEMORY = frozenset({CPU, MEMORY})


# What keeps a pod off a node besides CPU and memory: its tolerations (None: the filters do
# not read taints) and the extended resources it asks (GPUs, say) by name.
Needs = tuple[tuple[Toleration, ...] | None, tuple[tuple[str, int], ...]]


def _may_take(entry: _Free, needs: frozenset[Needs]) -> bool:
    """Whether the node of ``entry`` may take one of the pods of these needs: it has no
    taint the pod does not tolerate, and room for what it asks of extended resources."""
    node, other = entry[0], entry[3]
    return any(
        (tolerations is None or not untolerated(node.taints, tolerations, HARD_EFFECTS)) and all(other.get(r, 0) >= a for r, a in asks)
        for tolerations, asks in needs
    )


def _asks_of(held: tuple[Pod, ...]) -> tuple[tuple[tuple[int, int], ...], tuple[int, int]]:
    """The (CPU, memory) each of a node's held pods asks, and their sum."""
    asks = tuple(p.requests.cpu_memory() for p in held)
    return asks, (sum(a[0] for a in asks), sum(a[1] for a in asks))


def maximal(points: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The points no other point is at least as large as in both coordinates."""
    out: list[tuple[int, int]] = []
    for cpu, memory in sorted(points, reverse=True):
        if not out or memory > out[-1][1]:
            out.append((cpu, memory))
    return out


def _holds(points: Sequence[tuple[int, int]], need: tuple[int, int]) -> bool:
    """Some point is at least ``need`` in both coordinates."""
    return any(cpu >= need[0] and memory >= need[1] for cpu, memory in points)
