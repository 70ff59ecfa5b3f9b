"""An achievable yardstick beside the lower bound: what a fleet that knew every arrival and
duration in advance, booted instantly and kept no idle node would pay.

The bound (``cost_bound.py``) may be out of any fleet's reach; this is a real fleet's cost:
every pod runs on one node from its arrival to its end, on an offering it may use, and no
node ever holds more than its allocatable (nor more than the one pod a ``packing: cell``
pool's node holds). So "cost ÷ clairvoyant" is what being online
costs (not knowing what comes, boot times, idle grace, consolidation), and "clairvoyant ÷
bound" is how loose the bound is. It leaves out what the bound leaves out (inter-pod
constraints, ports, volumes), so on workloads with those it is a little optimistic.

The packing (dynamic bin packing with known durations, in the spirit of Ren et al.'s
duration-aware First Fit, SPAA 2016): pods in order of arrival (the larger first among
simultaneous ones), each on the open node where it costs least: a node whose pods already
keep it past the pod's end costs nothing more (of those, the one ending soonest after the
pod); a node it would keep longer costs its price for that time (of the nodes ending last
before the pod; at most ``SCAN`` nodes are looked at on either side). A new
node is opened when that is cheaper: of the offerings the pod may use, the one that would
cost least per unit of work for the pod and the pods of like duration arriving soon after
it that it would hold (each pod's work valued at the best price per share any offering it
may use gives it). How soon is "soon" is tried three ways (at once, a minute, five
minutes: the first suits bursts, the last pods that trickle in), and the cheapest fleet of
the three is the yardstick. A node's cost runs from its first pod's arrival to its last pod's end,
a minute at least.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from nodemanager.model import Pod, Resources
from nodemanager.model.resources import GPU_RESOURCES
from nodemanager.scaler.binpack import cheapest_per_type
from nodemanager.scaler.pools import Candidate, PoolView
from nodemanager.scaler.usable import UsableOfferings

MINIMUM_BILLED = 60.0  # seconds: EC2 bills a minute at least for each start
LOOKAHEADS = (0.0, 60.0, 300.0)  # seconds: pods arriving this soon after one that opens a node may share it (each tried)
LOOKAHEAD_PODS = 32  # at most this many of them are weighed
LIKE_DURATION = 1.5  # "of like duration": within this factor of the opener's
SCAN = 64  # open nodes looked at for each pod, on either side of its end (bounded time for any fleet)


@dataclass(frozen=True, slots=True)
class Run:
    """A pod to place: it runs from ``start`` to ``end`` (seconds). ``key`` is its own key
    when ``pod`` is another alike but for its name (copies share one: millions of runs)."""

    pod: Pod
    start: float
    end: float
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.pod.key)


@dataclass
class PlannedNode:
    pool: str
    offering: Candidate
    start: float
    end: float = 0.0
    pods: list[str] = field(default_factory=list)  # the keys of the pods it holds, over its life
    used: Resources = field(default_factory=Resources)  # what its pods running now request
    count: int = 0  # how many run now
    running: list[tuple[float, int, Resources]] = field(default_factory=list)  # heap: (end, seq, requests)

    @property
    def price(self) -> float:
        return self.offering.price

    def cost(self) -> float:
        return self.price * max(self.end - self.start, MINIMUM_BILLED) / 3600.0

    def release(self, now: float) -> None:
        """Its pods that ended by ``now`` leave."""
        while self.running and self.running[0][0] <= now:
            _, _, requests = heapq.heappop(self.running)
            self.used, self.count = self.used - requests, self.count - 1

    def fits_at(self, run: Run) -> bool:
        """Whether ``run`` fits beside the pods still running at its start."""
        self.release(run.start)
        slots = self.offering.allocatable.pods
        return run.pod.requests.fits_within(self.offering.allocatable, self.used) and not 0 < slots <= self.count

    def take(self, run: Run, seq: int) -> None:
        self.pods.append(run.key)
        self.used, self.count = self.used + run.pod.requests, self.count + 1
        heapq.heappush(self.running, (run.end, seq, run.pod.requests))
        self.end = max(self.end, run.end)


@dataclass
class Plan:
    nodes: list[PlannedNode]
    unplaced: list[str]  # pods no offering they may use holds

    def usd(self) -> float:
        return math.fsum(n.cost() for n in self.nodes)


def _share(requests: Resources, alloc: Resources) -> float:
    """The largest share of ``alloc`` the requests take (of CPU, memory and GPUs)."""
    names = ("cpu", "memory", *(n for n in GPU_RESOURCES if requests.get(n)))
    return max((requests.get(n) / alloc.get(n) for n in names if alloc.get(n) > 0), default=0.0)


class _OpenNodes:
    """The nodes still running, in order of when their pods would let them go."""

    def __init__(self) -> None:
        self.ends: list[float] = []
        self.nodes: list[PlannedNode] = []
        self.closed: list[PlannedNode] = []

    def add(self, node: PlannedNode) -> None:
        at = bisect.bisect_right(self.ends, node.end)
        self.ends.insert(at, node.end)
        self.nodes.insert(at, node)

    def remove(self, node: PlannedNode) -> None:
        at = bisect.bisect_left(self.ends, node.end)
        while self.nodes[at] is not node:
            at += 1
        del self.ends[at], self.nodes[at]

    def close(self, now: float) -> None:
        """The nodes whose pods have all ended by ``now`` are done."""
        done = bisect.bisect_right(self.ends, now)
        if done:
            self.closed += self.nodes[:done]
            del self.ends[:done], self.nodes[:done]

    def best(self, run: Run, allowed: set[tuple[str, int]]) -> tuple[PlannedNode | None, float]:
        """The node where ``run`` costs least, and what it costs there more ($): of those its
        pods keep past its end, the one ending soonest (nothing more); else, of the ``SCAN``
        ending last before it, the one where the time it would be kept longer costs least."""
        at = bisect.bisect_left(self.ends, run.end)
        for node in self.nodes[at : at + SCAN]:
            if (node.pool, id(node.offering)) in allowed and node.fits_at(run):
                return node, 0.0
        chosen, least = None, math.inf
        for node in reversed(self.nodes[max(0, at - SCAN) : at]):
            extra = node.price * (run.end - node.end) / 3600.0
            if extra < least and (node.pool, id(node.offering)) in allowed and node.fits_at(run):
                chosen, least = node, extra
        return chosen, least


def _undominated(offers: list[tuple[str, Candidate]]) -> list[tuple[str, Candidate]]:
    """Those no other offering beats: as cheap or cheaper with at least as much of everything
    (pod slots aside), and so never the better node to open."""
    ranked = sorted(offers, key=lambda o: o[1].price)
    kept: list[tuple[str, Candidate]] = []
    for pool, cand in ranked:
        alloc = cand.allocatable
        if not any(alloc.fits(other.allocatable.replaced({"pods": alloc.pods})) for _, other in kept):
            kept.append((pool, cand))
    return kept


class ClairvoyantPacker:
    def __init__(self, views: Sequence[PoolView]) -> None:
        self._usable = UsableOfferings(views)
        self._cells = {v.name for v in views if v.cell}  # pools whose nodes hold one pod, for its run only
        self._allowed: dict[tuple[int, Resources], tuple[list[tuple[str, Candidate]], set[tuple[str, int]]]] = {}
        self._values: list[float] = []  # $/h: each pod's work at the best price per share any offering it may use gives it

    def _options(self, pod: Pod) -> tuple[list[tuple[str, Candidate]], set[tuple[str, int]]]:
        """The (pool, offering)s the pod may use that hold it (one per pool and type, the
        cheapest), and every (pool, offering) it may use, by identity."""
        found = self._usable.of(pod)
        key = (id(found), pod.requests)
        if key not in self._allowed:
            by_pool: dict[str, list[Candidate]] = {}
            for pool, cand in found:
                if pod.requests.fits(cand.allocatable):
                    by_pool.setdefault(pool, []).append(cand)
            holding = _undominated([(pool, c) for pool, cands in by_pool.items() for c in cheapest_per_type(cands)])
            self._allowed[key] = (holding, {(pool, id(c)) for pool, c in found})
        return self._allowed[key]

    def plan(self, runs: Sequence[Run]) -> Plan:
        """The cheapest of the packings with each lookahead."""
        order = sorted(runs, key=lambda r: (r.start, -r.pod.requests.cpu, -r.pod.requests.memory, r.key))
        options = [self._options(r.pod) for r in order]
        values: dict[tuple[int, Resources], float] = {}
        for run, (holding, _) in zip(order, options, strict=True):
            if holding and (key := (id(holding), run.pod.requests)) not in values:
                values[key] = min(c.price * _share(run.pod.requests, c.allocatable) for _, c in holding)
        self._values = [values.get((id(holding), run.pod.requests), 0.0) for run, (holding, _) in zip(order, options, strict=True)]
        return min((self._pack(order, options, lookahead) for lookahead in LOOKAHEADS), key=Plan.usd)

    def _pack(self, order: Sequence[Run], options: Sequence[tuple[list, set]], lookahead: float) -> Plan:
        fleet = _OpenNodes()
        unplaced: list[str] = []
        for i, run in enumerate(order):
            holding, allowed = options[i]
            if not holding:
                unplaced.append(run.key)
                continue
            fleet.close(run.start)
            alone = min(c.price for _, c in holding) * (run.end - run.start) / 3600.0
            chosen, extra = fleet.best(run, allowed)
            if chosen is None or extra > alone:
                chosen = self._open(i, order, options, holding, lookahead)
            else:
                fleet.remove(chosen)
            chosen.take(run, i)
            if chosen.pool in self._cells:
                fleet.closed.append(chosen)  # (its one pod's: never shared)
            else:
                fleet.add(chosen)
        return Plan(fleet.closed + fleet.nodes, unplaced)

    def _open(self, i: int, order: Sequence[Run], options: Sequence[tuple[list, set]], holding: list[tuple[str, Candidate]], lookahead: float) -> PlannedNode:
        """A new node for ``order[i]``: the offering that would run it and its like arriving
        soon after at the least cost per unit of their work."""
        run = order[i]
        duration = max(run.end - run.start, 1.0)
        soon = []
        for j in range(i + 1, len(order)):
            other = order[j]
            if other.start > run.start + lookahead or len(soon) >= LOOKAHEAD_PODS:
                break
            if options[j][0] and 1 / LIKE_DURATION <= max(other.end - other.start, 1.0) / duration <= LIKE_DURATION:
                soon.append((other, options[j][1], self._values[j]))
        if not soon:  # (each offering would run the pod alone: the cheapest)
            pool, cand = min(holding, key=lambda h: h[1].price)
            return PlannedNode(pool, cand, run.start)
        best: tuple[float, float, str, Candidate] | None = None
        for pool, cand in holding:
            used, count, end, work = run.pod.requests, 1, run.end, self._values[i] * duration
            slots = cand.allocatable.pods
            for other, allowed, other_value in soon if pool not in self._cells else ():
                if (pool, id(cand)) in allowed and other.pod.requests.fits_within(cand.allocatable, used) and not 0 < slots <= count:
                    used, count, end = used + other.pod.requests, count + 1, max(end, other.end)
                    work += other_value * (other.end - other.start)
            per_work = cand.price * max(end - run.start, MINIMUM_BILLED) / work if work > 0 else math.inf
            if best is None or (per_work, cand.price) < best[:2]:
                best = (per_work, cand.price, pool, cand)
        assert best is not None  # (holding is not empty)
        return PlannedNode(best[2], best[3], run.start)
