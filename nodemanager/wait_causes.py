"""Why pods waited, for the simulation report: each decision says why every waiting pod
waits (planned onto a node still booting, a pool's limit, the boot cap, ...), and the time
until the next decision is charged to that cause. A pool limit that makes pods wait for
hours shows as such, not only as a long p95."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from nodemanager.model import PodKey
from nodemanager.scaler import Decision

# (a phrase of the scaler's or the controller's reason, the cause it names), first match wins
CAUSES = (
    ("limit on ", "pool limit"),
    ("boot slot", "boot cap"),
    ("boot brake", "boot brake"),
    ("boots paused", "boot backoff"),
    ("marked unavailable", "capacity"),
    ("until the cluster changes", "held"),
)
BOOT, BIND, UNSCHEDULABLE, OTHER = "node booting", "binding", "unschedulable", "other"


def cause_of(reason: str) -> str:
    return next((cause for phrase, cause in CAUSES if phrase in reason), OTHER)


class WaitCauses:
    def __init__(self) -> None:
        self._at: float | None = None
        self._now: Counter[str] = Counter()  # pods waiting per cause since the last decision
        self.pod_seconds: Counter[str] = Counter()
        self.pods: dict[str, set[PodKey]] = {}  # the pods that waited for each cause but booting and binding (which every pod does)

    def decided(self, decision: Decision, now: float, ready: Callable[[str], bool]) -> None:
        if self._at is not None and now > self._at:
            for cause, n in self._now.items():
                self.pod_seconds[cause] += n * (now - self._at)
        self._at = now
        counts: Counter[str] = Counter()
        for key, reason in decision.waiting.items():
            cause = cause_of(reason)
            counts[cause] += 1
            self.pods.setdefault(cause, set()).add(key)
        for key in decision.unschedulable:
            counts[UNSCHEDULABLE] += 1
            self.pods.setdefault(UNSCHEDULABLE, set()).add(key)
        for node, n in Counter(decision.bindings.values()).items():
            counts[BIND if ready(node) else BOOT] += n
        self._now = counts

    def report(self) -> dict[str, dict[str, float]]:
        """By cause: pod-hours waited, their share of all waiting, and (but for booting and
        binding, which every new pod goes through) how many pods waited for it."""
        total = sum(self.pod_seconds.values())
        out: dict[str, dict[str, float]] = {}
        for cause, seconds in self.pod_seconds.most_common():
            entry: dict[str, float] = {"pod_hours": round(seconds / 3600, 3), "share": round(seconds / total, 4) if total else 0.0}
            if cause in self.pods:
                entry["pods"] = len(self.pods[cause])
            out[cause] = entry
        return out
