"""The reservation controller in a running controller: what it reads, shows and does with a
Capacity Block near its end; a read that fails; a restart that finds reserved instances."""

from __future__ import annotations

import logging

from builders import ZONES
from harness import Harness, arrive, binpack_pool

from cloud.errors import CloudError
from cloud.simulated import SimulatedCloud
from nodemanager.controller.reservations import RECLAIM_MARGIN
from nodemanager.model import CapacityType, NodeState
from nodemanager.model.labels import RESERVATION_ID, RESERVATION_TYPE
from nodemanager.model.reservation import Reservation, ReservationKind

RSV = CapacityType.RESERVED
START = 1000.0  # the harness's clock when the workload starts (its arrivals count from then)
LAUNCH_CUTOFF = 1800.0  # a term's launchCutoff by default
ODCR = Reservation("cr-0aaaaaaaaaaaaaaa1", "m.xlarge", ZONES[0], total=2, available=2)
BLOCK = Reservation("cr-0bbbbbbbbbbbbbbb1", "m.xlarge", ZONES[1], total=2, available=2, kind=ReservationKind.CAPACITY_BLOCK, ends_at=START + 7200.0)


def pool(*terms: dict, capacity=(RSV, CapacityType.ON_DEMAND)):
    return binpack_pool(capacity_types=list(capacity), capacity_reservations=list(terms))


def pods(n: int, duration: float | None = None):
    return [arrive(f"p{i}", duration=duration, cpu="3", memory="4Gi") for i in range(n)]


def reserved_nodes(h: Harness) -> dict[str, str]:
    return {
        n.name: n.labels.get(RESERVATION_ID, "") for n in h.controller.state.nodes.values() if n.capacity_type is RSV and n.state is not NodeState.TERMINATED
    }


def test_reservations_are_read_shown_and_counted_and_a_restart_knows_its_reserved_nodes():
    h = Harness(pool({"id": ODCR.id}), arrivals=pods(3), reservations=[(ODCR, 0.0)])
    h.run(120)
    assert sorted(reserved_nodes(h).values()) == [ODCR.id, ODCR.id]  # two of the three pods' nodes: all it holds
    assert len(h.bound()) == 3
    [shown] = h.controller.status()["reservations"]
    assert (shown["id"], shown["total"], shown["available"], shown["left_for_new_nodes"], shown["type"]) == (ODCR.id, 2, 0, 0, "default")
    metrics = h.controller.metrics.exposition().decode()
    assert f'nodemanager_capacity_reservation_instances{{reservation="{ODCR.id}",state="total"}} 2.0' in metrics
    assert f'nodemanager_capacity_reservation_instances{{reservation="{ODCR.id}",state="used"}} 2.0' in metrics
    restarted = h.new_controller()  # a new process: records from the instances' tags
    adopted = [n for n in restarted.state.nodes.values() if n.capacity_type is RSV]
    assert len(adopted) == 2
    assert {(n.labels[RESERVATION_ID], n.labels[RESERVATION_TYPE]) for n in adopted} == {(ODCR.id, "default")}
    assert restarted.state.reservations_left() == {ODCR.id: 0}


def test_a_capacity_blocks_nodes_are_replaced_from_its_drain_time_and_not_before():
    h = Harness(pool({"id": BLOCK.id}), arrivals=pods(2, duration=4 * 3600.0), reservations=[(BLOCK, 0.0)], resume_evicted=True)
    h.run(600)
    assert sorted(reserved_nodes(h).values()) == [BLOCK.id, BLOCK.id]
    drain_at = BLOCK.ends_at - 2400.0
    h.driver.run_until(drain_at - 1)
    assert not h.controller.state.marked  # not before its drain time
    before = set(h.controller.state.nodes)
    h.driver.run_until(drain_at + 1)
    booted = set(h.controller.state.nodes) - before
    assert len(booted) == 2  # what the block's pods need, booted for both nodes at once (one what-if)
    assert not h.controller.state.marked  # the block's nodes keep their pods while those boot
    assert h.controller.state.replacing == booted  # and those are not stopped as idle meanwhile
    h.driver.run_until(BLOCK.ends_at - 1800.0)
    assert h.controller.state.replacing == set()
    assert 'nodemanager_terminations_total{reason="capacity-block"} 2.0' in h.controller.metrics.exposition().decode()
    assert reserved_nodes(h) == {}  # all gone before EC2 starts reclaiming
    assert [e for e in h.cloud.events if e.kind == "capacity-block-reclaimed"] == []
    assert len(h.bound()) == 2  # the pods run elsewhere
    assert all(i.reservation != BLOCK.id for i, _ in h.cloud.all_instances() if i.launched_at >= drain_at)


def test_no_new_node_goes_into_a_block_it_would_be_drained_from_within_half_an_hour():
    """Found by the safety fuzz: a pod was booted into a block 82 s before the block's drain
    time, moved into a second block 462 s before that one's, then onto on-demand: three boots
    for one pod in ten minutes. From its launchCutoff before a block's drain time its capacity
    is not offered for new nodes; the nodes already in it stay until the drain."""
    drain_at = BLOCK.ends_at - 2400.0
    early, late = arrive("early", cpu="3", memory="4Gi"), arrive("late", at=drain_at - LAUNCH_CUTOFF + 300 - START, cpu="3", memory="4Gi")
    h = Harness(pool({"id": BLOCK.id}), arrivals=[early, late], reservations=[(BLOCK, 0.0)], resume_evicted=True)
    h.driver.run_until(drain_at - LAUNCH_CUTOFF + 600)
    placed = {key: h.controller.state.nodes[node] for key, node in h.bound().items()}
    assert placed["default/early"].labels.get(RESERVATION_ID) == BLOCK.id
    assert placed["default/late"].capacity_type is CapacityType.ON_DEMAND
    assert h.controller.state.reservations[BLOCK.id].available == 0  # a block left: no more into it
    assert not h.controller.state.marked  # the node in it stays until the drain


def test_a_launch_cutoff_of_zero_launches_into_a_block_until_its_drain_time():
    drain_at = BLOCK.ends_at - 2400.0
    late = arrive("late", at=drain_at - 600 - START, cpu="3", memory="4Gi")
    h = Harness(pool({"id": BLOCK.id, "launchCutoff": "0s"}), arrivals=[late], reservations=[(BLOCK, 0.0)], resume_evicted=True)
    h.driver.run_until(drain_at - 300)
    [node] = h.bound().values()
    assert h.controller.state.nodes[node].labels.get(RESERVATION_ID) == BLOCK.id


class _Failing(SimulatedCloud):
    """Reads reservations once, then fails to."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.reads = 0

    def reservations(self, queries, now):
        self.reads += 1
        if self.reads > 1:
            raise CloudError("DescribeCapacityReservations: UnauthorizedOperation")
        return super().reservations(queries, now)


def test_a_failed_read_keeps_the_last_one_and_still_drains_a_block_ending(caplog):
    made: list[_Failing] = []

    def cloud(clock):
        made.append(_Failing("test", clock, boot_delay=20.0, reservations=[(BLOCK, 0.0)]))
        return made[0]

    h = Harness(pool({"id": BLOCK.id}), arrivals=pods(1, duration=4 * 3600.0), cloud=cloud, resume_evicted=True)
    with caplog.at_level(logging.WARNING, logger="nodemanager.controller"):
        h.run(300)
    assert made[0].reads > 1
    assert "reading capacity reservations failed; keeping the last read" in caplog.text
    assert BLOCK.id in h.controller.state.reservations
    assert sorted(reserved_nodes(h).values()) == [BLOCK.id]
    h.driver.run_until(BLOCK.ends_at - 1800.0)
    assert reserved_nodes(h) == {}
    assert [e for e in h.cloud.events if e.kind == "capacity-block-reclaimed"] == []


def test_a_reservation_that_ends_is_no_longer_offered_shown_or_counted():
    ending = Reservation("cr-0ccccccccccccccc1", "m.xlarge", ZONES[0], total=2, available=2, ends_at=1000.0 + 600.0)
    h = Harness(pool({"id": ending.id}), reservations=[(ending, 0.0)])
    h.run(60)
    assert ending.id in h.controller.state.catalog.reservations
    assert f'reservation="{ending.id}"' in h.controller.metrics.exposition().decode()
    h.run(700)
    assert h.controller.state.reservations == {}
    assert h.controller.state.catalog.reservations == {}
    assert not [o for t in h.controller.state.catalog for o in t.offerings if o.reservation]
    assert h.controller.status()["reservations"] == []
    assert f'reservation="{ending.id}"' not in h.controller.metrics.exposition().decode()


def test_a_block_whose_replacements_do_not_come_up_in_time_is_drained_by_its_deadline():
    h = Harness(pool({"id": BLOCK.id}), arrivals=pods(2, duration=4 * 3600.0), reservations=[(BLOCK, 0.0)], resume_evicted=True, boot_delay=20.0)
    h.run(600)
    h.cloud.boot_delay = 3 * 3600.0  # from now on nothing boots before the block ends: its pods' new nodes stay booting
    h.driver.run_until(BLOCK.ends_at - 1800.0)
    assert reserved_nodes(h) == {}
    assert [e for e in h.cloud.events if e.kind == "capacity-block-reclaimed"] == []
    ended = [t for i, t in h.cloud.all_instances() if i.reservation == BLOCK.id]
    deadline = BLOCK.ends_at - 1800.0 - RECLAIM_MARGIN
    assert len(ended) == 2
    assert all(t is not None and deadline <= t <= deadline + 60 for t in ended), ended  # waited for them as long as it could
