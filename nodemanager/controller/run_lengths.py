"""How long a pod that runs to completion still has to run, learnt from those that ran to
completion before it: the pods of its own controller once a few have (a Job's pods do
alike), else every such pod lately.

What a pod that has run ``r`` seconds is expected to run still is the mean of ``d - r``
over the durations ``d`` seen that are longer than ``r`` (the mean residual life). With none
seen longer, or none seen at all, nothing is expected: a move is then not made for a saving
that depends on the pod running on. Durations seen early are the short ones (the long ones
have not ended yet), which errs the same way: toward moving less.
"""

from __future__ import annotations

import bisect
from collections import deque

from nodemanager.model import Pod

OWN_SAMPLES = 3  # a controller's own finished pods needed before they alone are used
KEPT = 1000  # durations kept in all, the latest
OWN_KEPT = 50  # durations kept per controller, the latest
CONTROLLERS_KEPT = 4096  # controllers whose durations are kept (the oldest go first)


def controller_of(pod: Pod) -> str:
    """The controller that makes ``pod`` again when it is evicted (the pod itself if none)."""
    owner = pod.owner
    return f"{pod.namespace}/{owner.kind}/{owner.name}" if owner is not None else pod.key


class _Durations:
    """The latest ``kept`` durations, in order of arrival and sorted."""

    def __init__(self, kept: int) -> None:
        self._order: deque[float] = deque()
        self._sorted: list[float] = []
        self._kept = kept

    def add(self, seconds: float) -> None:
        if len(self._order) >= self._kept:
            oldest = self._order.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, oldest)]
        self._order.append(seconds)
        bisect.insort(self._sorted, seconds)

    def __len__(self) -> int:
        return len(self._order)

    def left(self, ran: float) -> float:
        longer = self._sorted[bisect.bisect_right(self._sorted, ran) :]
        return sum(longer) / len(longer) - ran if longer else 0.0


class RunLengths:
    def __init__(self) -> None:
        self._all = _Durations(KEPT)
        self._own: dict[str, _Durations] = {}

    def finished(self, controller: str, seconds: float) -> None:
        """A pod of ``controller`` ran to completion in ``seconds``."""
        self._all.add(seconds)
        own = self._own.get(controller)
        if own is None:
            if len(self._own) >= CONTROLLERS_KEPT:
                del self._own[next(iter(self._own))]
            own = self._own[controller] = _Durations(OWN_KEPT)
        own.add(seconds)

    def left(self, controller: str, ran: float) -> float:
        """Seconds a pod of ``controller`` that has run ``ran`` is expected to run still."""
        own = self._own.get(controller)
        return (own if own is not None and len(own) >= OWN_SAMPLES else self._all).left(ran)
