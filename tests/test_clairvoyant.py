"""The clairvoyant packer: a real fleet's cost for a workload known in advance. Its plans
are checked here by code of their own (every pod on one node, on an offering it may use, no
node ever over its allocatable, each node billed from its first pod's start to its last
pod's end), its cost never below the lower bound, and its choices on cases worked by hand."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from nodemanager.config import parse_config
from nodemanager.model import CapacityPolicy, Pod, Resources
from nodemanager.scaler.clairvoyant import MINIMUM_BILLED, ClairvoyantPacker, Plan, Run
from nodemanager.scaler.cost_bound import CostBound
from nodemanager.scaler.pools import pool_views

GIB = 2**30
HOUR = 3600.0


def _views(pools: str):
    config, catalog = parse_config(f"pools: {pools}\n", "provider.yaml", Path("."))
    return pool_views(config.pools, catalog, config.nodes.volume_size)


def _pod(i: int, cpu: int, memory: int, policy: CapacityPolicy = CapacityPolicy.ANY) -> Pod:
    return Pod("default", f"p{i}", f"u{i}", Resources({"cpu": cpu, "memory": memory}), capacity_policy=policy)


def check(plan: Plan, runs: list[Run], cells: frozenset[str] = frozenset()) -> list[str]:
    """What is wrong with ``plan`` for ``runs`` (``cells``: the pools whose nodes hold one
    pod), worked out without the packer's code."""
    problems = [f"node of cell pool {n.pool} holds {len(n.pods)} pods" for n in plan.nodes if n.pool in cells and len(n.pods) > 1]
    by_key = {r.pod.key: r for r in runs}
    placed = Counter(key for node in plan.nodes for key in node.pods)
    problems += [f"{key} placed {n} times" for key, n in placed.items() if n > 1]
    problems += [f"{key} neither placed nor reported" for key in by_key if key not in placed and key not in plan.unplaced]
    for node in plan.nodes:
        offering, alloc = node.offering.offering, node.offering.allocatable
        pods = [by_key[k] for k in node.pods]
        for run in pods:
            policy = run.pod.capacity_policy
            if policy is not CapacityPolicy.ANY and policy.value != offering.capacity_type.value:
                problems.append(f"{run.pod.key} on {offering.capacity_type.value}, wants {policy.value}")
        if node.start != min(r.start for r in pods) or node.end != max(r.end for r in pods):
            problems.append(f"node {offering.instance_type} billed {node.start}-{node.end}, not its pods' span")
        for at in sorted({r.start for r in pods}):  # usage only rises at a start
            running = [r for r in pods if r.start <= at < r.end]
            cpu, memory = sum(r.pod.requests.cpu for r in running), sum(r.pod.requests.memory for r in running)
            if cpu > alloc.cpu or memory > alloc.memory or (alloc.pods and len(running) > alloc.pods):
                problems.append(f"node {offering.instance_type} over its allocatable at {at}")
    cost = sum(n.offering.price * max(max(by_key[k].end for k in n.pods) - min(by_key[k].start for k in n.pods), MINIMUM_BILLED) for n in plan.nodes) / HOUR
    if abs(cost - plan.usd()) > 1e-6:
        problems.append(f"cost {plan.usd()} is not its nodes' {cost}")
    return problems


def test_pods_that_start_and_end_together_share_nodes() -> None:
    views = _views("[{name: p, instanceTypes: [m5.large, m5.xlarge], capacityTypes: [on-demand]}]")
    runs = [Run(_pod(i, 900, GIB), 0.0, HOUR) for i in range(4)]
    plan = ClairvoyantPacker(views).plan(runs)
    assert check(plan, runs) == []
    large = next(c.price for c in views[0].candidates if c.offering.instance_type == "m5.large")
    assert plan.usd() == pytest.approx(2 * large)  # two pods per m5.large (or one m5.xlarge at the same price)


def test_a_long_pod_gets_a_small_node_of_its_own_rather_than_keeping_a_big_one() -> None:
    """Three 3-CPU pods for ten minutes and one 500m pod for ten hours arrive together: the
    long one alone on the cheapest node that holds it, not keeping an m5.4xlarge for ten hours."""
    views = _views("[{name: p, instanceTypes: [m5.large, m5.4xlarge], capacityTypes: [on-demand]}]")
    runs = [Run(_pod(i, 3000, 4 * GIB), 0.0, 600.0) for i in range(3)] + [Run(_pod(9, 500, GIB), 0.0, 10 * HOUR)]
    plan = ClairvoyantPacker(views).plan(runs)
    assert check(plan, runs) == []
    prices = {c.offering.instance_type: c.price for c in views[0].candidates}
    assert plan.usd() == pytest.approx(prices["m5.4xlarge"] * 600 / HOUR + prices["m5.large"] * 10)


def test_a_pod_that_may_not_use_spot_is_not_packed_onto_it() -> None:
    views = _views("[{name: p, instanceTypes: [m5.large, m5.xlarge], capacityTypes: [on-demand, spot]}]")
    runs = [Run(_pod(0, 900, GIB), 0.0, HOUR), Run(_pod(1, 900, GIB, CapacityPolicy.ON_DEMAND), 0.0, HOUR)]
    plan = ClairvoyantPacker(views).plan(runs)
    assert check(plan, runs) == []
    assert sorted(n.offering.offering.capacity_type.value for n in plan.nodes) == ["on-demand", "spot"]


def test_a_pod_no_offering_holds_is_reported() -> None:
    views = _views("[{name: p, instanceTypes: [m5.large], capacityTypes: [on-demand]}]")
    runs = [Run(_pod(0, 64000, GIB), 0.0, HOUR), Run(_pod(1, 500, GIB), 0.0, HOUR)]
    plan = ClairvoyantPacker(views).plan(runs)
    assert plan.unplaced == ["default/p0"]
    assert check(plan, runs) == []


def test_a_cell_pools_nodes_each_hold_one_pod_and_cost_at_least_the_bound() -> None:
    """Pods that could share a node, in a pool that gives each its own: as many nodes as
    pods (a fleet sharing them would cost less than the bound, which counts a node a pod)."""
    views = _views("[{name: c, packing: cell, instanceTypes: [m5.large, m5.xlarge], capacityTypes: [on-demand]}]")
    runs = [Run(_pod(i, 900, GIB), 0.0, HOUR) for i in range(4)] + [Run(_pod(9, 900, GIB), 10.0, 2 * HOUR)]
    plan = ClairvoyantPacker(views).plan(runs)
    assert check(plan, runs, frozenset({"c"})) == []
    assert len(plan.nodes) == 5
    bound = CostBound(views, [r.pod for r in runs]).usd({r.pod.key: r.end - r.start for r in runs})
    assert plan.usd() >= bound - 1e-9


@pytest.mark.parametrize("seed", range(8))
def test_random_workloads_get_valid_plans_that_cost_at_least_the_bound(seed: int) -> None:
    rng = random.Random(seed)
    views = _views("[{name: a, instanceTypes: ['m5.*', 'c5.*', 'r5.*'], capacityTypes: [on-demand, spot]}]")
    policies = [CapacityPolicy.ANY, CapacityPolicy.ANY, CapacityPolicy.ON_DEMAND, CapacityPolicy.SPOT]
    runs = []
    for i in range(rng.randint(20, 150)):
        start = rng.uniform(0, 4 * HOUR) if rng.random() < 0.7 else rng.choice([0.0, HOUR])
        pod = _pod(i, rng.choice([250, 500, 1000, 2000, 4000, 7000]), rng.choice([1, 2, 4, 8, 16, 30]) * GIB // 2, rng.choice(policies))
        runs.append(Run(pod, start, start + rng.choice([60.0, 300.0, rng.uniform(60, 6 * HOUR)])))
    plan = ClairvoyantPacker(views).plan(runs)
    assert check(plan, runs) == []
    bound = CostBound(views, [r.pod for r in runs]).usd({r.pod.key: r.end - r.start for r in runs})
    assert plan.usd() >= bound - 1e-9


def test_simulate_reports_the_clairvoyant_fleet_unless_told_not_to(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from nodemanager.cli import main

    (tmp_path / "provider.yaml").write_text("pools: [{name: p, instanceTypes: [m5.large, m5.xlarge], capacityTypes: [on-demand]}]\n")
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "900m", "memory": "1Gi"}}}]}
    (tmp_path / "workload.json").write_text(json.dumps({"pods": [{"name": "job", "count": 4, "duration": "1h", "pod": {"spec": spec}}]}))
    args = ["simulate", "--config", str(tmp_path / "provider.yaml"), "--workload", str(tmp_path / "workload.json"), "--quiet"]
    assert main(args) == 0
    assert "a clairvoyant fleet (knowing every arrival and duration, booting at once, never idle): $" in capsys.readouterr().out
    assert main([*args, "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)["cost"]
    assert cost["lower_bound_usd"] <= cost["clairvoyant_usd"] <= cost["usd"]
    assert main([*args, "--json", "--no-clairvoyant"]) == 0
    assert json.loads(capsys.readouterr().out)["cost"]["clairvoyant_usd"] is None


def test_a_pod_without_a_duration_counts_as_long_as_it_ran_not_from_its_arrival(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Like the bound, the clairvoyant fleet runs a pod without a duration as long as it ran.
    Run until the end from their arrival, the pods of a large snapshot, placed over an hour,
    cost the clairvoyant fleet $37,337 against the real fleet's $16,326. Here 40 pods arrive
    at once and a pool boots two nodes a loop: the last wait minutes the clairvoyant fleet
    would have charged them for."""
    import json

    from nodemanager.cli import main

    (tmp_path / "provider.yaml").write_text(
        "cloud: {provider: simulated, simulated: {bootDelay: 2m}}\nnodes: {maxBootsPerLoop: 2}\n"
        "pools: [{name: p, instanceTypes: [m5.large], capacityTypes: [on-demand]}]\n"
    )
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]}
    (tmp_path / "workload.json").write_text(json.dumps({"pods": [{"name": "web", "count": 40, "pod": {"spec": spec}}]}))
    args = ["simulate", "--config", str(tmp_path / "provider.yaml"), "--workload", str(tmp_path / "workload.json"), "--until", "1h", "--json", "--quiet"]
    assert main(args) == 0
    cost = json.loads(capsys.readouterr().out)["cost"]
    assert cost["lower_bound_usd"] <= cost["clairvoyant_usd"] <= cost["usd"]
    # One pod a node either way: the clairvoyant fleet is the real one's nodes while they held their pods.
    held = cost["usd"] - cost["breakdown"]["booting_and_stopping"] - cost["breakdown"]["empty_nodes"]
    assert cost["clairvoyant_usd"] == pytest.approx(held, rel=0.005)
