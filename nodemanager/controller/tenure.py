"""Since when each node has held its pods, and each of them: what consolidation reads of
time on a node (``consolidateAfter`` counts from the last change of a node's pods; the
pods that have run least are moved first; a Job's pod loses the time it has run there).

Looked at again each pass only for the nodes whose record or pods changed since the last
(the journals say which). A pod first seen on a node counts from then: after a restart,
from the first pass.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nodemanager.model import Pod, PodKey
from nodemanager.model.journal import Mark, changed_since

_KEY = operator.attrgetter("key")
_ROUNDING = 1e-6  # seconds: where two lines meet is computed a hair early, never late (a pass at that very instant counts)

if TYPE_CHECKING:
    from nodemanager.controller.state import ClusterState


@dataclass(frozen=True, slots=True)
class Held:
    """What disruption knows of the pods a node holds."""

    since: float  # the pods have been these since (consolidateAfter counts from then)
    started: Mapping[PodKey, float]  # each of the pods, and since when it has been on the node
    started_sum: float  # the sum of ``started``, kept: every pass weighs every candidate

    @classmethod
    def of(cls, pods: frozenset[PodKey], now: float, was: Held | None) -> Held:
        """``pods`` held from ``now``; those ``was`` held keep their start."""
        before = was.started if was is not None else {}
        started = {key: before.get(key, now) for key in pods}
        return cls(now, started, sum(started.values()))

    def work(self, now: float) -> float:
        """The seconds its pods have run on it, summed: what they lose if moved (a Job's pod
        starts its work again)."""
        return len(self.started) * now - self.started_sum


def first_overtaking(ranked: Iterable[tuple[Held, float]], now: float) -> float:
    """Nodes (what they hold, their price) ranked by ``work(now) / price``, the least first:
    the first time from ``now`` that one's rank passes the next one's (inf: never, with
    nothing else changing). Each rank is a line in time; an order of lines first changes
    between neighbours. Nodes with no price (ranked last, at infinity) never move."""
    lines = [(len(h.started) / price, -h.started_sum / price) for h, price in ranked if price > 0]
    soonest = math.inf
    for (rise, at), (next_rise, next_at) in itertools.pairwise(lines):
        if rise > next_rise:  # it rises faster than the next: it passes it where the lines meet
            soonest = min(soonest, max(now, (next_at - at) / (rise - next_rise) - _ROUNDING))
    return soonest


@dataclass
class Changes:
    """What one pass found: pods first seen on a node, and pods that left one."""

    arrived: list[Pod] = field(default_factory=list)
    left: list[tuple[PodKey, float, bool]] = field(default_factory=list)  # (pod, seconds it ran there, whether it ended: not moved)


class Tenure:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.pods_since: dict[str, Held] = {}  # node -> its pods, since when
        self._marks: tuple[Mark, ...] | None = None  # where the records' and the cache's held-pods journals stood then

    def track(self, now: float) -> Changes:
        """Bring ``pods_since`` up to ``now``; what changed."""
        c = self.state
        tracked, out = self.pods_since, Changes()
        changed, self._marks = changed_since((c.nodes.changes, c.cache.held_changes), self._marks)
        if changed is None:
            changed = tracked.keys() | c.nodes.keys()
        for name in changed:
            if name not in c.nodes:
                gone = tracked.pop(name, None)
                out.left.extend((key, now - at, False) for key, at in (gone.started.items() if gone is not None else ()))
                continue
            held, seen = c.cache.held(name), tracked.get(name)
            if seen is None or seen.started.keys() != held:
                tracked[name] = Held.of(held, now, seen)
                before = seen.started if seen is not None else {}
                out.arrived.extend(pod for key in held - before.keys() if (pod := c.cache.pod(key)) is not None)
                for key in before.keys() - held:  # ended, or moved (its node drained or lost)
                    pod = c.cache.pod(key)
                    out.left.append((key, now - before[key], name not in c.marked and (pod is None or pod.is_terminal)))
        out.arrived.sort(key=_KEY)  # (in a set's order they would vary from run to run: who is taken for a moved pod with them)
        out.left.sort()
        return out

    def first_past(self, now: float, after: Callable[[str], float | None]) -> float:
        """The first time past ``now`` that a node's pods will have been on it ``after(node)``
        seconds (``after`` None for a node: never asked)."""
        return min((at for name, held in self.pods_since.items() if (delay := after(name)) is not None and now < (at := held.since + delay)), default=math.inf)

    def ran(self, node: str, pod: PodKey, now: float) -> float:
        """Seconds ``pod`` has run on ``node`` (as first seen there)."""
        held = self.pods_since.get(node)
        return now - held.started.get(pod, now) if held is not None else 0.0
