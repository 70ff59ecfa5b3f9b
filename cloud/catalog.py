"""The instance catalog: every instance type nodemanager may buy, and the cheapest-fit query.

Bundled data (``cloud/data/<region>.json``, made by ``cloud.catalog_gen``) is the default;
a file can replace it. Spot prices are not in the bundled data (EC2 publishes them per
zone and they move), so until a provider refreshes them they are modelled as a fixed
fraction of the on-demand price (``catalog.spotPriceFraction`` in provider.yaml).
"""

from __future__ import annotations

import fnmatch
import json
import re
import stat
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from nodemanager.model import CapacityType, Gpu, InstanceType, Offering, Resources
from nodemanager.model.instance_type import DEFAULT_VOLUME_BYTES, prefix_max_pods
from nodemanager.model.reservation import RESERVED_PRICE_FRACTION, Reservation, ReservationKind

DATA_DIR = Path(__file__).parent / "data"
DEFAULT_REGION = "us-east-1"
DEFAULT_SPOT_PRICE_FRACTION = 0.4
CATALOG_BYTES = 64 * 2**20  # a catalog file (every EC2 type of a region is about 2 MB)
# Families on AWS's "Previous Generation Instances" list for years (Xen-based, no ENA or
# NVMe): a catalog entry without ``current_generation`` is current unless its family is here.
# A catalog made live from DescribeInstanceTypes may carry EC2's own flag instead.
PREVIOUS_GENERATION_FAMILIES = frozenset({"t1", "m1", "m2", "m3", "c1", "c3", "cc1", "cc2", "cg1", "cr1", "g2", "hi1", "hs1", "i2", "r3"})

OfferingKey = tuple[str, CapacityType, str]


def _sort_key(offering: Offering, itype: InstanceType) -> tuple[float, int, int, str, str, str]:
    # Cheapest first; on a tie the smaller machine, then names, so the order never
    # depends on file or dict order.
    return (offering.price, itype.vcpu, itype.memory_mib, itype.name, offering.capacity_type.value, offering.zone)


HOURLY_KEPT = 4096  # offerings whose prices ``hourly`` keeps


class Catalog:
    """An immutable set of instance types with lookups by name and glob."""

    def __init__(
        self,
        instance_types: Iterable[InstanceType],
        region: str = DEFAULT_REGION,
        source: str = "",
        listed: Catalog | None = None,
        reservations: Mapping[str, Reservation] | None = None,
    ) -> None:
        self.region = region
        self.source = source
        self.listed = listed if listed is not None else self  # the same types at list prices, when these are what an account pays (price overrides)
        self._types = {t.name: t for t in sorted(instance_types, key=lambda t: t.name)}
        ranked = [(o, t) for t in self._types.values() for o in t.offerings]
        ranked.sort(key=lambda pair: _sort_key(*pair))
        self._ranked: tuple[tuple[Offering, InstanceType], ...] = tuple(ranked)
        self.zones: tuple[str, ...] = tuple(sorted({o.zone for o, _ in ranked}))
        self._match = lru_cache(maxsize=1024)(self._match_uncached)
        self._hourly: dict[OfferingKey, float] = {}  # offerings' prices as asked for (the catalog never changes)
        self.reservations: dict[str, Reservation] = dict(reservations or {})  # by id: those its reserved offerings are of

    # -- loading ------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: Path, spot_price_fraction: float = DEFAULT_SPOT_PRICE_FRACTION) -> Catalog:
        data = json_file(path, "a catalog")
        if not isinstance(data, dict) or not isinstance(data.get("instance_types"), list):
            raise ValueError(f"{path} is not a catalog: a JSON object with an instance_types list")
        types = [_instance_type(entry, spot_price_fraction) for entry in data["instance_types"]]
        return cls(types, data.get("region", DEFAULT_REGION), f"{path} (generated {data.get('generated_at', '?')})")

    @classmethod
    def bundled(cls, region: str = DEFAULT_REGION, spot_price_fraction: float = DEFAULT_SPOT_PRICE_FRACTION) -> Catalog:
        path = DATA_DIR / f"{region}.json"
        if not path.exists():
            available = sorted(p.stem for p in DATA_DIR.glob("*.json"))
            raise FileNotFoundError(f"no bundled catalog for region {region!r}; bundled: {available}")
        return cls.from_file(path, spot_price_fraction)

    def with_prefix_delegation(self) -> Catalog:
        """A copy whose types hold as many pods as the VPC CNI gives them with prefix
        delegation (``prefix_max_pods``); a type whose ENIs are not known keeps its limit."""
        types = [replace(t, max_pods=prefix_max_pods(t.enis, t.ipv4_per_eni, t.vcpu) or t.max_pods) for t in self._types.values()]
        return Catalog(types, self.region, f"{self.source}, with VPC CNI prefix delegation")

    def with_prices(self, on_demand: Mapping[str, float], spot: Mapping[tuple[str, str], float], source: str) -> Catalog:
        """A copy with fresher list prices: on-demand per type, spot per (type, zone). What a
        source does not mention keeps its current price. (On a catalog of overridden prices,
        ask its ``listed`` one: the overrides go on top.)"""
        types = []
        for t in self._types.values():
            od = on_demand.get(t.name, t.on_demand_price)
            offerings = []
            for o in t.offerings:
                if o.capacity_type is CapacityType.ON_DEMAND:
                    offerings.append(replace(o, price=od))
                elif o.capacity_type is CapacityType.SPOT:
                    offerings.append(replace(o, price=spot.get((t.name, o.zone), o.price)))
                else:
                    offerings.append(o)  # reserved: paid for ahead, whatever the list says
            types.append(replace(t, on_demand_price=od, offerings=tuple(offerings)))
        return Catalog(types, self.region, source, reservations=self.reservations)

    def with_reservations(self, reservations: Iterable[Reservation]) -> Catalog:
        """A copy whose types offer ``reservations`` (any earlier ones dropped) as reserved
        offerings, priced next to nothing (``RESERVED_PRICE_FRACTION`` of on-demand): they
        are paid for already. Reservations of types it does not know are left out. The copy
        keeps this one's ``listed`` catalog, which has none."""
        by_type: dict[str, list[Reservation]] = {}
        for r in reservations:
            if r.instance_type in self._types:
                by_type.setdefault(r.instance_type, []).append(r)
        if not by_type and not self.reservations:
            return self
        types = []
        for t in self._types.values():
            kept = tuple(o for o in t.offerings if o.capacity_type is not CapacityType.RESERVED)
            price = round(t.on_demand_price * RESERVED_PRICE_FRACTION, 12)
            added = tuple(
                Offering(t.name, r.zone, CapacityType.RESERVED, price, r.id, r.kind is ReservationKind.CAPACITY_BLOCK)
                for r in sorted(by_type.get(t.name, ()), key=lambda r: r.id)
            )
            types.append(t if not added and kept == t.offerings else replace(t, offerings=kept + added))
        return Catalog(types, self.region, self.source, listed=self.listed, reservations={r.id: r for rs in by_type.values() for r in rs})

    # -- lookups ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._types)

    def __iter__(self) -> Iterator[InstanceType]:
        return iter(self._types.values())

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def get(self, name: str) -> InstanceType | None:
        return self._types.get(name)

    def hourly(self, instance_type: str, capacity_type: CapacityType, zone: str) -> float:
        """What a running instance of this offering costs an hour (0 for a type the catalog
        does not know: it is not counted)."""
        key = (instance_type, capacity_type, zone)
        found = self._hourly.get(key)
        if found is None:
            if len(self._hourly) >= HOURLY_KEPT:
                self._hourly.clear()
            itype = self._types.get(instance_type)
            found = self._hourly[key] = (itype.price(capacity_type, zone) if itype else None) or 0.0
        return found

    def __getitem__(self, name: str) -> InstanceType:
        return self._types[name]

    def _match_uncached(
        self, patterns: tuple[str, ...], architectures: tuple[str, ...], exclude: tuple[str, ...], generation: str, burstable: bool
    ) -> frozenset[str]:
        out = set()
        # Exact names are looked up, not matched: a pool's types are often given as a list of
        # a hundred names, each of which fnmatch would try against every type of the catalog.
        exact, globs = _split(patterns)
        exact_out, globs_out = _split(exclude)
        for n, t in self._types.items():
            matched = ([n] if n in exact else []) + [p for p in globs if fnmatch.fnmatchcase(n, p)]
            if not matched or n in exact_out or any(fnmatch.fnmatchcase(n, p) for p in globs_out):
                continue
            if architectures and not set(t.architectures) & set(architectures):
                continue
            if not any(_names(p, n) for p in matched):  # a pattern like "*" or "*.large": the type's kind must fit
                if (generation == "current" and not t.current_generation) or (generation == "previous" and t.current_generation):
                    continue
                if t.burstable and not burstable:
                    continue
            out.add(n)
        return frozenset(out)

    def matching(
        self,
        patterns: Collection[str],
        architectures: Collection[str] = (),
        exclude: Collection[str] = (),
        *,
        generation: str = "any",
        burstable: bool = True,
    ) -> frozenset[str]:
        """Names matched by any of the exact names or globs (``c5*``, ``m5.*``), of any of
        ``architectures`` when given, and matched by none of ``exclude``. A type that no
        pattern names (see ``_names``) must also be of ``generation`` (current, previous or
        any) and, unless ``burstable``, not burstable."""
        return self._match(tuple(sorted(patterns)), tuple(sorted(architectures)), tuple(sorted(exclude)), generation, burstable)

    # -- the cheapest-fit query ---------------------------------------------------------
    def ranked(
        self,
        requests: Resources,
        *,
        allowed: Collection[str] = ("*",),
        architectures: Collection[str] = (),
        capacity_type: CapacityType | None = None,
        zone: str | None = None,
        exclude: Collection[OfferingKey] = (),
        volume_bytes: int = DEFAULT_VOLUME_BYTES,
        exclude_types: Collection[str] = (),
    ) -> Iterator[tuple[Offering, InstanceType]]:
        """Offerings whose type can hold ``requests``, cheapest first, deterministic order."""
        names = self.matching(allowed, architectures, exclude_types)
        for offering, itype in self._ranked:
            if itype.name not in names:
                continue
            if capacity_type is not None and offering.capacity_type is not capacity_type:
                continue
            if zone and offering.zone != zone:
                continue
            if offering.key in exclude:
                continue
            allocatable = itype.allocatable if volume_bytes == DEFAULT_VOLUME_BYTES else itype.allocatable_for(volume_bytes)
            if requests.fits(allocatable):
                yield offering, itype

    def cheapest_fitting(
        self,
        requests: Resources,
        *,
        allowed: Collection[str] = ("*",),
        architectures: Collection[str] = (),
        capacity_type: CapacityType | None = None,
        zone: str | None = None,
        exclude: Collection[OfferingKey] = (),
    ) -> Offering | None:
        """The cheapest offering that fits, or None; ties broken by size, then name."""
        ranked = self.ranked(requests, allowed=allowed, architectures=architectures, capacity_type=capacity_type, zone=zone, exclude=exclude)
        return next((o for o, _ in ranked), None)


def json_file(path: Path, what: str) -> Any:
    """A JSON file of price or type data, read within bounds (a regular file, at most
    ``CATALOG_BYTES``, nested as data is); ValueError naming the file otherwise."""
    found = Path(path).stat()
    if not stat.S_ISREG(found.st_mode):
        raise ValueError(f"{path} is not a regular file")
    if found.st_size > CATALOG_BYTES:
        raise ValueError(f"{path} is {found.st_size:,} bytes, more than the {CATALOG_BYTES:,} {what} may be")
    try:
        return json.loads(Path(path).read_bytes())
    except RecursionError:
        raise ValueError(f"{path} nests deeper than {what} does") from None


def _split(patterns: tuple[str, ...]) -> tuple[frozenset[str], list[str]]:
    """``patterns`` as the exact names among them and the globs (those with ``*``, ``?`` or ``[``)."""
    globs = [p for p in patterns if _GLOB.search(p)]
    return frozenset(patterns) - frozenset(globs), globs


_GLOB = re.compile(r"[*?\[]")


def _names(pattern: str, name: str) -> bool:
    """Whether ``pattern`` names the type rather than sweeps it in: it begins with the type's
    name or a prefix of it (``m1.small``, ``t3.*``, ``t*``); one that begins with a wildcard
    (``*``, ``*.large``) names nothing."""
    literal = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
    return bool(literal) and name.startswith(literal)


def _instance_type(entry: dict[str, Any], spot_price_fraction: float) -> InstanceType:
    price = float(entry["on_demand_price"])
    return InstanceType(
        name=entry["name"],
        vcpu=int(entry["vcpu"]),
        memory_mib=int(entry["memory_mib"]),
        on_demand_price=price,
        architectures=tuple(entry.get("architectures", ())),
        gpus=tuple(Gpu(g["count"], g["manufacturer"], g["model"], g["memory_mib"]) for g in entry.get("gpus", ())),
        spot_price=round(price * spot_price_fraction, 6) if entry.get("spot") else None,
        zones=tuple(entry.get("zones", ())),
        max_pods=int(entry.get("max_pods", 110)),
        burstable=bool(entry.get("burstable", False)),
        bare_metal=bool(entry.get("bare_metal", False)),
        current_generation=bool(entry.get("current_generation", entry["name"].split(".", 1)[0] not in PREVIOUS_GENERATION_FAMILIES)),
        enis=int(entry.get("enis", 0)),
        ipv4_per_eni=int(entry.get("ipv4_per_eni", 0)),
    )
