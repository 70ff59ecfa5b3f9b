"""The packer skips the fills of a type that cannot win a round (its whole node is worth less
per dollar, at the LP's dual prices, than the best fill found so far): it must choose exactly
what it chooses when every type of the round is filled."""

from __future__ import annotations

from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from cloud.catalog import Catalog
from nodemanager.config.schema import Pool
from nodemanager.model import CapacityType, Resources
from nodemanager.scaler import binpack
from nodemanager.scaler.pools import Candidate, pool_views

GI = 2**30


@cache
def _candidates() -> tuple[Candidate, ...]:
    pool = Pool(name="general", instance_types=["m6i.*", "c6i.*", "r6i.*"], capacity_types=[CapacityType.ON_DEMAND])
    (view,) = pool_views([pool], Catalog.bundled(), 0)
    return tuple(view.candidates)


classes = st.lists(
    st.tuples(st.integers(1, 64).map(lambda k: k * 125), st.integers(1, 256).map(lambda k: k * 128 * 2**20), st.integers(1, 40)),
    min_size=1,
    max_size=8,
)


def _plan(requests: list[Resources], counts: list[int], per_node: int | None) -> tuple:
    fills, remaining, why = binpack.pack(requests, counts, _candidates(), binpack.Budget(), per_node=per_node)
    return [(f.candidate.offering.key, f.counts, f.copies) for f in fills], remaining, why


@settings(max_examples=60, deadline=None)
@given(classes, st.sampled_from([None, 1]))
def test_skipping_types_that_cannot_win_changes_no_plan(shapes: list[tuple[int, int, int]], per_node: int | None) -> None:
    requests = [Resources({"cpu": cpu, "memory": memory}) for cpu, memory, _ in shapes]
    counts = [n for _, _, n in shapes]
    pruned = _plan(requests, counts, per_node)
    original = binpack._cannot_win
    binpack._cannot_win = lambda *_: False  # every type of every round filled
    try:
        assert _plan(requests, counts, per_node) == pruned
    finally:
        binpack._cannot_win = original


budgets = st.tuples(st.none() | st.integers(0, 6), st.none() | st.integers(0, 64_000), st.none() | st.integers(0, 256 * GI))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(classes, budgets, st.sampled_from([None, 1])), min_size=1, max_size=6))
def test_a_packing_kept_is_the_packing_made_afresh(calls: list[tuple[list[tuple[int, int, int]], tuple, int | None]]) -> None:
    """Tables that packed before (the same pods, other pods, other budgets) answer as fresh
    ones do, and spend the same from the budget; each call asked twice."""
    tables = binpack.TypeTables()
    for shapes, limits, per_node in calls * 2:
        requests = [Resources({"cpu": cpu, "memory": memory}) for cpu, memory, _ in shapes]
        counts = [n for _, _, n in shapes]
        kept, fresh = binpack.Budget(*limits), binpack.Budget(*limits)
        answer = binpack.pack(requests, counts, _candidates(), kept, per_node=per_node, tables=tables)
        assert answer == binpack.pack(requests, counts, _candidates(), fresh, per_node=per_node)
        assert kept == fresh
        answer[0].clear()  # a caller's changes to what it got reach no later answer
        answer[1][0] += 1
    assert len(tables.packs) == len({(tuple(map(tuple, s)), limits, p) for s, limits, p in calls})


def _uniform_cost(requests: list[Resources], counts: list[int]) -> float:
    """The cheapest fleet of one type alone holding every pod (largest first, filled one node
    after another): worked out here, independently of the packer's rounds."""
    vectors = binpack.Vectors(requests)
    order = sorted(range(len(requests)), key=lambda i: (-requests[i].cpu, -requests[i].memory))
    best = float("inf")
    for c in binpack.cheapest_per_type(_candidates()):
        room, remaining, cost = vectors.of(c.allocatable), list(counts), 0.0
        while any(remaining):
            fill = binpack.greedy_fill(room, vectors.requests, remaining, None, order)
            if not any(fill):
                break
            remaining = [k - n for k, n in zip(remaining, fill, strict=True)]
            cost += c.price
        if not any(remaining):
            best = min(best, cost)
    return best


def test_nine_pods_of_two_cpus_get_nodes_sized_for_them_not_one_small_node_each() -> None:
    """Ranked by their whole allocatable per dollar, the largest types were tried first for
    nine pods and, holding only those nine, lost to the smallest type that holds one: nine
    c6i.xlarge, $1.53/h, where three c6i.2xlarge hold them for $1.02/h."""
    fills, remaining, _ = binpack.pack([Resources({"cpu": 2000, "memory": 4 * GI})], [9], _candidates(), binpack.Budget())
    assert remaining == [0]
    assert sum(f.counts[0] * f.copies for f in fills) == 9
    assert sum(f.candidate.price * f.copies for f in fills) <= 3 * 0.34 + 1e-9


@settings(max_examples=80, deadline=None)
@given(classes.filter(lambda shapes: sum(n for *_, n in shapes) <= binpack.UNIFORM_MAX_PODS))
def test_a_few_pods_never_cost_more_than_the_cheapest_fleet_of_one_type(shapes: list[tuple[int, int, int]]) -> None:
    requests = [Resources({"cpu": cpu, "memory": memory}) for cpu, memory, _ in shapes]
    counts = [n for _, _, n in shapes]
    fills, remaining, _ = binpack.pack(requests, counts, _candidates(), binpack.Budget())
    uniform = _uniform_cost(requests, counts)
    if uniform < float("inf"):
        assert remaining == [0] * len(counts)
        assert sum(f.candidate.price * f.copies for f in fills) <= uniform * (1 + 1e-9)


@settings(max_examples=40, deadline=None)
@given(st.floats(0, 1e-4), st.floats(0, 1e-11), st.integers(1, 10**6), st.integers(1, 2**40), st.integers(1, 40))
def test_the_first_few_of_a_ranking_are_the_first_of_the_whole_ranking(cpu_price: float, memory_price: float, cpu: int, memory: int, first: int) -> None:
    tables = binpack.TypeTables()
    _, shapes, _ = tables.get(_candidates(), binpack.Vectors([Resources({"cpu": 1})]))
    assert tables.ranking(shapes, cpu_price, memory_price, cpu, memory, first=first) == tables.ranking(shapes, cpu_price, memory_price, cpu, memory)[:first]


def test_the_types_a_fleet_of_one_type_is_tried_for_are_those_no_type_as_cheap_outdoes() -> None:
    vectors = binpack.Vectors([Resources({"cpu": 1})])
    tables = binpack.TypeTables()
    pool, _, alloc = tables.get(_candidates(), vectors)
    kept = tables.undominated(pool, alloc)
    for c in pool:
        outdone = any(o is not c and o.price <= c.price and all(a >= b for a, b in zip(alloc[o.itype.name], alloc[c.itype.name], strict=True)) for o in pool)
        strictly = any(
            o.price < c.price or alloc[o.itype.name] != alloc[c.itype.name]
            for o in pool
            if o is not c and o.price <= c.price and all(a >= b for a, b in zip(alloc[o.itype.name], alloc[c.itype.name], strict=True))
        )
        if not outdone:
            assert c in kept
        elif strictly:
            assert c not in kept
