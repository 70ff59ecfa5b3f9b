"""``scheduling``: the scheduler profile nodemanager plans and binds with (kube-scheduler's
plugins per extension point, their arguments) and how new nodes treat pods' preferences."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from nodemanager.config.blocks import Model
from nodemanager.scheduling.profile import DEFAULT_PROFILE, Profile


class ScorePluginRef(Model):
    name: str
    """The plugin's name."""
    weight: int = Field(default=1, ge=0)
    """Its weight (0 counts as 1, as in kube-scheduler)."""


class Scheduling(Model):
    """The scheduling profile: plugins per extension point, in order. A point left out
    keeps the default list (see docs/configuration.md); an empty list disables the point."""

    queue_sort: list[str] | None = None
    """Plugins ordering the queue; default `PrioritySort`."""
    pre_filter: list[str] | None = None
    """PreFilter plugins, in order."""
    filter: list[str] | None = None
    """Filter plugins, in order (a node failing several is reported by the first)."""
    post_filter: list[str] | None = None
    """PostFilter plugins (preemption)."""
    score: list[ScorePluginRef] | None = None
    """Score plugins with their weights (`[{name, weight}]`)."""
    reserve: list[str] | None = None
    """Reserve plugins."""
    unreserve: list[str] | None = None
    """Unreserve plugins."""
    permit: list[str] | None = None
    """Permit plugins."""
    pre_bind: list[str] | None = None
    """PreBind plugins."""
    bind: list[str] | None = None
    """Bind plugins."""
    post_bind: list[str] | None = None
    """PostBind plugins."""
    plugin_args: dict[str, dict[str, object]] = Field(default_factory=dict)
    """Arguments per plugin, e.g. `{PodGroup: {scheduleTimeout: 5m}}`; `PodTopologySpread` takes kube's `defaultingType` and `defaultConstraints`;
    `MostAllocated` and `LeastAllocated` take `resources`, kube's `scoringStrategy.resources` (`[{name: cpu, weight: 1}, {name: memory, weight: 2}]`:
    weights 1–100, cpu and memory only; a resource left out is not scored; default 1:1)."""
    seed: int = 0
    """Seeds the tie-break between equally scored nodes."""
    preference_policy: Literal["Respect", "Ignore"] = "Respect"
    """How new nodes treat a pod's preferred pod affinity and anti-affinity and its own `ScheduleAnyway` spread constraints: `Respect`
    (Karpenter's way) makes them requirements of the node booted for the pod at first and relaxes them one at a time while no new node can take it;
    `Ignore` leaves them to score existing nodes only, so new nodes are packed as if the pod had none."""

    def profile(self) -> Profile:
        default = DEFAULT_PROFILE
        points = ("queue_sort", "pre_filter", "filter", "post_filter", "reserve", "unreserve", "permit", "pre_bind", "bind", "post_bind")
        lists = {name: tuple(getattr(self, name)) if getattr(self, name) is not None else getattr(default, name) for name in points}
        score = tuple((s.name, s.weight) for s in self.score) if self.score is not None else default.score
        return Profile(**lists, score=score, plugin_args=self.plugin_args)
