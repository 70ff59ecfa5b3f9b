"""The one clock. Loops read time only through an injected ``Clock``: the real one in
service, a ``VirtualClock`` in simulation and tests (which never sleep)."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class RealClock:
    def now(self) -> float:
        return time.time()


class VirtualClock:
    """Time that moves only when told to."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError(f"time cannot go backwards ({seconds}s)")
        self._now += seconds
        return self._now

    def advance_to(self, when: float) -> float:
        self._now = max(self._now, when)
        return self._now
