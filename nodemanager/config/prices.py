"""Price overrides (``catalog.priceOverrides``): the catalog's prices as this account pays
them. The first rule that matches an offering prices it; each type's zone-less on-demand and
spot prices become the lowest of its offerings'."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from cloud.catalog import Catalog
from nodemanager.config.catalog_schema import PriceOverride
from nodemanager.model import CapacityType, Offering


def overridden(catalog: Catalog, rules: Sequence[PriceOverride]) -> Catalog:
    """``catalog``'s list prices with ``rules`` applied (itself when there are none); the
    result keeps the list-priced catalog as ``listed``, so overriding again (after a price
    refresh) starts from list prices."""
    catalog = catalog.listed
    if not rules:
        return catalog
    names = [catalog.matching(rule.instance_types) for rule in rules]
    types = []
    for itype in catalog:
        offerings = tuple(_priced(o, rules, names) for o in itype.offerings)
        if offerings == itype.offerings:
            types.append(itype)
            continue
        od, spot = _lowest(offerings, CapacityType.ON_DEMAND), _lowest(offerings, CapacityType.SPOT)
        types.append(
            replace(
                itype,
                offerings=offerings,
                on_demand_price=itype.on_demand_price if od is None else od,
                spot_price=itype.spot_price if spot is None else spot,
            )
        )
    return Catalog(types, catalog.region, f"{catalog.source}, {len(rules)} price override(s)", listed=catalog.listed)


def priced_offerings(catalog: Catalog, rule: PriceOverride) -> int:
    """How many of ``catalog``'s offerings ``rule`` matches."""
    names = catalog.matching(rule.instance_types)
    return sum(1 for t in catalog for o in t.offerings if _matches(rule, names, o))


def _matches(rule: PriceOverride, names: frozenset[str], offering: Offering) -> bool:
    """Whether ``rule`` (whose globs match ``names``) prices ``offering``."""
    return (
        offering.capacity_type is not CapacityType.RESERVED  # (free to plan with: paid for already)
        and offering.instance_type in names
        and (not rule.capacity_types or offering.capacity_type in rule.capacity_types)
        and (not rule.zones or offering.zone in rule.zones)
    )


def _priced(offering: Offering, rules: Sequence[PriceOverride], names: Sequence[frozenset[str]]) -> Offering:
    for rule, matched in zip(rules, names, strict=True):
        if _matches(rule, matched, offering):
            price = rule.price if rule.price is not None else offering.price * (rule.multiplier or 1.0)
            return replace(offering, price=round(price, 6))
    return offering


def _lowest(offerings: tuple[Offering, ...], capacity_type: CapacityType) -> float | None:
    return min((o.price for o in offerings if o.capacity_type is capacity_type), default=None)
