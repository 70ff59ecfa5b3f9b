"""Packing pods of one constraint group onto new nodes at close to the LP's cost.

Pods arrive as classes of identical requests (20,000 pods of 30 shapes are 30 classes).
Each round the packer fills a node of every promising instance type greedily, largest
class first, and keeps the type whose packed pods are worth the most per dollar at the
LP's dual prices (see ``lp.py``). A fill that can be repeated is emitted as many times as
the remaining pods allow, so the work grows with the number of *distinct* nodes, not
with the number of pods. Pool limits bound every emission.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from nodemanager.model import InstanceType, Resources
from nodemanager.scaler.aligned import AlignedFills
from nodemanager.scaler.by_identity import ByIdentity
from nodemanager.scaler.lp import Duals, DualSolver, Shape
from nodemanager.scaler.pools import Candidate, capacity_of

CANDIDATES_PER_ROUND = 10  # most LP-efficient types tried per round
STREAK_SHARE = 0.99  # a round's winner takes more nodes while its fills are worth this share of its first, per dollar
TABLES_KEPT = 256  # candidate lists whose tables a TypeTables keeps
UNIFORM_MAX_PODS = 64  # pods at most for which fleets of one type are compared with the packer's
RANKINGS_KEPT = 4096  # rankings a TypeTables keeps
PACKS_KEPT = 4096  # packings a TypeTables keeps (a decision packs the few pods that just arrived: the same ones again and again)
MAX_CLASSES = 128  # the packer's work grows with classes x nodes: more distinct requests are grouped
GROUPINGS = (16, 32, 48)  # how many groups of similar requests are tried; the cheapest plan wins


def frontier(capacities: Sequence[Resources]) -> list[Resources]:
    """The capacities no other one holds: a request fits one of ``capacities`` exactly when it
    fits one of these (a few, where a catalog has hundreds of offerings)."""
    kept: list[Resources] = []
    for c in sorted(set(capacities), key=lambda c: (-c.cpu, -c.memory, sorted(c.items()))):
        if not any(c.fits(k) for k in kept):
            kept.append(c)
    return kept


def similar(requests: Sequence[Resources], counts: Sequence[int], limit: int) -> tuple[list[list[int]], list[Resources]]:
    """Indices of ``requests`` in at most ``limit`` groups of similar requests (the same
    resources, each amount within a factor of the others, the factor as small as the limit
    allows), and each group's typical request: its members' mean, rounded up."""
    return similar_groupings(requests, counts, (limit,))[0]


def similar_groupings(requests: Sequence[Resources], counts: Sequence[int], limits: Sequence[int]) -> list[tuple[list[list[int]], list[Resources]]]:
    """``similar`` for each of ``limits``, from one sweep over the factors (each grouping is
    the finest within its limit; the factor grows by half each step)."""
    amounts = [sorted((n, v) for n, v in r.items() if v > 0) for r in requests]
    names = [tuple(n for n, _ in a) for a in amounts]  # requests group only with ones of the same resources
    logs = [[math.log(v) for _, v in a] for a in amounts]
    widest = max((v for values in logs for v in values), default=0.0)
    columns: dict[str, list[float]] = defaultdict(list)  # each resource's amounts: requests in different bins of one never group
    for request_names, values in zip(names, logs, strict=True):
        for n, v in zip(request_names, values, strict=True):
            columns[n].append(v)
    found_for: dict[int, list[list[int]]] = {}
    step = 0.01
    while len(found_for) < len(limits):
        scale = math.log1p(step)
        wanted = max(limit for limit in limits if limit not in found_for)
        if scale <= widest and any(len({int(v / scale) for v in column}) > wanted for column in columns.values()):
            step *= 1.5  # too many groups by one resource alone: no grouping of this step is kept
            continue
        found: dict[tuple, list[int]] = defaultdict(list)
        for i, values in enumerate(logs):
            found[(names[i], *[int(v / scale) for v in values])].append(i)
        for limit in limits:
            if limit not in found_for and (len(found) <= limit or scale > widest):
                found_for[limit] = list(found.values())  # few enough, or one group per set of resource names
        step *= 1.5
    out = []
    for limit in limits:
        groups = found_for[limit]
        typical = []
        for members in groups:
            total, pods = Resources.total(requests[i] * counts[i] for i in members), sum(counts[i] for i in members)
            typical.append(Resources({n: -(-v // pods) for n, v in total.items()}))
        out.append((groups, typical))
    return out


Allocatables = Mapping[str, tuple[int, ...]]  # instance type -> its allocatable as a Vectors tuple


@dataclass
class Budget:
    """What a pool may still add: nodes, milli-cpu and memory bytes (None: unbounded)."""

    nodes: int | None = None
    cpu: int | None = None
    memory: int | None = None

    def left(self) -> tuple[int | None, int | None, int | None]:
        """Nodes, milli-cpu and memory left, as a key (``dataclasses.astuple`` copies deeply:
        a tenth of a consolidation what-if's packing)."""
        return (self.nodes, self.cpu, self.memory)

    def copies(self, itype: InstanceType) -> int | None:
        """How many more nodes of ``itype`` fit the limits (None: no limit)."""
        cpu, memory = capacity_of(itype)
        caps = [max(b, 0) // c for b, c in ((self.nodes, 1), (self.cpu, cpu), (self.memory, memory)) if b is not None and c > 0]
        return min(caps) if caps else None

    def spend(self, itype: InstanceType, count: int = 1) -> None:
        """Count ``count`` nodes of ``itype`` (negative gives them back)."""
        cpu, memory = capacity_of(itype)
        if self.nodes is not None:
            self.nodes -= count
        if self.cpu is not None:
            self.cpu -= cpu * count
        if self.memory is not None:
            self.memory -= memory * count

    def share(self, itype: InstanceType) -> float:
        """The largest fraction of what is left of any limit that one node of ``itype`` takes
        (0: no limit)."""
        cpu, memory = capacity_of(itype)
        return max((c / b if b > 0 else math.inf for b, c in ((self.nodes, 1), (self.cpu, cpu), (self.memory, memory)) if b is not None), default=0.0)

    def blocking(self, itype: InstanceType) -> str:
        cpu, _memory = capacity_of(itype)
        if self.nodes is not None and self.nodes < 1:
            return "nodes"
        if self.cpu is not None and self.cpu < cpu:
            return "cpu"
        return "memory"


@dataclass(frozen=True)
class Fill:
    """One node's worth of pods: ``counts[i]`` pods of class i on ``candidate``."""

    candidate: Candidate
    counts: tuple[int, ...]
    copies: int


class Vectors:
    """Requests and allocatables as integer tuples over one fixed list of resource names."""

    def __init__(self, requests: Sequence[Resources]) -> None:
        names = sorted({n for r in requests for n in r.names()} | {"pods"})
        self.names = names
        self.pods_index = names.index("pods")
        self.cpu_memory = [names.index(n) for n in ("cpu", "memory") if n in names]
        self.requests = [self.of(r, pods=1) for r in requests]

    def of(self, resources: Resources, pods: int = 0) -> tuple[int, ...]:
        return tuple(pods if n == "pods" and pods else resources.get(n) for n in self.names)

    def total(self, counts: Sequence[int]) -> list[int]:
        """What ``counts`` pods of each class ask, summed per resource."""
        return [sum(r[j] * k for r, k in zip(self.requests, counts, strict=True)) for j in range(len(self.names))]


def _holds_one(allocatable: tuple[int, ...], request: tuple[int, ...], per_node: int | None) -> bool:
    """Whether an empty node of ``allocatable`` takes one pod of ``request``."""
    return greedy_fill(allocatable, [request], [1], per_node)[0] > 0


def greedy_fill(
    allocatable: tuple[int, ...], requests: Sequence[tuple[int, ...]], remaining: Sequence[int], per_node: int | None, order: Sequence[int] | None = None
) -> tuple[int, ...]:
    """Pods per class that fit one empty node, at most ``per_node`` in all (None: no such
    limit), taking classes in ``order`` (default: as given)."""
    free = list(allocatable)
    counts = [0] * len(requests)
    room_left = per_node
    for index in order if order is not None else range(len(requests)):
        request, left = requests[index], remaining[index]
        n = left if room_left is None else min(left, room_left)
        if n <= 0:
            continue  # none of the class left (or no room): counts[index] stays 0
        for have, need in zip(free, request, strict=True):
            if need > 0 and have // need < n:  # (comparisons, not min(): called for every class of every trial fill)
                n = have // need
                if n <= 0:
                    break
        if n > 0:
            free = [have - need * n for have, need in zip(free, request, strict=True)]
            if room_left is not None:
                room_left -= n
            counts[index] = n
    return tuple(counts)


def proportional_fill(
    allocatable: tuple[int, ...], requests: Sequence[tuple[int, ...]], remaining: Sequence[int], order: Sequence[int], demand: Sequence[int]
) -> tuple[int, ...]:
    """A node that is a miniature of the remaining pods (``demand``: their requests summed
    per resource): the largest fraction of every class that fits, then topped up greedily.
    Its cpu:memory ratio is the workload's, so neither resource is left idle on a type
    whose ratio matches."""
    fraction = min((a / d for a, d in zip(allocatable, demand, strict=True) if d > 0), default=0.0)
    fraction = min(fraction, 1.0)
    base = [int(k * fraction) for k in remaining]
    free = list(allocatable)
    for request, b in zip(requests, base, strict=True):
        if b:
            free = [f - need * b for f, need in zip(free, request, strict=True)]
    extra = greedy_fill(free, requests, [k - b for k, b in zip(remaining, base, strict=True)], None, order)
    return tuple(b + e for b, e in zip(base, extra, strict=True))


@lru_cache(maxsize=32)
def _solver(shapes: tuple[Shape, ...]) -> DualSolver:
    """One solver per set of types: a pool's types recur across groups and rounds."""
    return DualSolver(shapes)


def cheapest_per_type(candidates: Iterable[Candidate]) -> list[Candidate]:
    """One candidate per instance type: its cheapest offering (the first of equals)."""
    by_type: dict[str, Candidate] = {}
    for c in candidates:
        known = by_type.get(c.itype.name)
        if known is None or c.price < known.price:
            by_type[c.itype.name] = c
    return list(by_type.values())


def shape_of(candidate: Candidate) -> Shape:
    """What the LP knows of an offering: its allocatable CPU and memory and its price."""
    return Shape(candidate.offering.instance_type, candidate.allocatable.cpu, candidate.allocatable.memory, candidate.price)


class TypeTables:
    """What the packer derives from a list of candidates (one per type, their shapes and
    allocatable vectors), kept for the candidate lists packed for again and again (within
    a computation and across them: a scaler keeps one while its catalog and prices hold).
    Each entry holds its candidates, so the ids in its key stay theirs. At most
    ``TABLES_KEPT`` lists are kept; past that the tables start again."""

    def __init__(self) -> None:
        self._tables: dict[tuple, tuple[Sequence[Candidate], list[Candidate], list[Shape], dict[str, tuple[int, ...]]]] = {}
        self._rankings: dict[tuple[int, float, float, int, int], list[int]] = {}
        self._columns: ByIdentity[list[Shape], list[tuple[int, int, float]]] = ByIdentity(TABLES_KEPT)  # shapes -> their cpu, memory and price
        self._undominated: ByIdentity[list[Candidate], list[Candidate]] = ByIdentity(TABLES_KEPT)  # a pool of ``get`` -> see undominated
        # pack's arguments -> (its candidates, what it returned, the budget it left)
        self.packs: dict[tuple, tuple[Sequence[Candidate], tuple[list[Fill], list[int], dict[int, str]], tuple[int | None, ...]]] = {}

    def ranking(self, shapes: list[Shape], cpu_price: float, memory_price: float, cpu: int, memory: int, *, first: int | None = None) -> list[int]:
        """``shapes``' indices, the most allocatable per dollar at these dual prices first,
        counting no more than ``cpu`` and ``memory`` of it (then the cheaper, then by name);
        only the ``first`` so many (None: all). Asked for again and again (the duals are one
        of the LP's few vertices, the pods left recur); ``shapes`` is a list these tables hold."""
        key = (id(shapes), cpu_price, memory_price, cpu, memory, first)
        found = self._rankings.get(key)
        if found is None:
            if len(self._rankings) >= RANKINGS_KEPT:
                self._rankings.clear()
            columns = self._columns.get(shapes, lambda them: [(s.cpu, s.memory, s.price) for s in them])
            worth = [-(cpu_price * (c if c < cpu else cpu) + memory_price * (m if m < memory else memory)) / p for c, m, p in columns]

            def rank(i: int) -> tuple[float, float, str]:
                return (worth[i], shapes[i].price, shapes[i].name)

            found = sorted(range(len(shapes)), key=rank) if first is None or first >= len(shapes) else heapq.nsmallest(first, range(len(shapes)), key=rank)
            self._rankings[key] = found
        return found

    def undominated(self, pool: list[Candidate], alloc: Allocatables) -> list[Candidate]:
        """Of a ``pool`` that ``get`` gave (with its allocatables), the types that no type as
        cheap has at least as much of every resource as: the others never make a cheaper fleet."""
        return self._undominated.get(pool, lambda types: _undominated(types, alloc))

    def get(self, candidates: Sequence[Candidate], vectors: Vectors) -> tuple[list[Candidate], list[Shape], dict[str, tuple[int, ...]]]:
        key = (tuple(map(id, candidates)), tuple(vectors.names))
        found = self._tables.get(key)
        if found is None:
            if len(self._tables) >= TABLES_KEPT:
                self._tables.clear()
                self._rankings.clear()
                self._columns.clear()
                self._undominated.clear()
            pool = cheapest_per_type(candidates)
            shapes = [shape_of(c) for c in pool]
            found = self._tables[key] = (candidates, pool, shapes, {c.itype.name: vectors.of(c.allocatable) for c in pool})
        return found[1], found[2], found[3]


def _undominated(pool: list[Candidate], alloc: Allocatables) -> list[Candidate]:
    kept: list[Candidate] = []
    for c in sorted(pool, key=lambda c: (c.price, [-a for a in alloc[c.itype.name]], c.itype.name)):
        mine = alloc[c.itype.name]
        if not any(all(o >= m for o, m in zip(alloc[k.itype.name], mine, strict=True)) for k in kept):
            kept.append(c)
    return kept


def pack_similar(
    requests: Sequence[Resources], counts: Sequence[int], candidates: Sequence[Candidate], budget: Budget, tables: TypeTables | None = None
) -> tuple[list[list[int]], list[Fill]]:
    """Fills for many distinct requests, planned for groups of similar ones (``similar``):
    the groups (indices of ``requests``) and their fills, of the grouping whose plan leaves
    the fewest pods over (the pool's limits may leave some), then costs least. How many
    groups plan best varies with the requests, so each of ``GROUPINGS`` is tried."""
    best: tuple[tuple[int, float], list[list[int]], list[Fill]] | None = None
    for limit, (groups, typical) in zip(GROUPINGS, similar_groupings(requests, counts, GROUPINGS), strict=True):
        fills, left, _ = pack(typical, [sum(counts[i] for i in g) for g in groups], candidates, dataclasses.replace(budget), tables=tables)
        rank = (sum(left), _cost(fills))
        if best is None or rank < best[0]:
            best = (rank, groups, fills)
        if len(groups) < limit:
            break  # a finer grouping would be the same one
    assert best is not None
    return best[1], best[2]


def pack(
    requests: Sequence[Resources],
    counts: Sequence[int],
    candidates: Sequence[Candidate],
    budget: Budget,
    *,
    per_node: int | None = None,
    tables: TypeTables | None = None,
) -> tuple[list[Fill], list[int], dict[int, str]]:
    """Fills for ``counts[i]`` pods of ``requests[i]`` (largest first), at most ``per_node``
    pods on a node (1 for a cell pool; None: as many as fit), the pods left over per class,
    and for classes left over why (``"limit:cpu"`` or ``"fit"``); what the fills take is
    spent from ``budget``. ``tables``: derived figures and earlier packings kept across
    calls (a scaler's own): a pure function of its arguments, a packing asked for again is
    answered from them."""
    if tables is None:
        return _pack_within(requests, counts, candidates, budget, per_node=per_node, tables=TypeTables())
    key = (tuple(requests), tuple(counts), id(candidates), budget.left(), per_node)  # the entry holds the candidates
    found = tables.packs.get(key)
    if found is None or found[0] is not candidates:
        if len(tables.packs) >= PACKS_KEPT:
            tables.packs.clear()
        packed = _pack_within(requests, counts, candidates, budget, per_node=per_node, tables=tables)
        found = tables.packs[key] = (candidates, packed, budget.left())
    else:
        budget.nodes, budget.cpu, budget.memory = found[2]
    fills, remaining, why = found[1]
    return list(fills), list(remaining), dict(why)


def _pack_within(
    requests: Sequence[Resources], counts: Sequence[int], candidates: Sequence[Candidate], budget: Budget, *, per_node: int | None, tables: TypeTables
) -> tuple[list[Fill], list[int], dict[int, str]]:
    """The packer's rounds; for a few pods, also each fleet of one type (``_uniform_fleets``);
    and if the pool's limits leave pods over, also the packing that makes the most of what
    the limits leave (each node the one holding the most for the share of the limits it
    takes). Whichever places more pods, then costs less. (The cheapest fleet is often of
    small nodes; under a limit of nodes or CPU, larger ones place more, and a pod the
    limits leave over waits until others finish.)"""
    cheapest = dataclasses.replace(budget)
    found = _pack(requests, counts, candidates, cheapest, per_node=per_node, tables=tables)
    left = cheapest
    if sum(counts) <= UNIFORM_MAX_PODS:
        below = math.inf if any(found[1]) else _cost(found[0])  # (a fleet that places more may cost more)
        vectors = Vectors(requests)
        pool, _, alloc = tables.get(candidates, vectors)
        for plan, spent in _uniform_fleets(tables.undominated(pool, alloc), alloc, vectors, counts, budget, per_node=per_node, below=below):
            if (sum(plan[1]), _cost(plan[0])) < (sum(found[1]), _cost(found[0]) * (1 - 1e-9)):
                found, left = plan, spent
    if any(why.startswith("limit:") for why in found[2].values()):
        dense = dataclasses.replace(budget)
        denser = _pack(requests, counts, candidates, dense, per_node=per_node, tables=tables, dense=True)
        if (sum(found[1]), _cost(found[0])) > (sum(denser[1]), _cost(denser[0])):
            found, left = denser, dense
    budget.nodes, budget.cpu, budget.memory = left.nodes, left.cpu, left.memory
    return found


def _cost(fills: Sequence[Fill]) -> float:
    return sum(f.candidate.price * f.copies for f in fills)


def _uniform_fleets(
    types: Sequence[Candidate], alloc: Allocatables, vectors: Vectors, counts: Sequence[int], budget: Budget, *, per_node: int | None, below: float
) -> Iterator[tuple[tuple[list[Fill], list[int], dict[int, str]], Budget]]:
    """For a few pods, each of ``types``' fleet of its own nodes only, filled one after
    another (largest pods first) within the budget, for every type that holds them all. The
    packer's rounds take the type worth the most per dollar for the pods left and then
    size the rest round by round; for a few pods that can cost more than one type alone
    (ten pods of 8 CPU and 30 GiB: an m6i.16xlarge with seven and three m6i.4xlarge,
    $5.38/h, where two m6i.12xlarge hold all ten for $4.61/h), so each fleet of one type
    is an alternative. Types whose fleet could not cost less than ``below`` (as many nodes
    as the pods' total of some resource needs, or their count over ``per_node``) are skipped."""
    order = sorted(range(len(counts)), key=lambda i: [-vectors.requests[i][j] for j in vectors.cpu_memory])
    total = vectors.total(counts)
    least = -(-sum(counts) // per_node) if per_node else 1
    for c in types:
        room = alloc[c.itype.name]
        nodes = max([least] + [-(-t // a) if a else math.inf for t, a in zip(total, room, strict=True) if t])
        if nodes * c.price >= below:
            continue
        if not all(_holds_one(room, vectors.requests[i], per_node) for i, k in enumerate(counts) if k):
            continue
        spent, remaining, fills = dataclasses.replace(budget), list(counts), []
        while any(remaining):
            if not _take(c, greedy_fill(room, vectors.requests, remaining, per_node, order), remaining, spent, fills):
                break
        why = {i: f"limit:{spent.blocking(c.itype)}" for i, k in enumerate(remaining) if k}
        yield (fills, remaining, why), spent


def _pack(
    requests: Sequence[Resources],
    counts: Sequence[int],
    candidates: Sequence[Candidate],
    budget: Budget,
    *,
    per_node: int | None,
    tables: TypeTables,
    dense: bool = False,
) -> tuple[list[Fill], list[int], dict[int, str]]:
    vectors = Vectors(requests)
    remaining = list(counts)
    pool, shapes, alloc = tables.get(candidates, vectors)
    aligned = AlignedFills(vectors.requests, vectors.cpu_memory)
    fills: list[Fill] = []
    why: dict[int, str] = {}
    excluded: set[str] = set()
    solver = _solver(tuple(shapes))
    usable = pool
    holders: dict[tuple[int, int], Candidate | None] = {}  # (class, types excluded so far) -> the cheapest type that holds one
    limited: InstanceType | None = None  # the last type the limits ruled out
    set_aside = [0] * len(counts)  # pods of classes no type left holds: out of the rounds, still left over
    while any(remaining):
        if len(usable) + len(excluded) != len(pool):  # a type was excluded: the LP without it
            usable_at = [i for i, c in enumerate(pool) if c.itype.name not in excluded]
            usable = [pool[i] for i in usable_at]
            solver = _solver(tuple(shapes[i] for i in usable_at))
        if not usable:
            break
        demand = zip(requests, remaining, strict=True)
        want_cpu, want_memory = map(sum, zip(*((r.cpu * k, r.memory * k) for r, k in demand), strict=True))
        duals = solver.solve(want_cpu, want_memory)
        value = [duals.value(r.cpu, r.memory) for r in requests]
        first = next(i for i, k in enumerate(remaining) if k)
        # The types whose allocatable, as much of it as the pods left can use, is worth the
        # most per dollar at the dual prices (a node larger than what is left is worth no
        # more than what is left: ranked by its whole allocatable, the largest types came
        # first for a few pods and, filled with only those, lost to the smallest that holds one).
        ranked = tables.ranking(shapes, duals.cpu, duals.memory, want_cpu, want_memory, first=None if dense else CANDIDATES_PER_ROUND + len(excluded))
        best_at = list(itertools.islice((i for i in ranked if pool[i].itype.name not in excluded), None if dense else CANDIDATES_PER_ROUND))
        trial = [pool[i] for i in best_at]
        # Always try the cheapest type that can hold the first (largest) remaining pod.
        if (first, len(excluded)) not in holders:
            holders[first, len(excluded)] = next((c for c in usable if _holds_one(alloc[c.itype.name], vectors.requests[first], per_node)), None)
        holder = holders[first, len(excluded)]
        if holder is not None and holder not in trial:
            trial.append(holder)
        if dense:
            # Fill orders: most valuable first (the resource the LP says is scarce), largest
            # cpu first, largest memory first. Each candidate keeps its best fill.
            classes = range(len(requests))
            by_value = tuple(sorted(classes, key=lambda i: -value[i]))
            orders = sorted({by_value, tuple(classes), tuple(sorted(classes, key=lambda i: (-requests[i].memory, -requests[i].cpu)))})
            total = sum(map(operator.mul, value, remaining))  # what is left, at the dual prices
            left = vectors.total(remaining)
        best: tuple[float, float, float, str, Candidate, tuple[int, ...]] | None = None
        for c in trial:
            share = budget.share(c.itype) if dense else 0.0
            if share > 1:  # (dense) not one node of it fits the limits left
                excluded.add(c.itype.name)
                limited = c.itype
                continue
            if not dense and best is not None and _cannot_win(duals, c, -best[0]):
                continue
            if dense:
                options = [greedy_fill(alloc[c.itype.name], vectors.requests, remaining, per_node, order) for order in orders]
                if per_node is None:
                    options.append(proportional_fill(alloc[c.itype.name], vectors.requests, remaining, by_value, left))
            else:  # (filled to run out of CPU and memory together; see ``aligned``)
                options = [aligned.fill(alloc[c.itype.name], remaining, per_node)]
            for fill in options:
                if not any(fill):
                    continue
                worth = sum(map(operator.mul, value, fill))
                if worth <= 0:  # no cpu or memory requested: cheapest node that holds the most pods
                    worth = sum(fill) * 1e-9
                # Value per dollar decides; among near-equals, the fill that leaves less of
                # either resource idle (what the LP cannot see) wins.
                used = _utilisation(alloc[c.itype.name], vectors, fill)
                if dense:  # nodes that keep pace with the limits (at their density all that is left fits), by value per dollar; else the densest
                    density = worth / max(share, 1e-12)
                    pace = density >= total * (1 - 1e-9)
                    key = (not pace, -round(worth / c.price if pace else density, 6), c.price, c.itype.name)
                else:
                    key = (-round(worth / c.price, 3), -round(used, 2), -c.price, c.itype.name)
                if best is None or key < best[:4]:
                    best = (*key, c, fill)
        if best is None:  # no type left holds the first class: set aside (if a type the limits ruled out would, they leave it over)
            held = limited is not None and any(_holds_one(alloc[c.itype.name], vectors.requests[first], per_node) for c in pool)
            why[first] = f"limit:{budget.blocking(limited)}" if held and limited is not None else "fit"
            set_aside[first], remaining[first] = remaining[first], 0
            continue
        candidate, fill = best[4], best[5]
        if not _take(candidate, fill, remaining, budget, fills):
            excluded.add(candidate.itype.name)
            limited = candidate.itype
            continue
        if not dense:
            # More nodes of the winner while its next fill is worth nearly as much per dollar
            # at this round's prices: a round weighs every candidate type for one node, and
            # the winner mostly wins the next rounds too.
            room, least = alloc[candidate.itype.name], -best[0] * STREAK_SHARE
            while any(remaining):
                fill = aligned.fill(room, remaining, per_node)
                if not any(fill) or round(sum(map(operator.mul, value, fill)) / candidate.price, 3) < least:
                    break
                if not _take(candidate, fill, remaining, budget, fills):
                    break
    for i, k in enumerate(remaining):  # left when no type was left at all
        if k and i not in why:
            why[i] = f"limit:{budget.blocking(limited)}" if limited is not None else "fit"
    return fills, [k + aside for k, aside in zip(remaining, set_aside, strict=True)], why


def _take(candidate: Candidate, fill: tuple[int, ...], remaining: list[int], budget: Budget, fills: list[Fill]) -> bool:
    """Nodes of ``candidate`` each holding ``fill``, as many as the pods left and the budget
    allow, added to ``fills`` (their pods off ``remaining``); whether there was one."""
    copies = min(remaining[i] // k for i, k in enumerate(fill) if k)
    allowed = budget.copies(candidate.itype)
    if allowed is not None and allowed < copies:
        copies = allowed
    if copies <= 0:
        return False
    budget.spend(candidate.itype, copies)
    fills.append(Fill(candidate, fill, copies))
    for i, k in enumerate(fill):
        remaining[i] -= k * copies
    return True


def _cannot_win(duals: Duals, candidate: Candidate, best: float) -> bool:
    """No fill is worth more than the whole node at the dual prices (they are not negative):
    a type whose node is worth less per dollar than the ``best`` fill so far (rounded as the
    fills are compared) cannot win, and its fills need not be made."""
    return round(duals.value(candidate.allocatable.cpu, candidate.allocatable.memory) / candidate.price, 3) < best


def _utilisation(allocatable: tuple[int, ...], vectors: Vectors, fill: Sequence[int]) -> float:
    """The fractions of the node's CPU and memory the fill uses, summed."""
    total = 0.0
    for j in vectors.cpu_memory:
        if allocatable[j]:
            total += sum(r[j] * k for r, k in zip(vectors.requests, fill, strict=True) if k) / allocatable[j]
    return total


def right_size(total: Resources, pods: int, candidates: Sequence[Candidate], below: float, accepts: Callable[[Candidate], bool]) -> Candidate | None:
    """The cheapest of ``candidates`` (cheapest first) priced under ``below`` that holds
    ``pods`` pods needing ``total`` in all and that ``accepts`` allows."""
    need = total + Resources({"pods": pods})
    cpu, memory = need.cpu, need.memory
    for c in candidates:
        if c.offering.price >= below:
            return None
        room = c.allocatable
        if room.cpu >= cpu and room.memory >= memory and need.fits(room) and accepts(c):
            return c
    return None
