"""The scaler benchmark's own checks: its independent verifier catches a node that cannot
hold its DaemonSet pods, a small run with EKS's DaemonSets places everything, and the check
of Ray's plans catches a node Ray overfilled and a pod it lost."""

from __future__ import annotations

import dataclasses
import importlib
import random
import sys
from types import SimpleNamespace

import pytest
from bench_modules import load_benchmark

from nodemanager.model import Pod, Resources

bench = load_benchmark("scaler")


def test_the_verifier_counts_pods_on_a_node_left_without_room_for_its_daemonsets() -> None:
    catalog = bench.karpenter_catalog()
    itype = catalog["fake-it-0"]  # 1 vCPU
    full = Pod("bench", "p0", "u0", Resources({"cpu": itype.allocatable.cpu, "memory": 1}))
    spec = SimpleNamespace(name="n0", instance_type=itype.name, taints=())
    decision = SimpleNamespace(start=[spec], bindings={full.key: "n0"})
    assert bench.verify([full], decision, catalog, []) == 0
    assert bench.verify([full], decision, catalog, bench.EKS_DAEMONSETS) == 1  # 255m of daemons do not fit beside it


def test_a_small_run_with_eks_daemonsets_places_every_pod_above_the_bound() -> None:
    result = bench.run("karpenter", 300, 42, "eks")
    assert result["unplaced"] == 0
    assert result["cost_ratio"] >= 1.0  # type: ignore[operator]  # the bound is one


def test_a_warm_scaler_plans_as_a_cold_one() -> None:
    """--warm times a second decision; what the scaler kept from the first changes no plan."""
    cold, warm = bench.run("mixed", 400, 42), bench.run("mixed", 400, 42, warm=True)
    assert (warm["nodes"], warm["cost_per_hour"], warm["unplaced"]) == (cold["nodes"], cold["cost_per_hour"], 0)
    assert warm["warm"] is True


def test_the_lp_bound_pays_each_nodes_daemonset_overhead() -> None:
    types = list(bench.karpenter_catalog())[:2]
    without = bench.lp_lower_bound(types, 10_000, 1 << 30)
    with_daemons = bench.lp_lower_bound(types, 10_000, 1 << 30, (255, 320 << 20))
    assert with_daemons > without


def test_karpenter_mix_places_every_pod_without_a_constraint_violation() -> None:
    result = bench.run("karpenter-mix", 300, 42)
    assert result["unplaced"] == 0
    assert result["violations"] == 0
    assert result["nodes"] >= 60  # the 60 hostname-anti-affine pods need a node each
    assert set(result["pods_by_zone"]["anti-affinity"]) == set(bench.KARPENTER_ZONES)  # type: ignore[index]


def test_the_mix_verifier_refuses_anti_affine_neighbours_and_a_skewed_order() -> None:
    mix = importlib.import_module("karpenter_mix")
    anti = [mix._pod("hostname-anti-affinity", f"a{i}", random.Random(i)) for i in range(2)]
    zones = {"n1": "z1", "n2": "z2"}
    assert mix.constraint_violations(anti, {"bench/a0": "n1", "bench/a1": "n2"}, zones) == []
    assert mix.constraint_violations(anti, {"bench/a0": "n1", "bench/a1": "n1"}, zones) == ["a1"]
    spread = [dataclasses.replace(mix._pod("zone-spread", f"s{i}", random.Random(0)), labels={"my-label": "x"}) for i in range(3)]
    spread = [dataclasses.replace(s, spread=((mix.ZONE, frozenset({("my-label", "x")}), 1),)) for s in spread]
    # 2 in z1 before z2 has one: the second is refused; z1, z2, z1 is a valid order
    assert mix.constraint_violations(spread, {"bench/s0": "n1", "bench/s1": "n1", "bench/s2": "n2"}, zones) == ["s1"]
    assert mix.constraint_violations(spread, {"bench/s0": "n1", "bench/s2": "n2", "bench/s1": "n1"}, zones) == []


def test_busy_places_every_pod_and_its_check_refuses_an_overfull_node() -> None:
    busy = importlib.import_module("busy")
    for mix in (False, True):
        result = busy.run(60, 1600, 80, mix, 42)
        assert (result["unplaced"], result["overfull_nodes"]) == (0, 0)
        assert result["on_existing_nodes"] > 0
        if mix:  # half of them too big for any node's free memory
            assert result["new_nodes"] > 0
    catalog, running = busy.disruption.cluster(2, 20, 42, busy.RUNNING)
    target = running.nodes[0]
    hog = Pod("bench", "hog", "hog", Resources({"cpu": target.allocatable.cpu, "memory": 1}))
    decision = SimpleNamespace(start=[], bindings={hog.key: target.name})
    assert busy.check(catalog, running, [hog], decision)["overfull_nodes"] == 1


def test_the_scale_verifier_refuses_a_pod_not_running_and_a_node_asked_more_than_it_has(stub) -> None:  # type: ignore[no-untyped-def]
    """``benchmarks/e2e_scale.py`` judges from what the API server holds."""
    from kube_helpers import api_client
    from kubernetes import client

    scale = load_benchmark("e2e_scale")
    stub.register_node("n1", "aws:///us-east-1a/i-1", cpu="1", memory="4Gi")
    for name in ("a", "b"):
        stub.create_pod(name, "scale", cpu="750m", memory="256Mi", node="n1")
        stub.set_pod_phase("scale", name, "Running")
    stub.create_pod("c", "scale", cpu="100m", memory="64Mi")
    problems = scale.verify(client.CoreV1Api(api_client(stub)), "scale", 3)
    assert problems == ["c: Pending on None", "node n1: its pods ask 1500m and 536870912 bytes, more than it has"]
    assert scale.verify(client.CoreV1Api(api_client(stub)), "scale", 4)[0] == "3 pods, not 4"


def _fake_ray(tmp_path, monkeypatch, fills: list) -> None:  # type: ignore[no-untyped-def]
    """Ray's planner replaced by a script that reads the problem and answers with ``fills``
    (what it put on each node it added)."""
    plan = {"ray": "fake", "seconds": 0.5, "nodes": {}, "unfulfilled": 0, "fills": fills}
    for name, _ in fills:
        plan["nodes"][name] = plan["nodes"].get(name, 0) + 1
    script = tmp_path / "ray_planner.py"
    script.write_text(f"import json, sys\njson.load(sys.stdin)\nprint(json.dumps({plan!r}))\n")
    monkeypatch.setattr(bench, "RAY_PLANNER", script)


def test_the_ray_check_counts_a_node_ray_overfilled_and_refuses_a_plan_that_loses_a_pod(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    catalog = bench.karpenter_catalog()
    small, large = catalog["fake-it-0"], catalog["fake-it-3"]  # 1 and 4 vCPU
    shapes = [(600, 1 << 28), (600, 1 << 28)]
    pod = {"CPU": 0.6, "memory": 1 << 28, "pods": 1}
    _fake_ray(tmp_path, monkeypatch, [["fake-it-3", [[pod, 2]]]])
    held = bench.ray_plan(sys.executable, [small, large], shapes, [])
    assert (held["ray_nodes"], held["ray_overfull"], held["ray_cost_per_hour"]) == (1, 0, large.on_demand_price)
    _fake_ray(tmp_path, monkeypatch, [["fake-it-0", [[pod, 2]]]])  # 1.2 CPU on a node of less than 1
    assert bench.ray_plan(sys.executable, [small, large], shapes, [])["ray_overfull"] == 1
    _fake_ray(tmp_path, monkeypatch, [["fake-it-3", [[pod, 1]]]])  # one pod nowhere
    with pytest.raises(SystemExit, match="not the pods asked"):
        bench.ray_plan(sys.executable, [small, large], shapes, [])


@pytest.mark.parametrize("types", ["small11", "newer10", "families10", "all"])
def test_one_decision_for_a_thousand_mixed_pods_costs_at_most_1_04_times_the_lp_bound(types: str) -> None:
    """Fills that leave CPU or memory idle made the packer buy a third kind of node for the pods
    left over: 1.05 x the bound with the 11 small types, 1.09 with the newer 101."""
    result = bench.run("mixed", 1000, 1, types=types)
    assert result["unplaced"] == 0
    assert 1.0 <= result["cost_ratio"] <= 1.04  # type: ignore[operator]
