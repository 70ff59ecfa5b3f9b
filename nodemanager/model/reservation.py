"""``Reservation``: capacity the account has already bought for one instance type in one
zone (an EC2 On-Demand Capacity Reservation or a Capacity Block for ML), as the cloud last
described it. Nodes launched into one are of capacity type ``reserved``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

# EC2 begins terminating a Capacity Block's instances this long before the block ends
# (its user guide, "Capacity Blocks for ML"); a drain lead longer than it drains them first.
CAPACITY_BLOCK_RECLAIM = 30 * 60.0
# Next to nothing, so a reservation with instances left is always the cheapest offering of
# its type, while larger reserved types still cost more than smaller ones.
RESERVED_PRICE_FRACTION = 1e-7


class ReservationKind(StrEnum):
    DEFAULT = "default"  # an On-Demand Capacity Reservation: open ended, or ends into on-demand
    CAPACITY_BLOCK = "capacity-block"  # its instances are terminated as the block ends


@dataclass(frozen=True, slots=True)
class Reservation:
    id: str
    instance_type: str
    zone: str
    total: int  # instances it holds
    available: int  # not in use, as of ``seen_at``
    kind: ReservationKind = ReservationKind.DEFAULT
    ends_at: float | None = None  # when it ends (None: open ended)
    tags: Mapping[str, str] = field(default_factory=dict)
    owner: str = ""  # the account that owns it (a shared reservation's owner is another)
    seen_at: float = 0.0

    def reclaimed_at(self) -> float | None:
        """When the cloud starts taking its instances back (a Capacity Block's end less
        ``CAPACITY_BLOCK_RECLAIM``); None where it never does."""
        if self.kind is ReservationKind.CAPACITY_BLOCK and self.ends_at is not None:
            return self.ends_at - CAPACITY_BLOCK_RECLAIM
        return None

    @property
    def shape(self) -> tuple[str, str, str, ReservationKind, float | None]:
        """What the offerings made of it depend on (not its count, which changes often)."""
        return (self.id, self.instance_type, self.zone, self.kind, self.ends_at)


@dataclass(frozen=True, slots=True)
class ReservationQuery:
    """What selects reservations (``pools[].capacityReservations``, as the cloud is asked):
    one id, or every tag (``*``: any value of the key) and, if given, the owner."""

    id: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    owner: str | None = None

    def selects(self, reservation: Reservation) -> bool:
        if self.id is not None:
            return reservation.id == self.id
        if self.owner is not None and reservation.owner != self.owner:
            return False
        return all(k in reservation.tags and (v == "*" or reservation.tags[k] == v) for k, v in self.tags.items())
