"""What the scaler is configured with: the pools, node defaults, the scheduler profile."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from nodemanager.config.schema import NodeDefaults, Pool, ProviderConfig
from nodemanager.model.interpod import SpreadConstraint, parse_spread_defaults
from nodemanager.noderesource.strategy import ColocationStrategy
from nodemanager.scheduling import Profile
from nodemanager.scheduling.profile import DEFAULT_PROFILE


@dataclass(frozen=True)
class ScalerSettings:
    pools: tuple[Pool, ...]
    nodes: NodeDefaults = field(default_factory=NodeDefaults)
    profile: Profile = DEFAULT_PROFILE
    seed: int = 0
    colocation: Mapping[str, ColocationStrategy] = field(default_factory=dict)  # pools that offer batch resources

    @cached_property
    def spread_defaults(self) -> tuple[SpreadConstraint, ...]:
        """The cluster's default spread constraints (PodTopologySpread's plugin args)."""
        return parse_spread_defaults(self.profile.plugin_args.get("PodTopologySpread", {}))

    @classmethod
    def from_config(cls, config: ProviderConfig) -> ScalerSettings:
        colocation = {p.name: s for p in config.pools if (s := config.colocation_for(p)).enable}
        return cls(tuple(config.pools), config.nodes, config.scheduling.profile(), config.scheduling.seed, colocation)
