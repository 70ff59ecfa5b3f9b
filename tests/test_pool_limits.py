"""Packing under a pool's limits. The cheapest fleet is often of small nodes; when a limit
of nodes or CPU binds, small nodes place fewer pods than larger ones would within the same
limit, and the pods left over wait until others finish. The packer places what the limits
allow: the most pods, then the cheapest fleet that does."""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cloud.catalog import Catalog
from nodemanager.cluster.workload import parse_workload
from nodemanager.config import parse_config
from nodemanager.config.schema import Pool
from nodemanager.model import CapacityType, Resources
from nodemanager.scaler import binpack
from nodemanager.scaler.pools import Candidate, capacity_of, pool_views
from nodemanager.simulator import Simulation

GI = 2**30
JOB = Resources({"cpu": 1000, "memory": 2 * GI})


@cache
def t3() -> tuple[Candidate, ...]:
    pool = Pool(name="general", instance_types=["t3.*"], capacity_types=[CapacityType.ON_DEMAND])
    (view,) = pool_views([pool], Catalog.bundled(), 0)
    return tuple(view.candidates)


@cache
def general() -> tuple[Candidate, ...]:
    pool = Pool(name="general", instance_types=["m6i.*", "c6i.*", "r6i.*"], capacity_types=[CapacityType.ON_DEMAND])
    (view,) = pool_views([pool], Catalog.bundled(), 0)
    return tuple(view.candidates)


def placed(counts: list[int], remaining: list[int]) -> int:
    return sum(counts) - sum(remaining)


def test_under_a_node_limit_larger_nodes_place_what_small_ones_would_leave_waiting() -> None:
    budget = binpack.Budget(nodes=2)
    fills, remaining, why = binpack.pack([JOB], [6], t3(), budget)
    assert sum(f.counts[0] * f.copies for f in fills) == 6
    assert remaining == [0]
    assert why == {}
    assert sum(f.copies for f in fills) == 2  # (the cheapest fleet, six t3.medium, would place two)
    assert budget.nodes == 0
    assert [(f.candidate.itype.name, f.counts, f.copies) for f in fills] == [("t3.xlarge", (3,), 2)]  # the cheapest pair that holds all six


def test_under_a_cpu_limit_the_same_cpu_places_more_pods_on_larger_nodes() -> None:
    budget = binpack.Budget(cpu=8000)
    fills, remaining, why = binpack.pack([JOB], [6], t3(), budget)
    assert sum(f.counts[0] * f.copies for f in fills) == 6  # (four t3.medium, the cheapest fleet, would hold four)
    assert remaining == [0]
    assert why == {}
    assert sum(capacity_of(f.candidate.itype)[0] * f.copies for f in fills) <= 8000
    assert budget.cpu is not None
    assert budget.cpu >= 0


def test_pods_a_limit_leaves_over_are_said_to_be_left_by_the_limit() -> None:
    """Before, the types the limit ruled out were dropped one by one until only types too
    small for the pod were left, and the pods were said to fit no type."""
    for cheapest_only in (False, True):
        budget = binpack.Budget(nodes=1)
        if cheapest_only:
            _, remaining, why = binpack._pack([JOB], [40], t3(), budget, per_node=None, tables=binpack.TypeTables())
        else:
            _, remaining, why = binpack.pack([JOB], [40], t3(), budget)
        assert remaining[0] > 0
        assert why == {0: "limit:nodes"}


def test_without_limits_the_packing_is_the_cheapest() -> None:
    requests, counts = [JOB, Resources({"cpu": 250, "memory": GI})], [6, 9]
    plain = binpack.pack(requests, counts, general(), binpack.Budget())
    assert plain == binpack._pack(requests, counts, general(), binpack.Budget(), per_node=None, tables=binpack.TypeTables())


classes = st.lists(
    st.tuples(st.integers(1, 32).map(lambda k: k * 250), st.integers(1, 64).map(lambda k: k * 256 * 2**20), st.integers(1, 30)),
    min_size=1,
    max_size=4,
)
limits = st.tuples(st.none() | st.integers(0, 6), st.none() | st.integers(0, 64_000), st.none() | st.integers(0, 256 * GI))


@settings(max_examples=80, deadline=None)
@given(classes, limits, st.sampled_from([None, 1]))
def test_a_limited_packing_stays_within_the_limits_and_places_at_least_what_the_cheapest_does(
    shapes: list[tuple[int, int, int]], limit: tuple, per_node: int | None
) -> None:
    requests = [Resources({"cpu": cpu, "memory": memory}) for cpu, memory, _ in shapes]
    counts = [n for _, _, n in shapes]
    budget = binpack.Budget(*limit)
    fills, remaining, why = binpack.pack(requests, counts, general(), budget, per_node=per_node)
    cheapest = binpack._pack(requests, counts, general(), binpack.Budget(*limit), per_node=per_node, tables=binpack.TypeTables())
    assert placed(counts, remaining) >= placed(counts, cheapest[1])
    spent = binpack.Budget(*limit)
    for f in fills:
        spent.spend(f.candidate.itype, f.copies)
        assert all(k <= per_node for k in [sum(f.counts)] if per_node is not None)
    assert spent == budget  # the budget is spent by exactly the fills made
    for start, left in zip(limit, dataclasses.astuple(budget), strict=True):
        assert start is None or left >= 0  # never beyond a limit
    for i, n in enumerate(remaining):
        assert n == 0 or why.get(i, "").startswith(("limit:", "fit"))
    assert [counts[i] - n for i, n in enumerate(remaining)] == [sum(f.counts[i] * f.copies for f in fills) for i in range(len(counts))]


def test_a_pool_limited_to_two_nodes_runs_six_jobs_at_once_in_simulation() -> None:
    config, catalog = parse_config(
        "controllerId: t\ncloud: {provider: simulated}\ncluster: {source: simulated}\n"
        "pools: [{name: general, instanceTypes: ['t3.*'], capacityTypes: [on-demand], limits: {nodes: 2}}]\n",
        "provider.yaml",
        Path("."),
    )
    workload = "pods: [{name: job, count: 6, duration: 10m, pod: {spec: {containers: [{name: c, resources: {requests: {cpu: '1', memory: 2Gi}}}]}}}]"
    report = Simulation(config, catalog, parse_workload(workload, "workload.yaml")).run()
    assert report["pods"]["bound"] == 6
    assert report["pods"]["pending_seconds"]["max"] < 120  # before: four of them waited 10 and 20 minutes
    assert report["nodes"]["peak"] <= 2
