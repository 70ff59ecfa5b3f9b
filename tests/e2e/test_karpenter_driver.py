"""The side-by-side benchmark's Karpenter driver (benchmarks/peers/karpenter, built with the
control plane): what it reads is what the benchmark wrote (instance types, offerings and
allocatable as Karpenter's own structures hold them; pods and DaemonSet pods as decoded), and a
small plan of Karpenter's passes the independent check."""

from __future__ import annotations

import json
import subprocess

import pytest
from bench_modules import load_benchmark
from controlplane import binaries

check_mod = load_benchmark("plan_check")
side = load_benchmark("side_by_side")
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def driver() -> str:
    return str(binaries()["karpenter"])


def run(driver: str, problem: dict, *args: str) -> dict:
    done = subprocess.run([driver, *args], input=json.dumps(problem), capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_problem_round_trips_through_karpenters_types(driver: str) -> None:
    problem = side.problem(side.Case("karpenter-mix", 60, "11", daemonsets=True))
    echoed = run(driver, problem, "--echo")
    # allocatable read back from Karpenter's InstanceType (capacity less its overhead): no overhead added
    assert echoed["instanceTypes"] == [
        {k: t[k] for k in ("name", "architecture", "cpuMillis", "memoryBytes", "pods", "offerings")} for t in problem["instanceTypes"]
    ]
    assert len(echoed["pods"]) == len(problem["pods"]) == 60
    for sent, back in zip(problem["pods"], echoed["pods"], strict=True):
        assert (back["metadata"]["namespace"], back["metadata"]["name"], back["metadata"]["labels"]) == (
            sent["metadata"]["namespace"],
            sent["metadata"]["name"],
            sent["metadata"]["labels"],
        )
        assert check_mod.requests(back) == check_mod.requests(sent)
        for field in ("affinity", "topologySpreadConstraints"):
            assert back["spec"].get(field) == sent["spec"].get(field)
    assert [(d["metadata"]["name"], d["spec"].get("tolerations"), check_mod.requests(d)) for d in echoed["daemonSetPods"]] == [
        (d["metadata"]["name"], d["spec"].get("tolerations"), check_mod.requests(d)) for d in problem["daemonSetPods"]
    ]


def test_a_small_karpenter_plan_passes_the_check_above_the_bound(driver: str) -> None:
    problem = side.problem(side.Case("mixed", 300, "11", daemonsets=True))
    out = run(driver, problem)
    assert out["karpenter"] == "v1.14.0"
    assert out["solveSeconds"] > 0
    assert all(claim["launch"] is not None for claim in out["nodeClaims"])
    report = check_mod.check(problem, side.karpenter_plan(out))
    assert (report.placed, report.unaccounted, report.total_violations) == (300, 0, 0)
    assert report.cost_per_hour >= side.lower_bound(problem)


def test_a_problem_that_is_not_json_is_refused(driver: str) -> None:
    done = subprocess.run([driver], input="{not json", capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 2
    assert "not valid JSON" in done.stderr


def test_karpenter_plans_onto_nodes_already_running(driver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(side, "BUSY_NODES", 12)
    problem = side.problem(side.Case("karpenter-mix", 200, "101", busy=True))
    out = run(driver, problem)
    assert set(out["existingNodes"]) <= {n["name"] for n in problem["existingNodes"]}
    assert sum(len(pods) for pods in out["existingNodes"].values()) > 0
    report = check_mod.check(problem, side.karpenter_plan(out))
    assert (report.unaccounted, report.violations["overfull"]) == (0, [])
    assert report.placed + report.unplaced == 200


def test_a_dedicated_pool_is_honoured_alike_by_both_schedulers(driver: str) -> None:
    """The tainted case: both put the pool's taint and label on every new node, leave the pods
    that do not tolerate it unplaced (and only those), and neither counts the DaemonSet that
    does not tolerate it; the bound counts neither either."""
    problem = side.problem(side.Case("mixed", 200, "11", daemonsets=True, tainted=True))
    untolerating = {f"bench/{p['metadata']['name']}" for p in problem["pods"] if not p["spec"].get("tolerations")}
    assert len(untolerating) == 20
    bound = side.lower_bound(problem)
    for plan in (side.karpenter_plan(run(driver, problem)), side.solve_nodemanager(problem)):
        report = check_mod.check(problem, plan)
        assert set(plan["unplaced"]) == untolerating
        assert (report.placed, report.unaccounted, report.total_violations) == (180, 0, 0)
        assert report.cost_per_hour >= bound > 0
    untainted = dict(problem, taints=[], daemonSetPods=[d for d in problem["daemonSetPods"] if d["metadata"]["name"] != "node-exporter"])
    assert side.lower_bound(untainted) > bound  # the 20 pods counted, the pool's taint or not
