"""Whether a consolidation is worth its evictions.

**Payback** (nodemanager's rule, on by default): a move goes ahead when the fleet costs less
with it than without it, until the pods it moves would have ended (at most the horizon).
Without it, each node it removes runs until the last of its pods ends. With it, each node
the pods go to runs until the last of them ends there, counted from now and including the
work a pod that runs to completion (a Job's) does again; an existing node is charged only
for the time past when its own pods would have let it go (none if one of them runs for
good); and every moved pod costs its share of its node's price for its start-up (room
that other pods could have used) and twice that for the work it does again: the room it
takes again, and the delay to its Job, valued at the same price. How long
a pod that runs to completion still has is estimated from the pods that ran to completion
before it (``controller/run_lengths.py``); a pod that runs for good (a Deployment's) counts
the horizon. So a young pod moves into the room of a node that stays anyway, and a Job's
pod that has run long is not restarted on a node it would then hold alone. A move that pays
now but would cost less once pods it would restart have ended (their work done again spared,
for the nodes' price and the other pods' work meanwhile) waits for them.

**Balanced** (Karpenter's ``consolidationPolicy: Balanced``, v1.14): a move goes ahead
when its share of the pool's cost saved is at least ``1/k`` of its share of the pool's
disruption. A node's disruption is 1 plus each of its pods' eviction cost (1, more for a
pod of higher priority, never below 0 nor above 10).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from nodemanager.model import Pod

PRIORITY_SCALE = 2.0**25  # Karpenter's EvictionCost: priority / 2^25 added to 1
REDONE_WEIGHT = 2.0  # work done again costs its room twice: the room it takes again, and its Job's delay valued at that room's price


@dataclass(frozen=True, slots=True)
class Evicted:
    """What disruption knows of a pod a move would evict."""

    ran: float  # seconds it has run on its node
    left: float | None  # seconds it is expected to run still; None: for good (it does not run to completion)
    share: float  # $/h: its share of its node's price (the larger of its CPU and memory shares)
    to: str  # the node it would go to (a new node by its name)


@dataclass(frozen=True, slots=True)
class Destination:
    """A node moved pods would go to."""

    price: float  # $/h
    until: float  # seconds its own pods keep it anyway (inf: for good; 0: a new node)


@dataclass(frozen=True, slots=True)
class Payback:
    horizon: float  # seconds: the most any time is counted for
    startup: float  # seconds each evicted pod takes to run again

    def _end(self, e: Evicted, again: bool) -> float:
        """When ``e`` would end, from now: where it is, or started ``again``."""
        if e.left is None:
            return self.horizon
        return min(e.left + (e.ran if again else 0.0), self.horizon)

    def _again(self, e: Evicted) -> float:
        """What ``e``'s restart costs, in $·s/h: the room its start-up and its redone work take."""
        return e.share * (self.startup + (REDONE_WEIGHT * e.ran if e.left is not None else 0.0))

    def weigh(self, removed: Sequence[tuple[float, Sequence[Evicted]]], destinations: Mapping[str, Destination]) -> tuple[float, float]:
        """What the nodes ``removed`` (price, their pods) and the ``destinations`` cost until
        the moved pods end, in dollars: without the move, and with it."""
        without = sum(price * max((self._end(e, False) for e in pods), default=0.0) for price, pods in removed)
        moved = [e for _, pods in removed for e in pods]
        ends: dict[str, float] = {}
        for e in moved:
            ends[e.to] = max(ends.get(e.to, 0.0), self._end(e, True))
        held = sum(d.price * max(0.0, ends[name] - min(d.until, self.horizon)) for name, d in destinations.items() if name in ends)
        again = sum(map(self._again, moved))
        return without / 3600.0, (held + again) / 3600.0

    def verdict(self, removed: Sequence[tuple[float, Sequence[Evicted]]], destinations: Mapping[str, Destination]) -> str:
        """Why the move does not pay, or not yet ("" when it does now)."""
        without, with_move = self.weigh(removed, destinations)
        if with_move > without:
            return (
                f"the fleet would cost ${with_move:.4f} with the move against ${without:.4f} without it until its pods end "
                "(work done again, start-up, nodes kept for the moved pods)"
            )
        wait, later = self._later(removed, destinations, with_move)
        if later < with_move:
            return (
                f"it pays more in {f'{wait:.0f} s' if wait < 60 else f'{wait / 60:.0f} min'}, once pods it would restart have ended: "
                f"${later:.4f} then (the nodes kept meanwhile included) against ${with_move:.4f} now"
            )
        return ""

    def _later(self, removed: Sequence[tuple[float, Sequence[Evicted]]], destinations: Mapping[str, Destination], now: float) -> tuple[float, float]:
        """Of the times within the horizon when pods the move would restart end, the wait
        (seconds) after which the same move costs least, and that cost in dollars with the
        removed nodes kept meanwhile (inf: no such pod, or none cheaper than ``now``, the
        move's cost now). Waiting spares the work those pods would do again, for the nodes'
        price and the other pods' work of the wait.

        What the move costs after a wait is ``weigh``'s with each pod still there having run
        the wait longer and having that much less left; a pod restarted then ends where it
        would have if restarted now (its left and ran shift together). So, with the pods in the
        order they end, each wait's cost comes from sums over those still there and, for each
        destination, the latest end among them: the waits take O(n log n), not n weighs."""
        rate = sum(price for price, _ in removed) / 3600.0
        order = sorted((e for _, pods in removed for e in pods), key=lambda e: math.inf if e.left is None else e.left)
        lefts = [math.inf if e.left is None else e.left for e in order]
        waits = sorted({left for left in lefts if 0 < left < self.horizon})
        # Over the pods from i on (those that have not ended after a wait shorter than lefts[i]):
        # their start-up and redone work's room (before the wait), and the room of the completing ones.
        fixed, growing = [0.0] * (len(order) + 1), [0.0] * (len(order) + 1)
        for i in range(len(order) - 1, -1, -1):
            e = order[i]
            fixed[i] = fixed[i + 1] + self._again(e)
            growing[i] = growing[i + 1] + (e.share * REDONE_WEIGHT if e.left is not None else 0.0)
        # For each destination: its pods' places in the order, and the latest end from each on.
        places: dict[str, list[int]] = {}
        for i, e in enumerate(order):
            places.setdefault(e.to, []).append(i)
        latest: dict[str, list[float]] = {}
        for name, at in places.items():
            suffix = [0.0] * len(at)
            for j in range(len(at) - 1, -1, -1):
                end = self._end(order[at[j]], True)
                suffix[j] = max(end, suffix[j + 1]) if j + 1 < len(at) else end
            latest[name] = suffix
        best = (0.0, math.inf)
        for wait in waits:
            if rate * wait >= min(best[1], now):
                break  # the nodes kept alone cost more: no longer wait can be the cheaper (a move's cost is never below zero)
            first = bisect.bisect_right(lefts, wait)  # the pods still there
            held = 0.0
            for name, d in destinations.items():
                at = places.get(name)
                j = bisect.bisect_left(at, first) if at else 0
                if at and j < len(at):
                    held += d.price * max(0.0, latest[name][j] - min(max(d.until - wait, 0.0), self.horizon))
            cost = rate * wait + (held + fixed[first] + growing[first] * wait) / 3600.0
            if cost < best[1]:
                best = (wait, cost)
        return best


def share_of(pod: Pod, cpu: int, memory: int, price: float) -> float:
    """``pod``'s share of a node of this allocatable and price, per hour."""
    fraction = max(pod.requests.cpu / cpu if cpu > 0 else 0.0, pod.requests.memory / memory if memory > 0 else 0.0)
    return price * min(fraction, 1.0)


def eviction_cost(pod: Pod) -> float:
    """Karpenter's eviction cost of a pod as its scoring counts it: 1 + priority / 2^25,
    within 0 and 10."""
    return min(max(1.0 + pod.priority / PRIORITY_SCALE, 0.0), 10.0)


def node_disruption(pods: Iterable[Pod]) -> float:
    """A node's disruption: 1 for the node, plus its pods' eviction costs."""
    return 1.0 + sum(eviction_cost(p) for p in pods)


def balanced_verdict(savings: float, disruption: float, pool_cost: float, pool_disruption: float, threshold: int) -> str:
    """Why a move fails Karpenter's Balanced score ("" when it passes)."""
    if savings <= 0 or pool_cost <= 0:
        return "saves nothing"
    score = (savings / pool_cost) / (disruption / pool_disruption)
    if score * threshold >= 1.0:
        return ""
    saved, disrupted = savings / pool_cost, disruption / pool_disruption
    return f"Balanced score {score:.2f} below 1/{threshold}: saves {saved:.1%} of the pool's cost for {disrupted:.1%} of its disruption"
