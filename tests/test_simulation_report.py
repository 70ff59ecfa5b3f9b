"""What the simulation report tells an operator beyond totals: the cost of each pool and its
rate, what the waiting was for, and log lines stamped with the run's own time."""

from __future__ import annotations

import io
import json
import logging
import re

from nodemanager.cli import main
from nodemanager.logs import FORMAT, RedactingFormatter

LIMITED = """pools:
  - name: small
    instanceTypes: ["m5.large"]
    limits: {nodes: 1}
  - name: batch
    instanceTypes: ["c5.large"]
    labels: {tier: batch}
    taints: [{key: tier, value: batch, effect: NoSchedule}]
nodes: {idleGrace: 30s}
"""
WORKLOAD = """pods:
  - {name: web, count: 6, duration: 10m, pod: {containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]}}
  - name: job
    count: 2
    duration: 5m
    pod:
      nodeSelector: {tier: batch}
      tolerations: [{key: tier, value: batch, effect: NoSchedule}]
      containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"""


def run(tmp_path, capsys, *extra: str) -> dict:
    (tmp_path / "p.yaml").write_text(LIMITED)
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    assert main(["simulate", "--config", str(tmp_path / "p.yaml"), "--workload", str(tmp_path / "w.yaml"), "--quiet", *extra]) == 0
    return capsys.readouterr()


def test_each_pool_has_its_cost_and_its_mean_rate(tmp_path, capsys):
    report = json.loads(run(tmp_path, capsys, "--json").out)
    cost = report["cost"]
    pools = cost["by_pool"]
    assert set(pools) == {"small", "batch"}
    assert abs(sum(p["usd"] for p in pools.values()) - cost["usd"]) < 1e-3
    assert pools["small"]["usd"] > pools["batch"]["usd"] > 0  # a node held an hour against two 5-minute jobs
    hours = report["simulated_seconds"] / 3600
    assert abs(cost["per_hour"] - cost["usd"] / hours) < 1e-3
    assert abs(pools["small"]["per_hour"] - pools["small"]["usd"] / hours) < 1e-3


def test_a_pool_limit_shows_as_what_the_pods_waited_for(tmp_path, capsys):
    """Five of six pods wait for the one node a limit allows: the p95 alone (3,059 s) said
    nothing of why."""
    report = json.loads(run(tmp_path, capsys, "--json").out)
    causes = report["pods"]["waits_by_cause"]
    assert next(iter(causes)) == "pool limit"  # the largest first
    assert causes["pool limit"]["pods"] == 5
    assert causes["pool limit"]["share"] > 0.9
    assert causes["pool limit"]["pod_hours"] > 2
    assert "node booting" in causes  # every first pod waits for its node
    assert abs(sum(c["share"] for c in causes.values()) - 1) < 1e-3
    text = run(tmp_path, capsys).out
    assert re.search(r"9\d\.\d% of the waiting: pool limit \(5 pod\(s\)\), \d+\.\d\d pod-hours", text)
    assert re.search(r"\$\d+\.\d{4} in pool small, \$\d+\.\d{4}/h", text)


def test_log_lines_carry_the_simulated_time(tmp_path, capsys):
    """The service's handler and format (pytest keeps its own handlers on the root logger,
    so the test puts ours there)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(RedactingFormatter(FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    try:
        run(tmp_path, capsys, "--log-level", "info")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    stamps = re.findall(r"^\+(\d\d):(\d\d):(\d\d\.\d{3}) INFO ", out.getvalue(), flags=re.M)
    assert len(stamps) > 5
    seconds = [int(h) * 3600 + int(m) * 60 + float(s) for h, m, s in stamps]
    assert seconds == sorted(seconds)
    assert seconds[-1] > 600  # the run's hour, not the wall clock's second or two
    assert "bound default/web-1 to " in out.getvalue()
    assert not handler.filters  # the stamp goes with the run


def test_spot_interruptions_are_a_flag_of_simulate(tmp_path, capsys):
    """The rate EC2 reclaims spot instances at, without editing the file: the report says
    it, and the evictions it costs."""
    config = tmp_path / "spot.yaml"
    config.write_text("pools: [{name: s, instanceTypes: [m5.large], capacityTypes: [spot]}]\n")
    (tmp_path / "w.yaml").write_text(WORKLOAD.split("  - name: job", maxsplit=1)[0])
    args = ["simulate", "--config", str(config), "--workload", str(tmp_path / "w.yaml"), "--quiet", "--json"]
    assert main([*args, "--spot-interruptions", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["prices"]["spot_interruptions_per_hour"] == 2
    assert report["pods"]["evicted"]["count"] > 0
    assert report["pods"]["bound"] == 6
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["pods"]["evicted"]["count"] == 0
    assert main([*args, "--spot-interruptions", "-1"]) == 2
    assert "--spot-interruptions: a rate per spot instance per hour from 0 to 100, got -1.0" in capsys.readouterr().err
