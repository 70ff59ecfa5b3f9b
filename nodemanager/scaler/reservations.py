"""Reserved capacity, counted: a reservation holds only so many instances. Planning prices
reserved offerings next to nothing, so the packer fills them first; reservations with no
instance left are not offered at all (``Run.blocked``), and this last step counts the new
nodes a computation planned into each: those past what a reservation has left go to
another offering of their type in their zone that their pods accept (another reservation
with instances left, else what else the pool buys), or are not booted, their pods waiting
for the next computation, which no longer offers the spent reservation."""

from __future__ import annotations

from nodemanager.model import CapacityType
from nodemanager.scaler.pools import Candidate
from nodemanager.scaler.run import NewNode, Run
from nodemanager.scaler.sizing import accepts


def settle(run: Run, nodes: list[NewNode]) -> list[NewNode]:
    """``nodes`` with none past what its reservation has left (see the module)."""
    left = dict(run.left_at_start)
    if not any(n.candidate.offering.reservation for n in nodes):
        return nodes
    kept = []
    for node in nodes:
        reservation = node.candidate.offering.reservation
        if reservation and left.get(reservation, 0) <= 0:
            other = _other(run, node, left)
            if other is None:
                _drop(run, node, reservation)
                continue
            run.moved(node, other)
            reservation = other.offering.reservation
        if reservation:
            left[reservation] = left.get(reservation, 0) - 1
        kept.append(node)
    return kept


def _other(run: Run, node: NewNode, left: dict[str, int]) -> Candidate | None:
    """The cheapest other offering of the node's type in its zone, not blocked, of a
    reservation with instances left or not reserved, that its pods accept."""
    own = node.candidate
    choices = sorted(
        (
            c
            for c in (node.accepted or node.view.candidates)
            if c.itype is own.itype
            and c.offering.zone == own.offering.zone
            and c is not own
            and not run.blocked(c)
            and (c.offering.capacity_type is not CapacityType.RESERVED or left.get(c.offering.reservation, 0) > 0)
        ),
        key=lambda c: (c.price, c.offering.capacity_type.value, c.offering.reservation),
    )
    return next((c for c in choices if not node.info.pods or accepts(run, node, c)), None)


def _drop(run: Run, node: NewNode, reservation: str) -> None:
    for key, pod in list(node.info.pods.items()):
        run.unplace(key)
        run.waiting[key] = f"pool {node.view.name}: capacity reservation {reservation} has no instance left"
        run.unbooted.append(pod)
    run.kept.discard(node.info.name)
    run.forget(node.info.name)
