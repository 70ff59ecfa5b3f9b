"""What the scaler is configured with: the pools, node defaults, the scheduler profile."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

from nodemanager.config.schema import NodeDefaults, Pool, ProviderConfig
from nodemanager.model import Pod
from nodemanager.model.added_affinity import AddedAffinity, parse_added_affinity
from nodemanager.model.interpod import SpreadConstraint, parse_spread_defaults
from nodemanager.model.resources import IgnoredResources, is_extended_resource
from nodemanager.model.selectors import Toleration
from nodemanager.noderesource.strategy import ColocationStrategy
from nodemanager.scheduling import Profile
from nodemanager.scheduling.plugins.resources import parse_ignored_resources
from nodemanager.scheduling.profile import DEFAULT_PROFILE


@dataclass(frozen=True)
class ScalerSettings:
    pools: tuple[Pool, ...]
    nodes: NodeDefaults = field(default_factory=NodeDefaults)
    profile: Profile = DEFAULT_PROFILE
    seed: int = 0
    colocation: Mapping[str, ColocationStrategy] = field(default_factory=dict)  # pools that offer batch resources
    respect_preferences: bool = True  # ``scheduling.preferencePolicy`` Respect: see ``preferences``

    @cached_property
    def spread_defaults(self) -> tuple[SpreadConstraint, ...]:
        """The cluster's default spread constraints (PodTopologySpread's plugin args)."""
        return parse_spread_defaults(self.profile.plugin_args.get("PodTopologySpread", {}))

    @cached_property
    def added_affinity(self) -> AddedAffinity:
        """The node affinity the profile adds to every pod (NodeAffinity's ``addedAffinity``),
        while NodeAffinity filters."""
        if "NodeAffinity" not in self.profile.filter:
            return AddedAffinity()
        return parse_added_affinity(self.profile.plugin_args.get("NodeAffinity", {}))

    @cached_property
    def ignored_resources(self) -> IgnoredResources:
        """Extended resources NodeResourcesFit leaves unchecked (its ``ignoredResources`` and
        ``ignoredResourceGroups``), while it filters."""
        if "NodeResourcesFit" not in self.profile.filter:
            return IgnoredResources()
        return parse_ignored_resources(self.profile.plugin_args.get("NodeResourcesFit", {}))

    @cached_property
    def filters_taints(self) -> bool:
        """Whether the profile's filters keep pods off nodes whose taints they do not tolerate."""
        return "TaintToleration" in self.profile.filter

    def node_needs(self, pod: Pod) -> tuple[tuple[Toleration, ...] | None, tuple[tuple[str, int], ...]]:
        """What keeps ``pod`` off a node besides CPU and memory, as the filters judge it: its
        tolerations (None where the filters do not read taints) and ``device_asks``."""
        return (pod.tolerations if self.filters_taints else None, self.device_asks(pod))

    def device_asks(self, pod: Pod) -> tuple[tuple[str, int], ...]:
        """The extended resources (GPUs, say) of ``pod``'s requests that NodeResourcesFit
        checks, by name (none where the profile does not filter on resources)."""
        if "NodeResourcesFit" not in self.profile.filter:
            return ()
        return tuple(sorted((r, a) for r, a in self.ignored_resources.strip(pod.requests).items() if is_extended_resource(r)))

    @cached_property
    def plans_pods_as_given(self) -> bool:
        """Whether ``as_planned`` leaves every pod as it is (most profiles)."""
        return not (self.added_affinity.required or self.ignored_resources)

    def as_planned(self, pod: Pod) -> Pod:
        """A waiting pod as the planner reads it, so that new nodes are what the filters will
        accept: the profile's added node affinity joined to its own, the resources the fit
        filter ignores left out of its requests."""
        pod = self.added_affinity.on(pod)
        requests = self.ignored_resources.strip(pod.requests)
        return pod if requests is pod.requests else replace(pod, requests=requests)

    @classmethod
    def from_config(cls, config: ProviderConfig) -> ScalerSettings:
        colocation = {p.name: s for p in config.pools if (s := config.colocation_for(p)).enable}
        scheduling = config.scheduling
        return cls(tuple(config.pools), config.nodes, scheduling.profile(), scheduling.seed, colocation, scheduling.preference_policy == "Respect")
