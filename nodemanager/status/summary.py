"""What the terminal view and the status page both say of a /status document: the waiting
pods grouped by reason, and ages as kubectl writes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WaitingGroup:
    reason: str
    pods: int
    oldest: float  # seconds the longest-waiting of them has waited
    example: str  # one of them


def waiting_by_reason(waiting: list[dict[str, Any]], now: float) -> list[WaitingGroup]:
    """The waiting pods by reason, the largest group first (ties: the reason's first pod)."""
    groups: dict[str, list[Any]] = {}
    for pod in waiting:
        since = float(pod.get("since") or now)
        group = groups.setdefault(pod.get("reason", ""), [0, since, pod.get("pod", "")])
        group[0] += 1
        group[1] = min(group[1], since)
    made = [WaitingGroup(reason, n, max(0.0, now - since), example) for reason, (n, since, example) in groups.items()]
    return sorted(made, key=lambda g: -g.pods)


def age(seconds: float) -> str:
    """kubectl's way: 45s, 90s, 12m, 3h, 2d."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size or (unit == "m" and seconds >= size):
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"
