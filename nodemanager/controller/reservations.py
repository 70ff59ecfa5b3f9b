"""The reservation controller (``loops.reservations``, 60 s): the capacity reservations the
pools select (``pools[].capacityReservations``), read again from the cloud outside the lock;
then, under it, the instances each has left for the scaler (``ClusterState.reservations``),
the catalog's reserved offerings made again where a reservation came, went or changed, and
the nodes of a Capacity Block near its end replaced ahead of EC2: from the block's
``drainLead`` before its end, what their pods need is booted, then they are drained and
terminated (no new node goes into the block from its ``launchCutoff`` before then). A node keeps its
block's end after the block stops being listed (EC2 lists active reservations only)."""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from cloud.errors import CloudError
from nodemanager.config.reservation_schema import pools_term
from nodemanager.model import Node, NodeState
from nodemanager.model.labels import RESERVATION_ID
from nodemanager.model.reservation import CAPACITY_BLOCK_RECLAIM, Reservation, ReservationKind
from nodemanager.status.metrics import Metrics

if TYPE_CHECKING:
    from cloud.base import CloudClient
    from nodemanager.controller.state import ClusterState

log = logging.getLogger("nodemanager.controller")

ENDS_KEPT = 10_000  # Capacity Blocks whose drain time is remembered after they stop being listed
RECLAIM_MARGIN = 300.0  # a block's nodes are drained at the latest this long before EC2 starts reclaiming it
BOOTING = frozenset({NodeState.CREATING, NodeState.CREATED})  # not Ready yet (nor failed)


class ReservationController:
    def __init__(
        self, state: ClusterState, cloud: CloudClient, metrics: Metrics, reprice: Callable[[], None], replace: Callable[[list[Node], float], tuple[str, ...]]
    ) -> None:
        self.state = state
        self.cloud = cloud
        self.metrics = metrics
        self.reprice = reprice  # the catalog's reserved offerings made again (the operator swaps the scaler)
        self.replace = replace  # a node's pods planned elsewhere and what they need booted: the names booted
        self.drain_at: dict[str, float] = {}  # Capacity Block -> when its nodes are drained
        self.waiting: dict[str, tuple[tuple[str, ...], float, str]] = {}  # block node -> (booted for its pods, drained by then, why)
        self.queries = [t.query() for p in state.config.pools for t in p.capacity_reservations]

    def run(self) -> None:
        if not self.queries:
            return
        now = self.state.clock.now()
        try:
            found = self.cloud.reservations(self.queries, now)  # network: outside the lock
        except CloudError as exc:
            log.warning("reading capacity reservations failed; keeping the last read: %s", exc)
            with self.state.lock:
                self.drain_ending(now)
            return
        with self.state.lock:
            self.apply(found, now)

    def apply(self, found: list[Reservation], now: float) -> None:
        """Call with the controller's lock held."""
        c = self.state
        selected: dict[str, Reservation] = {}
        for r in found:
            term = pools_term(c.config.pools, r)
            if term is None:
                continue
            if r.ends_at is not None and r.kind is ReservationKind.CAPACITY_BLOCK:
                self._remember(r.id, r.ends_at - term.drain_lead)
            ending = r.id in self.drain_at and now >= self.drain_at[r.id] - term.launch_cutoff
            selected[r.id] = dataclasses.replace(r, available=0) if ending else r  # no new node into a block about to end
        shapes = lambda rs: sorted(r.shape for r in rs.values())  # noqa: E731
        changed = shapes(selected) != shapes(c.reservations)
        if changed:
            log.info("capacity reservations: %s", ", ".join(f"{r.id} ({r.instance_type} in {r.zone}, {r.kind})" for r in selected.values()) or "none active")
        for gone in c.reservations.keys() - selected.keys():  # no series for a reservation no longer selected
            for state in ("total", "available", "used"):
                self.metrics.reservation_instances.remove(gone, state)
        c.reservations = selected
        if changed:
            self.reprice()
        ours = Counter(n.labels.get(RESERVATION_ID, "") for n in c.nodes.values() if n.state is not NodeState.TERMINATED)
        for r in selected.values():
            self.metrics.reservation_instances.labels(r.id, "total").set(r.total)
            self.metrics.reservation_instances.labels(r.id, "available").set(r.available)
            self.metrics.reservation_instances.labels(r.id, "used").set(ours[r.id])
        self.drain_ending(now)

    def drain_ending(self, now: float) -> None:
        """Nodes of Capacity Blocks past their drain time: the capacity their pods need is
        booted first; each is marked for termination (drained through the Eviction API,
        then terminated, as for an interruption) once those nodes are Ready, or failed, or
        ``RECLAIM_MARGIN`` before EC2 starts reclaiming the block, whichever comes first."""
        c = self.state
        for name, (booted, deadline, what) in list(self.waiting.items()):
            node = c.nodes.get(name)
            gone = node is None or name in c.marked or node.state in (NodeState.TERMINATING, NodeState.TERMINATED)
            up = all((n := c.nodes.get(b)) is None or n.state not in BOOTING for b in booted)
            if gone or up or now >= deadline:
                if not gone:
                    c.mark_for_termination(name, what, "capacity-block")
                del self.waiting[name]
                c.replacing.difference_update(booted)
        due: dict[str, list[Node]] = {}  # block -> its nodes past its drain time, not handled yet
        for node in c.nodes.values():
            block = node.labels.get(RESERVATION_ID, "")
            when = self.drain_at.get(block)
            if when is None or now < when or node.name in self.waiting or node.name in c.marked or node.state in (NodeState.TERMINATING, NodeState.TERMINATED):
                continue
            due.setdefault(block, []).append(node)
        for block, nodes in due.items():
            self._replace(block, nodes, now)

    def _replace(self, block: str, nodes: list[Node], now: float) -> None:
        """What the pods of a block's nodes need, booted for all of them at once (one what-if
        without them all: their pods cannot count on each other's room)."""
        c = self.state
        r = c.reservations.get(block)
        ends = r.ends_at if r is not None and r.ends_at is not None else None
        what = f"capacity block {block} ends" + (f" at {ends:.0f}" if ends is not None else "") + ": its instances are reclaimed from 30 minutes before"
        names = ", ".join(n.name for n in nodes)
        log.warning("node(s) %s: %s; booting what their pods need, then draining them", names, what)
        for node in nodes:
            c.event("Node", node.name, "CapacityBlockEnding", f"{what}: its pods move once their new nodes are Ready", warning=True)
        booted = self.replace(nodes, now)
        reclaimed = ends - CAPACITY_BLOCK_RECLAIM if ends is not None else now
        for node in nodes:
            self.waiting[node.name] = (booted, max(now, reclaimed - RECLAIM_MARGIN), what)
        c.replacing.update(booted)

    def _remember(self, block: str, when: float) -> None:
        if block not in self.drain_at and len(self.drain_at) >= ENDS_KEPT:
            del self.drain_at[next(iter(self.drain_at))]
        self.drain_at[block] = when

    def status(self) -> list[dict[str, object]]:
        left = self.state.reservations_left()
        return [
            {
                "id": r.id,
                "instance_type": r.instance_type,
                "zone": r.zone,
                "type": r.kind.value,
                "total": r.total,
                "available": r.available,
                "left_for_new_nodes": left.get(r.id, 0),
                "ends_at": r.ends_at,
                "drain_at": self.drain_at.get(r.id) if r.kind is ReservationKind.CAPACITY_BLOCK else None,
            }
            for r in sorted(self.state.reservations.values(), key=lambda r: r.id)
        ]
