"""Pods held at Permit: one deadline per waiting plugin, resolved by allow / reject / timeout.

There are no timers: deadlines are virtual times, and ``expire(now)`` rejects the pods
whose wait ran out, so waiting is deterministic and testable without sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nodemanager.model import Pod
from nodemanager.scheduling.status import Code, Status

MAX_PERMIT_WAIT = 15 * 60.0  # seconds; longer requested waits are capped


@dataclass
class WaitingPod:
    pod: Pod
    node_name: str
    started: float
    deadlines: dict[str, float] = field(default_factory=dict)  # plugin -> virtual time
    outcome: Status | None = None  # None while still waiting

    def allow(self, plugin: str) -> bool:
        """Drop ``plugin``'s wait; once no plugin is pending the pod is allowed."""
        if self.outcome is not None:
            return False
        self.deadlines.pop(plugin, None)
        if not self.deadlines:
            self.outcome = Status(Code.SUCCESS)
        return True

    def reject(self, message: str, plugin: str = "") -> bool:
        if self.outcome is not None:
            return False
        self.deadlines.clear()
        self.outcome = Status(Code.UNSCHEDULABLE, message, plugin)
        return True

    def expire(self, now: float) -> bool:
        """Reject when any pending plugin's deadline has passed; True if it did."""
        for plugin, deadline in sorted(self.deadlines.items()):
            if now >= deadline:
                waited = deadline - self.started
                return self.reject(f"rejected due to timeout after waiting {waited:g}s at plugin {plugin}", plugin)
        return False
