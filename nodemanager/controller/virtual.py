"""Driving the controller's loops in virtual time (simulation and tests).

The clock jumps straight to the next loop that is due; loops due at the same instant run
in a fixed order (``LOOPS``': reservations, pool, heartbeat, reaper, ...), so runs are deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping

from nodemanager.clock import VirtualClock
from nodemanager.controller.node_controller import LOOPS, NodeController


class VirtualDriver:
    def __init__(self, controller: NodeController, clock: VirtualClock, intervals: Mapping[str, float]) -> None:
        self.controller = controller
        self.clock = clock
        self.intervals = dict(intervals)
        self.due = dict.fromkeys(LOOPS, clock.now())

    def next_due(self) -> float:
        return min(self.due.values())

    def step(self) -> float:
        """Advance to the next due instant and run every loop due then."""
        now = self.clock.advance_to(self.next_due())
        for name in LOOPS:
            if self.due[name] <= now:
                getattr(self.controller, f"{name}_loop")()
                self.due[name] = now + self.intervals[name]
        return now

    def jump_to(self, when: float) -> float:
        """No loop runs before ``when``: each loop's next run is the first of its own beat
        from there, the very time (to the last bit) it would have run at had every run
        between been made; the caller knows those runs would change nothing. The heartbeat
        loop waits for the pool loop's first run (which reads the cluster, the kubelets'
        renewals with it): before that it would find every Lease as old as the skip.
        Returns the first instant a loop runs."""
        pool = self._first_due("pool", when)
        self.due = {name: self._first_due(name, max(when, pool) if name == "heartbeat" else when) for name in self.due}
        return self.next_due()

    def _first_due(self, name: str, when: float) -> float:
        due, interval = self.due[name], self.intervals[name]
        while due < when:  # (added up as ``step`` adds, not multiplied: the same floats)
            due += interval
        return due

    def run_until(self, when: float) -> None:
        while self.next_due() <= when:
            self.step()
        self.clock.advance_to(when)

    def run_for(self, seconds: float) -> None:
        self.run_until(self.clock.now() + seconds)
