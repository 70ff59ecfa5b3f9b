"""Disruption budgets: how many of a pool's nodes may be disrupted now, for a reason
(Karpenter's NodePool budgets: the most restrictive active budget wins; a scheduled budget
is active for ``duration`` after each time its cron schedule fires, in UTC)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

from apscheduler.triggers.cron import CronTrigger

from nodemanager.config.schema import DisruptionBudget, DisruptionReason, Pool


@lru_cache(maxsize=256)
def _trigger(schedule: str) -> CronTrigger:
    return CronTrigger.from_crontab(schedule, timezone=UTC)


# (schedule, duration) -> (since, the first firing at or after since; None: none ever). The
# answer holds for any later ``since`` up to that firing, so a schedule is asked again once
# per window, not on every pass (a cron parser's search for a rare date is slow).
_next_firing: dict[tuple[str, float], tuple[float, float | None]] = {}


def _first_firing(schedule: str, duration: float, since: float) -> float | None:
    cached = _next_firing.get((schedule, duration))
    if cached is not None and cached[0] <= since and (cached[1] is None or since <= cached[1]):
        return cached[1]
    fired = _trigger(schedule).get_next_fire_time(None, datetime.fromtimestamp(since, UTC))
    first = fired.timestamp() if fired is not None else None
    _next_firing[(schedule, duration)] = (since, first)
    return first


def active(budget: DisruptionBudget, now: float) -> bool:
    """Whether the budget applies at ``now``: always, or within ``duration`` of a firing."""
    if budget.schedule is None or budget.duration is None:
        return True
    fired = _first_firing(budget.schedule, budget.duration, now - budget.duration)
    return fired is not None and fired <= now


def allowed(pool: Pool, reason: DisruptionReason, now: float, nodes: int, disrupting: int) -> tuple[int, str]:
    """How many more of the pool's ``nodes`` may be disrupted for ``reason`` while
    ``disrupting`` already are, and the budget that says so ("" when none applies)."""
    limits = [(b.limit(nodes), i) for i, b in enumerate(pool.disruption.budgets) if (not b.reasons or reason in b.reasons) and active(b, now)]
    if not limits:
        return max(nodes - disrupting, 0), ""
    limit, i = min(limits)
    said = pool.disruption.budgets[i].nodes
    return max(limit - disrupting, 0), f"pool {pool.name}'s budgets[{i}] (nodes: {said}): {limit} of {nodes} live node(s) at once, {disrupting} being disrupted"
