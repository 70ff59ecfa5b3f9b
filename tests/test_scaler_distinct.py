"""Many pods of distinct sizes: the packer plans for groups of similar requests (its work
grows with classes x nodes; 10,000 pods of 10,000 sizes once took 537 s for one decision),
then the pods themselves are placed."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_benchmarks import bench

from nodemanager.config.schema import Limits, NodeDefaults, Pool
from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, ScalerSettings, binpack


def _request(cpu: int, memory: int, gpus: int) -> Resources:
    return Resources({"cpu": cpu, "memory": memory, **({"nvidia.com/gpu": gpus} if gpus else {})})


requests_st = st.lists(
    st.builds(_request, st.integers(1, 64_000), st.integers(1, 1 << 38), st.integers(0, 2)),
    min_size=1,
    max_size=200,
)


@pytest.fixture
def widest(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many classes each call of the packer was given."""
    seen: list[int] = []
    original = binpack.pack

    def recording(requests, *args, **kwargs):
        seen.append(len(requests))
        return original(requests, *args, **kwargs)

    monkeypatch.setattr(binpack, "pack", recording)
    return seen


def test_many_distinct_requests_are_packed_in_groups_and_every_pod_bound(widest: list[int]) -> None:
    result = bench.run("distinct", 400, 42)
    assert result["distinct_pod_shapes"] == 400
    assert result["unplaced"] == 0  # the benchmark's verifier re-adds every pod to its node
    assert max(widest) <= binpack.MAX_CLASSES
    assert result["cost_ratio"] <= 1.12  # type: ignore[operator]


@given(requests_st, st.integers(1, 64))
@settings(max_examples=60, deadline=None)
def test_similar_groups_every_request_once_within_the_limit(requests: list[Resources], limit: int) -> None:
    counts = [1 + i % 3 for i in range(len(requests))]
    groups, typical = binpack.similar(requests, counts, limit)
    assert sorted(i for g in groups for i in g) == list(range(len(requests)))
    assert len(groups) <= max(limit, 1) or len(groups) == len({frozenset(r.names()) for r in requests})
    for members, rep in zip(groups, typical, strict=True):
        assert len({r.names() for r in (requests[i] for i in members)}) == 1  # the same resources
        pods = sum(counts[i] for i in members)
        for name in rep.names():
            total = sum(requests[i].get(name) * counts[i] for i in members)
            assert rep.get(name) * pods >= total > (rep.get(name) - 1) * pods  # the mean, rounded up


def _finest_within(requests: list[Resources], limit: int) -> list[list[int]]:
    """The grouping ``similar`` is defined to give, computed the plain way: at each factor
    in turn (from 1%, growing by half), group by every resource's log-bin; the first within
    the limit (or one group per set of resource names)."""
    import math
    from collections import defaultdict

    logs = [tuple((n, math.log(v)) for n, v in sorted(r.items()) if v > 0) for r in requests]
    widest = max((v for amounts in logs for _, v in amounts), default=0.0)
    step = 0.01
    while True:
        scale = math.log1p(step)
        found: dict[tuple, list[int]] = defaultdict(list)
        for i, amounts in enumerate(logs):
            found[tuple((n, int(v / scale)) for n, v in amounts)].append(i)
        if len(found) <= limit or scale > widest:
            return list(found.values())
        step *= 1.5


@given(requests_st, st.lists(st.integers(1, 64), min_size=1, max_size=3, unique=True))
@settings(max_examples=60, deadline=None)
def test_one_sweep_gives_each_limit_the_grouping_a_sweep_of_its_own_would(requests: list[Resources], limits: list[int]) -> None:
    """``similar_groupings`` sweeps once for several limits and skips the factors at which
    one resource alone has too many bins: the groupings are those of the plain definition."""
    counts = [1] * len(requests)
    got = binpack.similar_groupings(requests, counts, sorted(limits, reverse=True))
    assert [groups for groups, _ in got] == [_finest_within(requests, limit) for limit in sorted(limits, reverse=True)]


@given(requests_st, requests_st)
@settings(max_examples=60, deadline=None)
def test_a_request_fits_the_frontier_exactly_when_it_fits_some_capacity(capacities: list[Resources], requests: list[Resources]) -> None:
    largest = binpack.frontier(capacities)
    assert set(largest) <= set(capacities)
    for r in requests + capacities:
        assert any(r.fits(c) for c in largest) == any(r.fits(c) for c in capacities)


def test_a_pool_limit_leaves_the_rest_waiting_with_the_limit_named(widest: list[int]) -> None:
    catalog = bench.karpenter_catalog()
    pool = Pool(name="small", instance_types=["fake-it-3"], capacity_types=[CapacityType.ON_DEMAND], limits=Limits(nodes=2))
    rng = random.Random(7)
    pods = [Pod("b", f"p{i}", f"u{i}", Resources({"cpu": rng.randint(100, 1500), "memory": rng.randint(1 << 26, 1 << 30)})) for i in range(300)]
    scaler = BindingNodeScaler(ScalerSettings((pool,), NodeDefaults(default_instance_type="fake-it-3")), catalog)
    decision = scaler.compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert len(decision.start) == 2
    assert 0 < len(decision.bindings) < 300
    for spec in decision.start:
        held = [p for p in pods if decision.bindings.get(p.key) == spec.name]
        assert sum((p.requests for p in held), Resources()).fits(catalog["fake-it-3"].allocatable)
    left = [p for p in pods if p.key not in decision.bindings]
    assert all("limit on nodes reached" in decision.waiting[p.key] for p in left)
    assert max(widest) <= binpack.MAX_CLASSES
