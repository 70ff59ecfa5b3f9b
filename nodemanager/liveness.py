"""Whether the service's loops still run: what ``/healthz`` answers.

A process that serves HTTP but whose loops are wedged (a call that never returns, a
scheduler thread gone) scales nothing; liveness must fail so the kubelet restarts it. A loop
is stuck when a run of it has lasted, or no run has begun for, longer than ``STUCK_INTERVALS``
of its intervals plus what a run may legitimately spend: the pass deadline for loops under
one, and ``RECOVERY_ALLOWANCE`` for the pool loop's recovery (a large cluster's first
listing). A loop that waits for its turn (a follower, a recovery the cloud refuses) still
completes its runs, so it is live; readiness says the rest."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from nodemanager.clock import Clock

STUCK_INTERVALS = 2.0
RECOVERY_ALLOWANCE = 300.0  # seconds a recovering pool run may take on top


@dataclass
class _Run:
    began: float | None = None
    ended: float | None = None
    allowance: float = 0.0


class Liveness:
    def __init__(self, clock: Clock, intervals: dict[str, float], allowances: dict[str, float]) -> None:
        self.clock = clock
        self.intervals = intervals
        self.allowances = allowances
        self._since = clock.now()
        self._runs = {name: _Run() for name in intervals}
        self._lock = threading.Lock()

    def began(self, name: str, *, recovering: bool = False) -> None:
        with self._lock:
            run = self._runs[name]
            run.began = self.clock.now()
            run.allowance = self.allowances.get(name, 0.0) + (RECOVERY_ALLOWANCE if recovering else 0.0)

    def ended(self, name: str) -> None:
        with self._lock:
            self._runs[name].ended = self.clock.now()

    def running(self) -> list[str]:
        """The loops with a run under way."""
        with self._lock:
            return [name for name, run in self._runs.items() if run.began is not None and (run.ended is None or run.ended < run.began)]

    def stuck(self) -> dict[str, float]:
        """Each stuck loop with how long it has been running, or waiting for a run."""
        now = self.clock.now()
        stuck: dict[str, float] = {}
        with self._lock:
            for name, run in self._runs.items():
                running = run.began is not None and (run.ended is None or run.ended < run.began)
                since = run.began if running else (run.ended if run.ended is not None else self._since)
                assert since is not None
                limit = STUCK_INTERVALS * self.intervals[name] + (run.allowance if running else self.allowances.get(name, 0.0))
                if now - since > limit:
                    stuck[name] = now - since
        return stuck

    def report(self) -> tuple[bool, str]:
        """``/healthz``'s answer: live or not, and a line for each stuck loop."""
        stuck = self.stuck()
        if not stuck:
            return True, "ok\n"
        return False, "".join(f"loop {name}: no run completed for {seconds:.0f}s\n" for name, seconds in sorted(stuck.items()))
