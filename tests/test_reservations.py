"""Reserved capacity in planning and configuration: reservations are used before anything is
bought, never past the instances they have left, whatever the pool's size floor, and a
reservation that is spent sends the pods to what else the pool buys (or makes them wait)."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from builders import OD, SPOT, pod, scaler

from cloud.catalog import Catalog
from nodemanager.config import parse_config
from nodemanager.config.schema import Pool
from nodemanager.errors import ConfigError
from nodemanager.model import CapacityPolicy, CapacityType, InstanceType
from nodemanager.model.labels import RESERVATION_ID, RESERVATION_TYPE
from nodemanager.model.pod import OwnerRef
from nodemanager.model.reservation import Reservation, ReservationKind
from nodemanager.scaler import ClusterSnapshot

RSV = CapacityType.RESERVED
ZONES = ("z-1a", "z-1b")
TYPES = (
    InstanceType("a.large", 2, 8192, 0.100, spot_price=0.040, zones=ZONES, max_pods=29),
    InstanceType("m.xlarge", 4, 16384, 0.200, spot_price=0.080, zones=ZONES, max_pods=58),
    InstanceType("m.4xlarge", 16, 65536, 0.800, spot_price=0.320, zones=ZONES, max_pods=234),
)
ODCR = Reservation("cr-0aaaaaaaaaaaaaaa1", "m.xlarge", "z-1a", total=3, available=3, tags={"team": "web"})
BLOCK = Reservation("cr-0bbbbbbbbbbbbbbb1", "a.large", "z-1b", total=2, available=2, kind=ReservationKind.CAPACITY_BLOCK, ends_at=9000.0)
CATALOG = Catalog(TYPES, region="z-1").with_reservations([ODCR, BLOCK])


def pool(capacity=(RSV, OD), terms=({"id": ODCR.id},), **kw: object) -> Pool:
    return Pool(**{"name": "general", "instance_types": ["*"], "capacity_types": list(capacity), "capacity_reservations": list(terms), **kw})


def decide(p: Pool, pods, left=None, catalog=CATALOG):
    return scaler(p, catalog=catalog, max_boots=100).compute(ClusterSnapshot(tuple(pods), (), reservations_left=left or {}), 100.0)


def web(n: int, cpu: str = "3", memory: str = "4Gi"):
    return [pod(f"w{i}", cpu, memory) for i in range(n)]


def by_reservation(decision) -> dict[str, int]:
    out: dict[str, int] = {}
    for spec in decision.start:
        key = spec.labels.get(RESERVATION_ID, spec.capacity_type.value)
        out[key] = out.get(key, 0) + 1
    return out


# -- planning --------------------------------------------------------------------------------------


def test_reserved_capacity_is_used_first_and_never_past_what_it_has_left():
    decision = decide(pool(), web(5))  # five pods that each fill an m.xlarge
    assert by_reservation(decision) == {ODCR.id: 3, "on-demand": 2}
    reserved = [s for s in decision.start if s.capacity_type is RSV]
    assert {(s.instance_type, s.zone) for s in reserved} == {("m.xlarge", "z-1a")}
    assert reserved[0].labels[RESERVATION_TYPE] == "default"
    assert not reserved[0].alternatives  # a reserved launch targets its reservation: no fleet of other offerings
    assert len(decision.bindings) == 5


def test_the_instances_left_are_what_the_snapshot_says():
    assert by_reservation(decide(pool(), web(5), left={ODCR.id: 1})) == {ODCR.id: 1, "on-demand": 4}
    assert RSV not in {s.capacity_type for s in decide(pool(), web(5), left={ODCR.id: 0}).start}


def test_a_pool_only_of_reserved_capacity_makes_the_pods_past_it_wait_saying_why():
    decision = decide(pool(capacity=(RSV,)), web(5))
    assert by_reservation(decision) == {ODCR.id: 3}
    assert len(decision.waiting) == 2
    assert all("cr-0aaaaaaaaaaaaaaa1" in why or "unavailable" in why for why in decision.waiting.values()), decision.waiting
    spent = decide(pool(capacity=(RSV,)), web(2), left={ODCR.id: 0})
    assert (len(spent.start), len(spent.waiting)) == (0, 2)  # they wait for it (its instances may come back), not unschedulable
    assert not spent.unschedulable


def test_only_the_reservations_a_pool_selects_are_its_own():
    decision = decide(pool(terms=({"tags": {"team": "ml"}},)), web(2))  # selects neither (ODCR is team=web, BLOCK untagged)
    assert RSV not in {s.capacity_type for s in decision.start}
    decision = decide(pool(terms=({"tags": {"team": "*"}},)), web(2))
    assert by_reservation(decision) == {ODCR.id: 2}


def owned(p):
    return dataclasses.replace(p, owner=OwnerRef("batch/v1", "Job", p.name))


def test_reserved_capacity_is_used_whatever_the_pools_node_size_floor():
    # Pods on the pool's existing load would make the floor pass over small types; a block
    # of a.large is used all the same.
    decision = decide(pool(terms=({"id": BLOCK.id},), node_size_floor={"share": 1.0, "maxCPU": 16}), [owned(pod(f"p{i}", "1500m", "1Gi")) for i in range(4)])
    assert by_reservation(decision).get(BLOCK.id) == 2
    assert {s.labels[RESERVATION_TYPE] for s in decision.start if s.capacity_type is RSV} == {"capacity-block"}


def test_a_pod_no_controller_makes_again_stays_off_a_capacity_block_unless_it_asks_for_one():
    block_pool = pool(terms=({"id": BLOCK.id},))
    bare = decide(block_pool, [pod("lone", "1500m", "1Gi")])
    assert [s.capacity_type for s in bare.start] == [OD]  # it would be lost when the block ends
    job = decide(block_pool, [owned(pod("job", "1500m", "1Gi"))])
    assert [s.labels.get(RESERVATION_ID) for s in job.start] == [BLOCK.id]  # its Job makes it again elsewhere
    asking = decide(block_pool, [pod("asks", "1500m", "1Gi", selector={RESERVATION_TYPE: "capacity-block"})])
    assert [s.labels.get(RESERVATION_ID) for s in asking.start] == [BLOCK.id]
    odcr = decide(pool(), [pod("lone", "3", "4Gi")])
    assert [s.labels.get(RESERVATION_ID) for s in odcr.start] == [ODCR.id]  # an ODCR does not end under it


def test_a_pod_that_wants_on_demand_may_run_on_reserved_capacity_but_one_that_wants_spot_may_not():
    ondemand = decide(pool(capacity=(RSV, OD, SPOT)), [pod("p", "3", "4Gi", policy=CapacityPolicy.ON_DEMAND)])
    assert [s.capacity_type for s in ondemand.start] == [RSV]
    spot = decide(pool(capacity=(RSV, OD, SPOT)), [pod("p", "3", "4Gi", policy=CapacityPolicy.SPOT)])
    assert [s.capacity_type for s in spot.start] == [SPOT]


def test_a_reservation_of_a_type_the_pool_does_not_buy_is_not_used():
    decision = decide(pool(instance_types=["a.*"]), web(2, cpu="1500m"))
    assert RSV not in {s.capacity_type for s in decision.start}


@pytest.mark.parametrize("seed", range(25))
def test_no_reservation_is_ever_planned_past_what_it_has_left(seed):
    rng = random.Random(seed)
    reservations = [
        Reservation(f"cr-0{i:016x}", rng.choice([t.name for t in TYPES]), rng.choice(ZONES), total=(n := rng.randint(1, 6)), available=n)
        for i in range(rng.randint(1, 4))
    ]
    catalog = Catalog(TYPES, region="z-1").with_reservations(reservations)
    left = {r.id: rng.randint(0, r.total) for r in reservations if rng.random() < 0.7}
    pods = [pod(f"p{i}", rng.choice(["500m", "1500m", "3", "7"]), rng.choice(["1Gi", "4Gi", "12Gi"])) for i in range(rng.randint(1, 60))]
    capacity = rng.choice([(RSV,), (RSV, OD), (RSV, OD, SPOT)])
    decision = decide(pool(capacity=capacity, terms=tuple({"id": r.id} for r in reservations)), pods, left, catalog)
    used = by_reservation(decision)
    for r in reservations:
        assert used.get(r.id, 0) <= left.get(r.id, r.available), (r, used)
    for spec in decision.start:  # every reserved node is of its reservation's type and zone
        if spec.capacity_type is RSV:
            r = next(r for r in reservations if r.id == spec.labels[RESERVATION_ID])
            assert (spec.instance_type, spec.zone) == (r.instance_type, r.zone)
    assert len(decision.bindings) + len(decision.waiting) + len(decision.unschedulable) == len(pods)  # no pod lost


# -- the catalog -------------------------------------------------------------------------------------


def test_reserved_offerings_cost_next_to_nothing_and_keep_the_types_order():
    prices = {o.reservation: o.price for t in CATALOG for o in t.offerings if o.reservation}
    assert 0 < prices[BLOCK.id] < prices[ODCR.id] < 1e-5  # a.large is cheaper than m.xlarge
    assert CATALOG.reservations.keys() == {ODCR.id, BLOCK.id}
    again = CATALOG.with_reservations([BLOCK])  # the last read replaces the one before
    assert {o.reservation for t in again for o in t.offerings if o.reservation} == {BLOCK.id}
    fresher = again.with_prices({"a.large": 0.2}, {}, "refreshed")  # a price refresh keeps reserved offerings at their price
    assert fresher.reservations == again.reservations  # (and what they are of: pools offer only those it knows)
    assert [o.price for o in fresher["a.large"].offerings if o.reservation] == [o.price for o in again["a.large"].offerings if o.reservation]


# -- configuration -------------------------------------------------------------------------------------


def config_problems(pool_yaml: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(f"pools:\n  - name: general\n{pool_yaml}", "provider.yaml", Path("."))
    return caught.value.problems


@pytest.mark.parametrize(
    ("pool_yaml", "expected"),
    [
        ("    capacityReservations: [{id: cr-0aaaaaaaaaaaaaaa1}]\n", "pools[0].capacityReservations: set, but capacityTypes does not list reserved"),
        ("    capacityTypes: [reserved]\n", "pools[0].capacityTypes: reserved, but capacityReservations selects none"),
        ("    capacityTypes: [reserved]\n    capacityReservations: [{id: cr-1}]\n", "pools[0].capacityReservations[0].id"),
        ("    capacityTypes: [reserved]\n    capacityReservations: [{id: cr-0aaaaaaaaaaaaaaa1, tags: {a: b}}]\n", "give either id or tags"),
        ("    capacityTypes: [reserved]\n    capacityReservations: [{}]\n", "give either id or tags"),
        ("    capacityTypes: [reserved]\n    capacityReservations: [{id: cr-0aaaaaaaaaaaaaaa1, ownerId: '123456789012'}]\n", "ownerId goes with tags"),
        ("    capacityTypes: [reserved]\n    capacityReservations: [{tags: {a: b}, drainLead: 10m}]\n", "pools[0].capacityReservations[0].drainLead"),
        ("    capacityTypes: [reserved]\n    capacityReservations: [{tags: {a: b}, price: -1}]\n", "pools[0].capacityReservations[0].price"),
        ("    capacityTypes: [reserved]\n    capacityReservations: [{tags: {a: b}, prize: 1}]\n", "pools[0].capacityReservations[0].prize"),
    ],
)
def test_bad_reservation_settings_are_refused_with_their_key_path(pool_yaml, expected):
    problems = config_problems(pool_yaml)
    assert any(expected in p for p in problems), problems


def test_a_price_override_cannot_price_reserved_capacity():
    with pytest.raises(ConfigError) as caught:
        parse_config("catalog: {priceOverrides: [{capacityTypes: [reserved], multiplier: 0.5}]}\npools: [{name: general}]\n", "provider.yaml", Path("."))
    assert any("priced by its pools' capacityReservations[].price" in p for p in caught.value.problems), caught.value.problems


def test_a_valid_reservation_config_loads():
    config, _ = parse_config(
        "pools:\n  - name: general\n    capacityTypes: [reserved, on-demand]\n"
        "    capacityReservations: [{id: cr-0aaaaaaaaaaaaaaa1}, {tags: {team: ml}, ownerId: '123456789012', price: 0.5, drainLead: 1h}]\n",
        "provider.yaml",
        Path("."),
    )
    terms = config.pools[0].capacity_reservations
    assert terms[0].selects(ODCR)
    assert not terms[1].selects(Reservation("cr-0ccccccccccccccc1", "a.large", "z-1a", 1, 1, tags={"team": "ml"}, owner="999999999999"))
    assert terms[1].selects(Reservation("cr-0ccccccccccccccc1", "a.large", "z-1a", 1, 1, tags={"team": "ml"}, owner="123456789012"))
    assert (terms[1].price, terms[1].drain_lead, terms[0].drain_lead) == (0.5, 3600.0, 2400.0)
