"""``pools[].launch``: how a pool's nodes are launched. A fleet launch (EC2's ``CreateFleet``,
type ``instant``) offers EC2 every offering the scaler found as good for the node's pods,
so a capacity error on one falls back to the next within the same call; ``runInstances``
asks for the one offering chosen."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pydantic import Field, model_validator

from nodemanager.config.blocks import Model


class LaunchMethod(StrEnum):
    FLEET = "fleet"
    RUN_INSTANCES = "runInstances"


class OnDemandStrategy(StrEnum):
    LOWEST_PRICE = "lowest-price"  # EC2's prices: the cheapest offering with capacity
    PRIORITIZED = "prioritized"  # nodemanager's order: its prices (with catalog.priceOverrides), the planned offering first


class SpotStrategy(StrEnum):
    PRICE_CAPACITY_OPTIMIZED = "price-capacity-optimized"
    CAPACITY_OPTIMIZED = "capacity-optimized"
    LOWEST_PRICE = "lowest-price"


# User data placeholders whose value differs between a fleet's offerings or between nodes:
# a fleet's launch templates are shared, so they cannot hold them.
PER_NODE_PLACEHOLDERS = ("{node_name}", "{instance_type}", "{zone}")


class MinValuesPolicy(StrEnum):
    STRICT = "Strict"  # a node whose launch cannot offer that many is not booted: its pods wait, saying why
    BEST_EFFORT = "BestEffort"  # it is booted with what there is, and its events say so


class MinValues(Model):
    """At least this many distinct instance types and families in every fleet launch's offerings (Karpenter's `minValues` on
    `node.kubernetes.io/instance-type` and `karpenter.k8s.aws/instance-family`): dearer types than `priceTolerance` allows are added until
    there are. Nodes chosen for their devices, standby nodes and nodes whose pods constrain their type are launched as planned."""

    instance_types: int | None = Field(default=None, ge=1, le=60)
    """Distinct instance types, the planned one included."""
    families: int | None = Field(default=None, ge=1, le=60)
    """Distinct instance families (`m5`, `c6i`), the planned one's included."""
    policy: MinValuesPolicy = MinValuesPolicy.STRICT
    """`Strict` (Karpenter's default): a node whose pods fewer types or families hold is not booted, and its pods wait saying so.
    `BestEffort`: it is booted with what there is, and its events say what was relaxed."""

    @property
    def asked(self) -> bool:
        return self.instance_types is not None or self.families is not None


class Launch(Model):
    """How the pool's nodes are launched."""

    method: LaunchMethod | None = None
    """`fleet`: one EC2 Fleet call (`CreateFleet`, type `instant`) per node, offering every type and zone that holds the node's pods within
    `priceTolerance` of the planned offering's price, so a capacity error on one falls back to the next in the same call. `runInstances`: one `RunInstances`
    call for the one offering chosen (for accounts that forbid fleets, with `nodes.bootImageSpec.launchTemplate`, or user data that names the
    node, its type or its zone). Default: `fleet`, or `runInstances` where one of those needs it."""
    price_tolerance: float = Field(default=0.1, ge=0, le=1)
    """How far from the planned offering's price another may be, dearer or cheaper, and still be offered to the fleet (0.1: 10%)."""
    max_offerings: int = Field(default=20, ge=1, le=60)
    """At most this many offerings (type and zone) in one fleet call, the cheapest first."""
    on_demand_strategy: OnDemandStrategy = OnDemandStrategy.LOWEST_PRICE
    """`lowest-price` (EC2 picks the cheapest by its own prices) or `prioritized` (by nodemanager's prices, price overrides included, the
    planned offering first)."""
    spot_strategy: SpotStrategy = SpotStrategy.PRICE_CAPACITY_OPTIMIZED
    """EC2's spot allocation strategy: `price-capacity-optimized` (cheap pools least likely to be interrupted), `capacity-optimized` or
    `lowest-price`."""
    min_values: MinValues = Field(default_factory=MinValues)
    """The least variety of instance types and families every launch offers (see [Launches](concepts/launches.md#minvalues))."""

    @model_validator(mode="after")
    def _enough_offerings(self) -> Launch:
        asked = max(self.min_values.instance_types or 0, self.min_values.families or 0)
        if asked > self.max_offerings:
            raise ValueError(f"minValues asks for {asked} distinct types or families but maxOfferings is {self.max_offerings}: raise maxOfferings")
        return self


def fleet_hindrance(launch_template: str | None, user_data: str) -> str:
    """Why no pool can launch through a fleet ("" when nothing stands in the way)."""
    named = [p for p in PER_NODE_PLACEHOLDERS if p in user_data]
    if launch_template:
        return "nodes.bootImageSpec.launchTemplate is set (a fleet launches from launch templates nodemanager makes)"
    if named:
        return f"cloud.aws.userData uses {', '.join(named)}, which differ between a fleet's offerings or its nodes"
    return ""


def launch_method_problems(launches: Sequence[Launch], launch_template: str | None, user_data: str) -> list[str]:
    """Each pool's launch method settled (an unset one becomes ``fleet`` unless the launch
    template or the user data needs ``runInstances``), and why an explicit ``fleet`` cannot
    be, with its key path."""
    hindrance = fleet_hindrance(launch_template, user_data)
    problems = []
    for i, launch in enumerate(launches):
        if launch.method is None:
            object.__setattr__(launch, "method", LaunchMethod.RUN_INSTANCES if hindrance else LaunchMethod.FLEET)
        elif launch.method is LaunchMethod.FLEET and hindrance:
            problems.append(f"pools[{i}].launch.method: fleet, but {hindrance}: use runInstances")
        if launch.min_values.asked and launch.method is LaunchMethod.RUN_INSTANCES:
            why = "set" if "method" in launch.model_fields_set else f"its default here, since {hindrance}"
            problems.append(f"pools[{i}].launch.minValues: a RunInstances launch offers one type ({why}): minValues needs method fleet")
    return problems
