"""Per-loop timing: last start and end, last duration, running average, count."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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

    @contextmanager
    def timing(self, clock: Clock) -> Iterator[None]:
        self.start = clock.now()
        began = time.perf_counter()
        try:
            yield
        finally:
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
