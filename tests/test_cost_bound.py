"""The simulation's lower bound on cost: each offering counted only for what the workload's
pods could use of it, and the GPU pods' CPU, memory and GPUs covered together by GPU
offerings. Checked against an independent LP (scipy's HiGHS) over capacities worked out
here, never below the bound it replaced, and never above what a fleet paid (the property
tests of ``test_simulate_trust``)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from nodemanager.config import parse_config
from nodemanager.model import Pod, Resources
from nodemanager.model.resources import NVIDIA_GPU
from nodemanager.scaler.binpack import cheapest_per_type
from nodemanager.scaler.cost_bound import CostBound
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


def _independent(views, pods: list[Pod], hours: float) -> float:
    """The bound of one component, solved by HiGHS: the two-resource LP of every pod, and the
    three-resource LP of the GPU pods over the GPU types; the larger."""
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
def test_the_bound_is_the_independent_lps_and_never_below_the_old_one(patterns: list[str], shapes: list[tuple[int, int, int]]) -> None:
    views = _views(patterns)
    pods = [_pod(i, cpu, mib * 2**20, gpus) for i, (cpu, mib, gpus) in enumerate(shapes)]
    bound = CostBound(views, pods)
    runnable = [p for p in pods if any(p.requests.fits(c.allocatable) for c in views[0].candidates)]
    new = bound.usd({p.key: HOUR for p in runnable}) if runnable else 0.0
    if not runnable:
        return
    assert new == pytest.approx(_independent(views, runnable, 1.0), rel=1e-6, abs=1e-9)
    assert new >= _old(views, runnable, 1.0) * (1 - 1e-9)


def test_an_offering_that_holds_none_of_the_pods_does_not_lower_the_bound() -> None:
    """A t3.nano holds no pod of 512Mi: counted whole, its two vCPU for $0.0052 an hour
    priced CPU below any t3 that holds one, and the bound was a fifth lower. Eight such pods
    need eight t3.micro at most ($0.0832 an hour)."""
    views = _views(["t3.*"])
    pods = [_pod(i, 1000, 512 * 2**20) for i in range(8)]
    new, old = CostBound(views, pods).usd({p.key: HOUR for p in pods}), _old(views, pods, 1.0)
    assert new > 1.2 * old
    assert new <= 8 * 0.0104
    assert new == pytest.approx(_independent(views, pods, 1.0), rel=1e-6)


def test_a_gpu_pods_bound_pays_for_the_instance_its_cpu_needs_beside_its_gpu() -> None:
    """4 vCPU and one GPU: a g5.xlarge has the GPU but not 4 vCPU allocatable, so the pod
    needs a g5.2xlarge for its hour; before, the bound was the cheapest GPU-hour."""
    views = _views(["g5.*"])
    pod = _pod(0, 4000, 16 * GIB, 1)
    catalog_price = {c.itype.name: c.price for c in views[0].candidates}
    new = CostBound(views, [pod]).usd({pod.key: HOUR})
    assert new == pytest.approx(min(catalog_price["g5.2xlarge"], catalog_price["g5.4xlarge"]), rel=1e-6)
    assert _old(views, [pod], 1.0) == pytest.approx(catalog_price["g5.xlarge"], rel=1e-6)
