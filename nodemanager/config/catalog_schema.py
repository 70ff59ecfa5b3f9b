"""provider.yaml's ``catalog`` block: which instance catalog and prices, and the prices this
account pays instead of the list's (``priceOverrides``)."""

from __future__ import annotations

from pydantic import Field, model_validator

from nodemanager.config.blocks import MAX_PATTERNS, Model
from nodemanager.model import CapacityType


class PriceOverride(Model):
    """What this account pays for some offerings, instead of the list price (a Savings Plan,
    an enterprise discount, a licence surcharge): a multiplier or a fixed price. It changes
    every choice made by price (the type booted, consolidation's savings, the `catalog`
    command, the simulator's cost and bound)."""

    instance_types: list[str] = Field(default_factory=lambda: ["*"], min_length=1, max_length=MAX_PATTERNS)
    """Names or globs of the types it prices (a family: `r5.*`); each must match a type of the catalog."""
    capacity_types: list[CapacityType] = Field(default_factory=list)
    """The capacity types it prices (`on-demand`, `spot`); empty: both. Reserved capacity is not priced by rules: its nodes are billed at their
    reservation term's `price`."""
    zones: list[str] = Field(default_factory=list, max_length=100)
    """The zones it prices; empty: every one."""
    multiplier: float | None = Field(default=None, gt=0, le=100)
    """The list price times this (0.72 for a 28% discount, 1.1 for a 10% surcharge)."""
    price: float | None = Field(default=None, gt=0, le=100_000)
    """A fixed price in dollars an hour instead (more than 0: for capacity already paid for, a
    token price such as 0.0001 makes it the first choice)."""
    reason: str = Field(default="", max_length=200)
    """Why (shown by `check-config`)."""

    @model_validator(mode="after")
    def _one_way(self) -> PriceOverride:
        if (self.multiplier is None) == (self.price is None):
            raise ValueError("give multiplier or price (one of them)")
        if CapacityType.RESERVED in self.capacity_types:
            raise ValueError("capacityTypes: reserved capacity is priced by its pools' capacityReservations[].price, not by a price override")
        return self


class CatalogSettings(Model):
    region: str = "us-east-1"
    """Which bundled catalog of instance types and prices."""
    file: str | None = None
    """A catalog JSON made by `python -m cloud.catalog_gen`, instead of the bundled one."""
    spot_price_fraction: float = Field(default=0.4, gt=0, le=1)
    """Spot price as a fraction of on-demand, until real spot prices are fetched (where `spotPriceHistory` has none)."""
    spot_price_history: str | None = None
    """A file of EC2's spot price history (`aws ec2 describe-spot-price-history --product-descriptions Linux/UNIX --start-time ... --output json`):
    the latest Linux price of each type and zone in it prices spot, in a simulation and until live prices are fetched."""
    price_overrides: list[PriceOverride] = Field(default_factory=list, max_length=100)
    """Prices this account pays instead of the list's, in order: the first rule that matches
    an offering (type, capacity type, zone) prices it. They apply to refreshed prices too."""
