"""What the terminal view, the status page and the cluster's status ConfigMap say of a
/status document: the waiting pods grouped by reason, ages as kubectl writes them, and the
ConfigMap's short text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TEXT_REASONS = 10  # waiting reasons the ConfigMap lists


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


def status_text(doc: dict[str, Any], at: str) -> str:
    """The short status the cluster's ConfigMap shows: the service, each pool against its
    limits, how many pods wait and why (the ten largest groups), what disruption does."""
    controller = doc.get("controller", {})
    lines = [f"nodemanager status at {at}", f"controller: {controller.get('id', '?')}, {'ready' if controller.get('ready') else 'NOT READY'}"]
    live = sum(pool.get("usage", {}).get("nodes", 0) for pool in doc.get("pools", []))
    lines.append(f"fleet: ${doc.get('cost_per_hour', 0.0):,.2f}/h, {live} live node(s)")
    lines.append("pools:")
    for pool in doc.get("pools", []):
        usage, limits = pool.get("usage", {}), pool.get("limits", {})
        used = ", ".join(f"{key} {usage.get(key, 0)}" + (f"/{limits[key]}" if limits.get(key) is not None else "") for key in ("nodes", "cpu", "memory"))
        standby = pool.get("standby", {})
        paused = "boots paused" if pool.get("backoff") else "boots ok"
        lines.append(f"  {pool['name']}: {used}, standby {standby.get('present', 0)}/{standby.get('wanted', 0)}, {paused}")
    pods = doc.get("pods", {})
    counts = pods.get("counts", {})
    bound = counts.get("added", 0) + counts.get("assumed", 0)
    lines.append(f"pods: {counts.get('waiting', 0)} waiting, {bound} bound, {counts.get('unschedulable', 0)} unschedulable")
    groups = waiting_by_reason(pods.get("waiting", []), 0.0)
    lines += [f"  {g.pods} waiting: {g.reason[:200]}" for g in groups[:TEXT_REASONS]]
    if len(groups) > TEXT_REASONS:
        lines.append(f"  ... and {len(groups) - TEXT_REASONS} more reason(s)")
    disruption = doc.get("disruption", {})
    if disruption:
        lines.append(f"disruption: {disruption.get('state', '')}; {len(disruption.get('held', {}))} node(s) held")
    return "\n".join(lines) + "\n"
