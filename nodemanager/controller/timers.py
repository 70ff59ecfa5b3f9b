"""Per-loop timing: last start and end, last duration, running average, count."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from nodemanager.clock import Clock


@dataclass
class LoopTimer:
    start: float | None = None  # clock time of the last run's start
    end: float | None = None
    last_ms: float = 0.0  # wall time the body took (perf counter, not the clock)
    avg_ms: float = 0.0
    count: int = 0
    observe: Callable[[float], None] | None = None  # told each run's seconds (a histogram's, say), however the run ended

    def timing(self, clock: Clock) -> _Timing:
        """A context that times one run of the loop (however it ends)."""
        return _Timing(self, clock)

    def _ended(self, clock: Clock, began: float) -> None:
        self.last_ms = (time.perf_counter() - began) * 1000.0
        self.count += 1
        self.avg_ms += (self.last_ms - self.avg_ms) / self.count
        self.end = clock.now()
        if self.observe is not None:
            self.observe(self.last_ms / 1000)

    @property
    def running(self) -> bool:
        return self.start is not None and (self.end is None or self.end < self.start)

    def as_dict(self) -> dict[str, float | int | None]:
        return {"start": self.start, "end": self.end, "last_ms": round(self.last_ms, 3), "avg_ms": round(self.avg_ms, 3), "count": self.count}


class _Timing:
    """``LoopTimer.timing``'s context (a class, not a generator: every loop's every run makes one)."""

    __slots__ = ("_began", "_clock", "_timer")

    def __init__(self, timer: LoopTimer, clock: Clock) -> None:
        self._timer, self._clock, self._began = timer, clock, 0.0

    def __enter__(self) -> None:
        self._timer.start = self._clock.now()
        self._began = time.perf_counter()

    def __exit__(self, *_: object) -> None:
        self._timer._ended(self._clock, self._began)
