"""Fleet launches against RunInstances in a simulation where capacity is short: every m5
on-demand offering of one zone is out, two are left in another. A fleet falls back within
each launch; RunInstances fails, marks the offering and plans again at the next decision."""

from __future__ import annotations

import json
from pathlib import Path

from nodemanager.cli import main

POOL = """cloud: {provider: simulated, simulated: {capacity: {"m5.*/on-demand/us-east-1a": 0, "m5.*/on-demand/us-east-1b": 2}}}
nodes: {idleGrace: 2m}
pools:
  - name: general
    instanceTypes: ["m5.*", "m6i.*", "c5.*"]
    zones: [us-east-1a, us-east-1b, us-east-1c]
"""
WEB = {"matchLabels": {"app": "web"}}
SPREAD = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": WEB}


def spec(cpu: str, memory: str, **more: object) -> dict:
    return {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **more}


WORKLOAD = {
    "pods": [
        {"name": "web", "count": 60, "pod": {"metadata": {"labels": {"app": "web"}}, "spec": spec("500m", "1Gi", topologySpreadConstraints=[SPREAD])}},
        {"name": "batch", "count": 80, "at": 300, "duration": 1800, "pod": {"spec": spec("1", "2Gi")}},
    ]
}


def simulate(tmp_path: Path, capsys, name: str, launch: str) -> dict:
    config = tmp_path / f"{name}.yaml"
    config.write_text(POOL + (f"    launch: {launch}\n" if launch else ""))
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps(WORKLOAD))
    assert main(["simulate", "--config", str(config), "--workload", str(workload), "--json", "--quiet", "--log-level", "error"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_fleet_boots_fewer_nodes_and_its_pods_wait_less_when_capacity_is_short(tmp_path, capsys):
    single = simulate(tmp_path, capsys, "single", "{method: runInstances}")
    fleet = simulate(tmp_path, capsys, "fleet", "")
    assert single["pods"]["bound"] == fleet["pods"]["bound"] == 140
    assert fleet["nodes"]["booted"] < single["nodes"]["booted"]  # 12 against 18
    assert fleet["pods"]["pending_seconds"]["p95"] < single["pods"]["pending_seconds"]["p95"]  # 50 s against 98 s
    assert fleet["cost"]["usd"] <= single["cost"]["usd"]
    assert (single["nodes"]["launch_failures"], single["nodes"]["launch_fallbacks"]) == (2, 0)
    assert fleet["nodes"]["launch_failures"] < single["nodes"]["launch_failures"]
    assert fleet["nodes"]["launch_fallbacks"] > 0
