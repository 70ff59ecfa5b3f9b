"""``pools[].capacityReservations``: which EC2 capacity reservations (On-Demand Capacity
Reservations and Capacity Blocks for ML) a pool launches into, before it buys anything (as
Karpenter's ``capacityReservationSelectorTerms``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from pydantic import Field, model_validator

from nodemanager.config.blocks import Model
from nodemanager.config.durations import Duration
from nodemanager.model import CapacityType
from nodemanager.model.reservation import CAPACITY_BLOCK_RECLAIM, Reservation, ReservationQuery

MAX_TERMS = 50


class ReservationTerm(Model):
    """One way of selecting reservations: by `id`, or by `tags` (and `ownerId`). A reservation any term selects is used."""

    id: str | None = Field(default=None, pattern=r"^cr-[0-9a-f]{8,17}$")
    """A reservation's id (`cr-0123456789abcdef0`)."""
    tags: dict[str, str] = Field(default_factory=dict, max_length=20)
    """Every tag must match; the value `*` matches any value of the key."""
    owner_id: str | None = Field(default=None, pattern=r"^[0-9]{12}$")
    """With `tags`: only reservations this account owns (a reservation shared from another account has its owner's id)."""
    price: float = Field(default=0.0, ge=0, le=1000)
    """USD an hour a node in one of these reservations is billed at in `simulate`'s report. Default 0: already paid for, whether used or
    not. Planning, consolidation, `/status` and `/metrics` count reserved capacity as next to free, so it is used first."""
    drain_lead: Duration = Field(default=2400.0, gt=CAPACITY_BLOCK_RECLAIM, le=86400.0)
    """For a Capacity Block: how long before the block ends its nodes are drained and terminated (their pods planned elsewhere first).
    Default 40m: ten minutes before EC2 begins terminating the block's instances (30 minutes before its end)."""
    launch_cutoff: Duration = Field(default=1800.0, ge=0.0, le=86400.0)
    """For a Capacity Block: no new node goes into the block from this long before its drain time (default 30m): such a node would be
    drained again within that time, its pods moved twice for minutes of reserved capacity. The block's running nodes stay until the drain."""

    @model_validator(mode="after")
    def _one_way(self) -> ReservationTerm:
        if (self.id is None) == (not self.tags):
            raise ValueError("give either id or tags")
        if self.owner_id is not None and self.id is not None:
            raise ValueError("ownerId goes with tags, not with id")
        return self

    def query(self) -> ReservationQuery:
        return ReservationQuery(self.id, dict(self.tags), self.owner_id)

    def selects(self, reservation: Reservation) -> bool:
        return self.query().selects(reservation)


def selecting(terms: Iterable[ReservationTerm], reservation: Reservation) -> ReservationTerm | None:
    """The first of ``terms`` that selects ``reservation``."""
    return next((t for t in terms if t.selects(reservation)), None)


def pools_term(pools: Iterable[HasTerms], reservation: Reservation) -> ReservationTerm | None:
    """The first term of any of ``pools`` (in provider.yaml's order) that selects ``reservation``:
    its price and drain lead are the reservation's."""
    return selecting((t for p in pools for t in p.capacity_reservations), reservation)


class HasTerms(Protocol):
    capacity_reservations: list[ReservationTerm]


def reservation_problems(pools: Sequence[tuple[Sequence[ReservationTerm], Sequence[CapacityType]]]) -> list[str]:
    """Each pool's reservations and capacity types agree: reservations are used where the
    pool allows ``reserved``, and ``reserved`` needs reservations to select."""
    problems = []
    for i, (terms, capacity_types) in enumerate(pools):
        if terms and CapacityType.RESERVED not in capacity_types:
            problems.append(f"pools[{i}].capacityReservations: set, but capacityTypes does not list reserved: add it to launch into them")
        if CapacityType.RESERVED in capacity_types and not terms:
            problems.append(f"pools[{i}].capacityTypes: reserved, but capacityReservations selects none: add a term (an id or tags)")
    return problems
