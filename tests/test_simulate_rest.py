"""A simulation is settled only when its fleet is at rest: no idle node left waiting to be
stopped (its idle grace, the Empty budgets), no disruption under way or waiting out a
cooldown. Before, a run ended "settled" with nodes holding only DaemonSet pods still up,
waiting for their budget, and the report's cost missed their tail."""

from __future__ import annotations

import json
from pathlib import Path

from bench_modules import load_benchmark

from nodemanager.cluster.workload import parse_workload
from nodemanager.config import parse_config
from nodemanager.simulator import REST_LIMIT, Simulation

AGENT = load_benchmark("corpus").AGENT  # a node agent on every node
APART_TERM = {"labelSelector": {"matchLabels": {"app": "big"}}, "topologyKey": "kubernetes.io/hostname"}
APART = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [APART_TERM]}}


def _play(budgets: str = "") -> dict:
    """Twenty pods that keep apart, each on a node of its own with the agent, all ending after 30 minutes."""
    config, catalog = parse_config(
        f"""
cloud: {{provider: simulated, simulated: {{bootDelay: 40s}}}}
cluster: {{source: simulated, simulated: {{registerDelay: 20s}}}}
pools: [{{name: general, instanceTypes: ["m5.*"], capacityTypes: [on-demand]{budgets}}}]
""",
        "provider.yaml",
        Path("."),
    )
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "3", "memory": "4Gi"}}}], "affinity": APART}
    pods = [{"name": f"big-{i}", "duration": "30m", "pod": {"metadata": {"labels": {"app": "big"}}, "spec": spec}} for i in range(20)]
    return Simulation(config, catalog, parse_workload(json.dumps({"pods": pods, "daemonSets": [AGENT]}), "w.json")).run()


def test_a_run_ends_settled_only_once_every_idle_node_its_budget_held_is_stopped() -> None:
    report = _play()
    assert report["ended"] == "settled"
    assert report["nodes"]["booted"] == 20
    assert report["nodes"]["terminated"] == 20  # 10% at a time: 2 per round of the Empty budget


def test_a_fleet_that_never_comes_to_rest_ends_unsettled_and_says_why() -> None:
    report = _play(', disruption: {budgets: [{nodes: "0", reasons: [Empty]}]}')
    assert report["ended"] == "unsettled"
    assert "idle node(s) wait to be stopped" in report["unsettled"]
    assert report["nodes"]["terminated"] == 0
    assert report["simulated_seconds"] >= REST_LIMIT
