"""``pools[].launch``: how a pool's nodes are launched. A fleet launch (EC2's ``CreateFleet``,
type ``instant``) offers EC2 every offering the scaler found as good for the node's pods,
so a capacity error on one falls back to the next within the same call; ``runInstances``
asks for the one offering chosen."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pydantic import Field

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
    return problems
