"""The simulation's lower bound on cost: each pod covered by offerings that hold it whole.
Checked against an independent LP (scipy's HiGHS) of one row per pod over every offering,
built here; never below the bounds it replaced (one LP over the pods' total CPU and memory,
each offering counted for what they could use of it; and GPU-hours at the cheapest GPU);
never above what a fleet paid (the property tests of ``test_simulate_trust``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from nodemanager.config import parse_config
from nodemanager.model import Pod, Resources
from nodemanager.model.resources import NVIDIA_GPU
from nodemanager.scaler import kind_lp
from nodemanager.scaler.binpack import cheapest_per_type
from nodemanager.scaler.cost_bound import CostBound
from nodemanager.scaler.kind_lp import Column, Kind
from nodemanager.scaler.lp import DualSolver, Shape
from nodemanager.scaler.pools import pool_views

GIB = 2**30
HOUR = 3600.0


def _views(patterns: list[str]):
    config, catalog = parse_config(f"pools: [{{name: p, instanceTypes: {patterns}, capacityTypes: [on-demand]}}]\n", "provider.yaml", Path("."))
    return pool_views(config.pools, catalog, config.nodes.volume_size)


def _pod(i: int, cpu: int, memory: int, gpus: int = 0) -> Pod:
    return Pod("default", f"p{i}", f"u{i}", Resources({"cpu": cpu, "memory": memory, **({NVIDIA_GPU: gpus} if gpus else {})}))


def _caps(alloc: Resources, kinds: list[Resources]) -> tuple[float, float] | None:
    """What these requests could use of a node, worked out as a node's pods would: each
    resource is at most what the pods that fit bring with the other resource."""
    fit = [k for k in kinds if all(k.get(r) <= alloc.get(r) for r in k.names())]
    if not fit:
        return None
    cpu, memory = float(alloc.cpu), float(alloc.memory)
    if all(k.memory for k in fit):
        cpu = min(cpu, math.ceil(alloc.memory * max(k.cpu / k.memory for k in fit)))
    if all(k.cpu for k in fit):
        memory = min(memory, math.ceil(alloc.cpu * max(k.memory / k.cpu for k in fit)))
    if alloc.pods:
        cpu, memory = min(cpu, alloc.pods * max(k.cpu for k in fit)), min(memory, alloc.pods * max(k.memory for k in fit))
    return cpu, memory


def _per_pod(views, pods: list[Pod], hours: float) -> float:
    """The bound of one component, solved by HiGHS: a row per pod (its hours on the offerings
    that hold it), every offering of the pool (each zone and capacity type), and a row per
    offering and resource: what its pods ask is at most what its nodes have."""
    offers = list(views[0].candidates)
    pairs = [(i, o) for i, p in enumerate(pods) for o, c in enumerate(offers) if p.requests.fits(c.allocatable)]
    names = sorted({n for p in pods for n in p.requests.names()} | {"pods"})
    width = len(pairs) + len(offers)
    a_eq = np.zeros((len(pods), width))
    a_ub = np.zeros((len(offers) * len(names), width))
    for v, (i, o) in enumerate(pairs):
        a_eq[i, v] = 1.0
        for j, name in enumerate(names):
            a_ub[o * len(names) + j, v] = 1.0 if name == "pods" else pods[i].requests.get(name)
    for o, c in enumerate(offers):
        for j, name in enumerate(names):
            a_ub[o * len(names) + j, len(pairs) + o] = -(c.allocatable.get(name) or (10**9 if name == "pods" else 0))
    scale = np.abs(a_ub).max(axis=1, keepdims=True)
    scale[scale == 0] = 1.0
    prices = [0.0] * len(pairs) + [c.price for c in offers]
    return linprog(prices, A_ub=a_ub / scale, b_ub=np.zeros(len(a_ub)), A_eq=a_eq, b_eq=[hours] * len(pods), method="highs").fun


def _aggregate(views, pods: list[Pod], hours: float) -> float:
    """The bound before: the two-resource LP of every pod, and the three-resource LP of the
    GPU pods over the GPU types, each offering counted for what the pods could use of it; the
    larger."""
    kinds = list({p.requests for p in pods})
    cheapest = cheapest_per_type(views[0].candidates)
    cpu = sum(p.requests.cpu for p in pods) * hours
    memory = sum(p.requests.memory for p in pods) * hours
    rows, prices = [], []
    for c in cheapest:
        if (caps := _caps(c.allocatable, kinds)) is not None:
            rows.append(caps)
            prices.append(c.price)
    two = linprog(prices, A_ub=[[-r[0] for r in rows], [-r[1] / GIB for r in rows]], b_ub=[-cpu, -memory / GIB], method="highs").fun if rows else 0.0
    gpu_pods = [p for p in pods if p.requests.get(NVIDIA_GPU)]
    if not gpu_pods:
        return two
    gpu_kinds = list({p.requests for p in gpu_pods})
    rows3, prices3 = [], []
    for c in cheapest:
        if c.itype.gpu_count and (caps := _caps(c.allocatable, gpu_kinds)) is not None:
            rows3.append((caps[0] / 1000, caps[1] / GIB, c.itype.gpu_count))
            prices3.append(c.price)
    demand = (
        sum(p.requests.cpu for p in gpu_pods) / 1000 * hours,
        sum(p.requests.memory for p in gpu_pods) / GIB * hours,
        sum(p.requests.get(NVIDIA_GPU) for p in gpu_pods) * hours,
    )
    three = linprog(prices3, A_ub=[[-r[i] for r in rows3] for i in range(3)], b_ub=[-d for d in demand], method="highs").fun
    return max(two, three)


def _old(views, pods: list[Pod], hours: float) -> float:
    """The bound before: every offering counted whole, GPUs at the cheapest GPU-hour."""
    cheapest = cheapest_per_type(views[0].candidates)
    shapes = [Shape(c.itype.name, c.allocatable.cpu, c.allocatable.memory, c.price) for c in cheapest]
    lp = DualSolver(shapes).solve(round(sum(p.requests.cpu for p in pods) * hours), round(sum(p.requests.memory for p in pods) * hours)).bound
    gpu_hour = min((c.price / c.itype.gpu_count for c in cheapest if c.itype.gpu_count), default=0.0)
    return max(lp, gpu_hour * sum(p.requests.get(NVIDIA_GPU) for p in pods) * hours)


SHAPES = st.tuples(st.sampled_from([250, 500, 1000, 2000, 4000, 16000]), st.sampled_from([256, 512, 2048, 8192, 32768]), st.sampled_from([0, 0, 1, 4]))
POOLS = st.sampled_from([["t3.*"], ["m5.*", "c5.*", "r5.*", "t3.*"], ["g5.*", "m5.*"], ["g5.*", "g6.*", "c6i.*"], ["c6i.large", "r6i.2xlarge"]])


@settings(max_examples=40, deadline=None)
@given(POOLS, st.lists(SHAPES, min_size=1, max_size=6))
def test_the_bound_is_the_independent_lp_and_never_below_the_old_ones(patterns: list[str], shapes: list[tuple[int, int, int]]) -> None:
    views = _views(patterns)
    pods = [_pod(i, cpu, mib * 2**20, gpus) for i, (cpu, mib, gpus) in enumerate(shapes)]
    bound = CostBound(views, pods)
    runnable = [p for p in pods if any(p.requests.fits(c.allocatable) for c in views[0].candidates)]
    if not runnable:
        return
    new = bound.usd({p.key: 2 * HOUR for p in runnable})
    assert new == pytest.approx(_per_pod(views, runnable, 2.0), rel=1e-6, abs=1e-9)
    assert new >= _aggregate(views, runnable, 2.0) * (1 - 1e-6)
    assert new >= _old(views, runnable, 2.0) * (1 - 1e-6)


def test_an_offering_that_holds_none_of_the_pods_does_not_lower_the_bound() -> None:
    """A t3.nano holds no pod of 512Mi: counted whole, its two vCPU for $0.0052 an hour
    priced CPU below any t3 that holds one, and the bound was a fifth lower. Eight such pods
    need eight t3.micro at most ($0.0832 an hour)."""
    views = _views(["t3.*"])
    pods = [_pod(i, 1000, 512 * 2**20) for i in range(8)]
    new, old = CostBound(views, pods).usd({p.key: HOUR for p in pods}), _old(views, pods, 1.0)
    assert new > 1.2 * old
    assert new <= 8 * 0.0104
    assert new == pytest.approx(_per_pod(views, pods, 1.0), rel=1e-6)


def _prices(views) -> dict[str, float]:
    return {c.itype.name: c.price for c in views[0].candidates}


def test_a_gpu_pods_bound_pays_for_the_instance_its_cpu_needs_beside_its_gpu() -> None:
    """4 vCPU and one GPU: a g5.xlarge has the GPU but not 4 vCPU allocatable, so the pod
    needs a g5.2xlarge for its hour; the oldest bound was the cheapest GPU-hour."""
    views = _views(["g5.*"])
    pod = _pod(0, 4000, 16 * GIB, 1)
    new = CostBound(views, [pod]).usd({pod.key: HOUR})
    assert new == pytest.approx(min(_prices(views)["g5.2xlarge"], _prices(views)["g5.4xlarge"]), rel=1e-6)
    assert _old(views, [pod], 1.0) == pytest.approx(_prices(views)["g5.xlarge"], rel=1e-6)


def test_an_eight_gpu_pod_is_priced_at_an_eight_gpu_instance_not_at_eight_small_ones() -> None:
    """The three-resource LP priced an 8-GPU pod at eight GPUs of the cheapest GPU type that
    holds any of the pods (about half a g6.48xlarge): on the corpus's GPU workloads the
    clairvoyant fleet was 1.36-1.57 × that bound. Each pod must sit whole on one node."""
    views = _views(["g6.*"])
    small, large = _pod(0, 4000, 16 * GIB, 1), _pod(1, 32000, 200 * GIB, 8)
    new = CostBound(views, [small, large]).usd({small.key: HOUR, large.key: HOUR})
    prices = _prices(views)
    eight = min(c.price for c in views[0].candidates if c.itype.gpu_count >= 8 and large.requests.fits(c.allocatable))
    one = min(c.price for c in views[0].candidates if small.requests.fits(c.allocatable))
    assert new == pytest.approx(eight + one, rel=1e-6)
    assert _aggregate(views, [small, large], 1.0) < 0.8 * new
    assert eight == prices["g6.48xlarge"]


def test_kinds_merged_to_bound_the_lps_size_give_a_bound_below_the_exact_one() -> None:
    """Past ``PAIRS_MAX`` (kind, offering) pairs, kinds are merged: requests rounded down and
    offerings joined. The merged LP is smaller and its optimum no higher."""
    columns = [Column(Resources({"cpu": c * 1000, "memory": c * 4 * GIB, "pods": 110}), 0.05 * c) for c in (2, 4, 8, 16)]
    kinds = {Kind(Resources({"cpu": 300 + 97 * i, "memory": (700 + 131 * i) * 2**20}), frozenset(range(i % 3, 4))): 1.0 + i for i in range(40)}
    exact = kind_lp.solve(columns, kinds).usd
    assert kind_lp.merged(kinds) == {kind: kind for kind in kinds}
    for pairs_max, least in ((60, 0.8), (3, 0.0)):  # rounded; then one kind of the least requests
        into = kind_lp.merged(kinds, pairs_max=pairs_max)
        assert len(set(into.values())) < len(kinds)
        merged: dict[Kind, float] = {}
        for kind, hours in kinds.items():
            merged[into[kind]] = merged.get(into[kind], 0.0) + hours
            assert into[kind].requests.fits(kind.requests)
            assert kind.columns <= into[kind].columns
        assert least * exact < kind_lp.solve(columns, merged).usd <= exact * (1 + 1e-9)
    assert sum(len(k.columns) for k in set(kind_lp.merged(kinds, pairs_max=60).values())) <= 60


def test_the_rate_is_the_bound_of_an_hour_of_the_pods_running() -> None:
    views = _views(["m5.*", "c5.*", "r5.*"])
    cpu_heavy = [_pod(i, 4000, 2 * GIB) for i in range(10)]
    memory_heavy = [_pod(100 + i, 500, 16 * GIB) for i in range(10)]
    bound = CostBound(views, cpu_heavy + memory_heavy)
    for running in (cpu_heavy[:2] + memory_heavy, cpu_heavy + memory_heavy[:2], cpu_heavy[:2] + memory_heavy):
        assert bound.rate(running) == pytest.approx(bound.usd({p.key: HOUR for p in running}), rel=1e-9)


def test_an_lp_the_interior_point_method_leaves_unsolved_is_solved_by_the_simplex(monkeypatch: pytest.MonkeyPatch) -> None:
    columns = [Column(Resources({"cpu": 2000, "memory": 8 * GIB, "pods": 29}), 0.1), Column(Resources({"cpu": 4000, "memory": 8 * GIB, "pods": 58}), 0.17)]
    kinds = {Kind(Resources({"cpu": 1000, "memory": GIB}), frozenset({0, 1})): 10.0}
    exact = kind_lp.solve(columns, kinds).usd
    real, methods = scipy.optimize.linprog, []

    def failing_ipm(*args: object, method: str, **kw: object) -> object:
        methods.append(method)
        result = real(*args, method=method, **kw)
        if method == "highs-ipm":
            result.status, result.message = 4, "numerical difficulties"
        return result

    monkeypatch.setattr(scipy.optimize, "linprog", failing_ipm)
    assert kind_lp.solve(columns, kinds).usd == pytest.approx(exact, rel=1e-9)
    assert methods == ["highs-ipm", "highs-ds"]
    assert exact == pytest.approx(10 * 0.17 / 4, rel=1e-6)  # CPU-bound: four pods a node of the second
