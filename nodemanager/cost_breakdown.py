"""Where a simulated fleet's dollars go: parts of its cost that add up to it.

Each second EC2 bills for an instance is one of:

* **booting and stopping**: its node not registered (the instance running, its kubelet not
  yet joined, or its node gone while EC2 still bills), and EC2's minimum minute;
* **empty nodes**: its node registered with no workload pod on it (DaemonSet pods only):
  idle grace, disruption budgets, standby;
* **holding pods**: at the price of the cheapest offering that every pod on the node may use
  and that would hold them all together (their *holder*), plus the node's **premium** over it
  (a dearer type, on-demand where spot would do).

The holders' dollars over the run split in turn into:

* the **lower bound**: what no fleet could undercut for the pods' work, each pod's counted once;
* **work done again**: the bound's price of the seconds pods ran beyond what the bound counts
  (evicted pods starting their work again; below zero when ``--until`` cuts short pods that
  started late, as the bound counts their work from their arrival);
* **unused room**: the rest, the holders' room the pods' requests left unused, priced as the
  bound prices it (never below zero: at every instant the holders are a fleet that holds the
  pods, which no fleet does for less than the bound).

An instance EC2 does not bill (a spot instance it reclaimed in its first hour) counts in those
parts as if billed, and its price comes off again as **refunded**.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

HOURLY = 3600.0

# A registered node's state over a span of time: None, empty; a price, holding pods whose
# cheapest holder costs that per hour (``math.inf`` where no offering is known to hold them:
# they are priced at the node's own offering).
Holding = float | None


@dataclass(frozen=True)
class Span:
    start: float
    end: float
    holder: Holding


@dataclass(frozen=True)
class Billed:
    """One instance as EC2 bills it: its price, when it ran, the seconds billed (0: free)."""

    name: str  # its node's name
    hourly: float
    running: float
    until: float
    seconds: float


class OccupancyMeter:
    """Each node's registered time, as spans in one state (empty, or holding pods)."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[float, Holding]] = {}  # node -> (since, state)
        self._spans: dict[str, list[Span]] = {}

    def nodes(self) -> set[str]:
        """The nodes registered now."""
        return set(self._open)

    def set(self, node: str, now: float, registered: bool, holding: Holding) -> None:
        """``node``'s state from ``now`` (``holding`` is read only when it is registered)."""
        current = self._open.get(node)
        if current is not None and registered and current[1] == holding:
            return
        if current is not None:
            del self._open[node]
            if now > current[0]:
                self._spans.setdefault(node, []).append(Span(current[0], now, current[1]))
        if registered:
            self._open[node] = (now, holding)

    def spans(self, node: str, now: float) -> list[Span]:
        """``node``'s spans until ``now`` (the open one closed at ``now``)."""
        spans = list(self._spans.get(node, ()))
        if (current := self._open.get(node)) is not None and now > current[0]:
            spans.append(Span(current[0], now, current[1]))
        return spans


# What each part is, in the report's words.
LABELS = {
    "lower_bound": "lower bound: what no fleet could run the pods' work for",
    "work_redone": "work done again after evictions",
    "unused_room": "room left unused on nodes holding pods",
    "empty_nodes": "empty nodes (idle grace, disruption budgets, standby)",
    "booting_and_stopping": "booting, registering and stopping (not a node yet, or no longer)",
    "premium": "premium of the offerings bought over the cheapest that would hold their pods",
    "refunded": "refunded: spot instances EC2 reclaimed in their first hour",
}


@dataclass
class Breakdown:
    """The parts of a fleet's cost, in dollars; ``total()`` is the cost."""

    lower_bound: float = 0.0
    work_redone: float = 0.0
    unused_room: float = 0.0
    empty_nodes: float = 0.0
    booting_and_stopping: float = 0.0
    premium: float = 0.0
    refunded: float = 0.0  # (zero or below)

    def total(self) -> float:
        return math.fsum(vars(self).values())

    def rounded(self) -> dict[str, float]:
        """To the hundredth of a cent; the bound as the report gives it (``round_down``)."""
        return {part: round_down(usd) if part == "lower_bound" else round(usd, 4) for part, usd in vars(self).items()}


def round_down(bound: float) -> float:
    """A lower bound to the hundredth of a cent, rounded down: it stays a lower bound. The
    report's bound and its breakdown's are both this, so they never differ."""
    return math.floor(bound * 10**4) / 10**4


def breakdown(instances: Iterable[tuple[Billed, list[Span]]], bound: float, bound_of_runs: float) -> Breakdown:
    """The parts of the cost of ``instances`` (each with its node's spans), given the lower
    bound and the bound of the seconds the pods actually ran."""
    out = Breakdown(lower_bound=bound, work_redone=bound_of_runs - bound)
    holders, empty, idle, premium, refunded = [], [], [], [], []
    for billed, spans in instances:
        charged = billed.seconds if billed.seconds > 0 else billed.until - billed.running  # (free: as if billed)
        registered = 0.0
        for span in spans:
            seconds = min(span.end, billed.until) - max(span.start, billed.running)
            if seconds <= 0:
                continue
            registered += seconds
            if span.holder is None:
                empty.append(seconds * billed.hourly)
            else:
                holder = min(span.holder, billed.hourly)
                holders.append(seconds * holder)
                premium.append(seconds * (billed.hourly - holder))
        idle.append((charged - registered) * billed.hourly)
        if billed.seconds <= 0:
            refunded.append(-charged * billed.hourly)
    out.unused_room = math.fsum(holders) / HOURLY - bound_of_runs
    out.empty_nodes = math.fsum(empty) / HOURLY
    out.booting_and_stopping = math.fsum(idle) / HOURLY
    out.premium = math.fsum(premium) / HOURLY
    out.refunded = math.fsum(refunded) / HOURLY
    return out
