"""Reserved capacity in a simulation's report: what reserved instances are billed at, what the
lower bound gives up for them, and how each reservation was used.

A node in a reservation is billed at its term's ``price`` (0 by default: the reservation is
paid for, used or not). The bound prices the pools as if their reserved capacity were
on-demand, and counts each reservation's instances, for as long as it was active, as free
capacity of their pools (``CostBound.usd``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cloud.base import Instance
from cloud.catalog import Catalog
from cloud.simulated import BilledSpan
from nodemanager.config.reservation_schema import pools_term, selecting
from nodemanager.config.schema import Pool, ProviderConfig
from nodemanager.model import CapacityType
from nodemanager.model.reservation import Reservation
from nodemanager.scaler.cost_bound import Reserved


def bound_pools(pools: Iterable[Pool]) -> list[Pool]:
    """The pools with their ``reserved`` capacity priced as ``on-demand`` (what a reserved
    instance is: an on-demand one, paid for ahead)."""
    out = []
    for pool in pools:
        if CapacityType.RESERVED in pool.capacity_types:
            types = list(dict.fromkeys(CapacityType.ON_DEMAND if t is CapacityType.RESERVED else t for t in pool.capacity_types))
            pool = pool.model_copy(update={"capacity_types": types})  # noqa: PLW2901
        out.append(pool)
    return out


class ReservedCapacity:
    def __init__(self, config: ProviderConfig, catalog: Catalog, declared: Sequence[tuple[Reservation, float]]) -> None:
        self.catalog = catalog
        self.pools = config.pools
        self.declared = list(declared)
        self.prices: dict[str, float] = {}  # reservation -> what its nodes are billed at (reservations some pool selects)
        for r, _ in declared:
            term = pools_term(config.pools, r)
            if term is not None:
                self.prices[r.id] = term.price

    def hourly(self, instance: Instance) -> float:
        """What the instance is billed an hour."""
        if instance.reservation:
            return self.prices.get(instance.reservation, 0.0)
        return self.catalog.hourly(instance.instance_type, instance.capacity_type, instance.zone)

    def reserved(self, end: float) -> list[Reserved]:
        """The selected reservations' instance-seconds until ``end``, for the bound: each
        for the pools that select it, at its type's on-demand price."""
        out = []
        for r, start in self.declared:
            itype = self.catalog.get(r.instance_type)
            pools = tuple(p.name for p in self.pools if selecting(p.capacity_reservations, r) is not None)
            if pools and itype is not None:
                active = max(0.0, min(end, r.ends_at if r.ends_at is not None else end) - start)
                out.append(Reserved(pools, r.instance_type, r.total * active, itype.price(CapacityType.ON_DEMAND, r.zone) or 0.0))
        return out

    def report(self, spans: Iterable[BilledSpan], end: float) -> list[dict[str, object]]:
        """Each declared reservation: whether a pool selects it, the instances launched into
        it, the instance-hours they ran and what they were billed."""
        used: dict[str, list[float]] = {r.id: [0, 0.0] for r, _ in self.declared}
        for span in spans:
            if (found := used.get(span.instance.reservation)) is not None:
                found[0] += 1
                found[1] += span.seconds
        return [
            {
                "id": r.id,
                "instance_type": r.instance_type,
                "zone": r.zone,
                "type": r.kind.value,
                "count": r.total,
                "selected": r.id in self.prices,
                "launched": int(used[r.id][0]),
                "instance_hours": round(used[r.id][1] / 3600.0, 3),
                "usd": round(used[r.id][1] / 3600.0 * self.prices.get(r.id, 0.0), 4),
                "active_hours": round(max(0.0, min(end, r.ends_at if r.ends_at is not None else end) - start) / 3600.0, 3),
            }
            for r, start in self.declared
        ]
