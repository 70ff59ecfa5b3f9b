"""The metrics an operator asks for: how long pods wait and nodes take, how full each pool
is against its limits, what the cloud and the API server refused, who leads."""

from __future__ import annotations

import re

import pytest
from demo import demo_controller
from prometheus_client import generate_latest
from test_cli_service import PROVIDER

from nodemanager.clock import VirtualClock
from nodemanager.status.metrics import Metrics
from nodemanager.tally import ErrorTally


def sample(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, flags=re.M)
    assert match is not None, name
    return float(match.group(1))


def test_the_demo_shows_waits_startup_and_pool_use_against_limits_after_a_minute():
    metrics = Metrics()
    demo_controller(60, metrics=metrics)
    text = generate_latest(metrics.registry).decode()
    assert sample(text, "nodemanager_pod_scheduling_seconds_count") >= 5  # the demo's pods, bound within the minute
    assert sample(text, "nodemanager_pod_scheduling_seconds_sum") > 0
    assert sample(text, "nodemanager_node_startup_seconds_count") >= 1
    assert (
        12 <= sample(text, "nodemanager_node_startup_seconds_sum") / sample(text, "nodemanager_node_startup_seconds_count") <= 30
    )  # 8 s boot + 4 s register, seen at a loop
    assert sample(text, 'nodemanager_pool_nodes{pool="general"}') >= 1
    assert sample(text, 'nodemanager_pool_cpu_cores{pool="general"}') >= 2
    assert sample(text, 'nodemanager_pool_memory_bytes{pool="general"}') >= 2**30
    assert sample(text, 'nodemanager_pool_limit_nodes{pool="general"}') == 20
    assert sample(text, 'nodemanager_pool_limit_cpu_cores{pool="general"}') == 200
    assert sample(text, 'nodemanager_pool_limit_memory_bytes{pool="general"}') == 800 * 2**30
    assert sample(text, 'nodemanager_pool_limit_nodes{pool="jobs"}') == 10
    assert 'nodemanager_pool_limit_cpu_cores{pool="jobs"}' not in text  # no limit: no series
    assert "_created" not in text
    bound = sample(text, "nodemanager_fleet_hourly_bound_dollars")
    assert 0 < bound <= sample(text, "nodemanager_fleet_hourly_cost_dollars")  # no fleet undercuts it, this one included


def test_the_service_exposes_cloud_errors_throttles_and_leadership(tmp_path):
    from nodemanager.config import parse_config
    from nodemanager.service import Service

    config, catalog = parse_config(PROVIDER.read_text().replace("workload: demo-workload.yaml", "workload: null"), "provider.yaml", tmp_path)
    service = Service(config, catalog, "test")
    service.cloud.errors.failed("RunInstances", "RequestLimitExceeded", throttled=True)
    service.cloud.errors.failed("RunInstances", "InsufficientInstanceCapacity")
    text = service.metrics.exposition().decode()
    assert sample(text, 'nodemanager_cloud_errors_total{code="RequestLimitExceeded",operation="RunInstances"}') == 1
    assert sample(text, 'nodemanager_cloud_errors_total{code="InsufficientInstanceCapacity",operation="RunInstances"}') == 1
    assert sample(text, 'nodemanager_cloud_throttled_total{operation="RunInstances"}') == 1
    assert sample(text, "nodemanager_leader") == 1  # no leader election: this replica acts
    assert "# TYPE nodemanager_api_errors_total" not in text  # a simulated cluster has no API server


def test_the_simulated_cloud_counts_what_it_refuses():
    from cloud.errors import Throttled
    from cloud.simulated import SimulatedCloud

    cloud = SimulatedCloud("t", VirtualClock(0.0), throttle_rate=1.0)
    with pytest.raises(Throttled):
        cloud.list_instances()
    assert cloud.errors.errors() == {("DescribeInstances", "RequestLimitExceeded"): 1}
    assert cloud.errors.throttled() == {"DescribeInstances": 1}


def test_the_dashboard_and_alerts_name_only_metrics_that_exist():
    """The chart's dashboard and alerting rules parse, and every nodemanager metric its queries use is one
    /metrics exposes (a renamed metric would leave a panel empty and an alert silent)."""
    import json

    import yaml
    from test_cli_service import REPO

    metrics = Metrics()
    metrics.count_errors(ErrorTally(), "cloud")
    metrics.count_errors(ErrorTally(), "api")
    exposed = set(re.findall(r"^# TYPE (\S+) (\S+)$", metrics.exposition().decode(), flags=re.M))
    names = {name for name, _ in exposed}
    names |= {name + suffix for name, kind in exposed if kind == "histogram" for suffix in ("_bucket", "_sum", "_count")}
    names |= {name + "_total" for name, kind in exposed if kind == "counter" and not name.endswith("_total")}
    monitoring = REPO / "deploy" / "kubernetes" / "monitoring"  # as rendered from the chart
    dashboard = json.loads(yaml.safe_load((monitoring / "dashboard.yaml").read_text())["data"]["nodemanager.json"])
    rules = yaml.safe_load((monitoring / "prometheusrule.yaml").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [r["expr"] for g in rules["spec"]["groups"] for r in g["rules"]]
    assert len(exprs) >= 20
    used = {m for e in exprs for m in re.findall(r"\bnodemanager_[a-z_]+", e)}
    assert used - names == set()
    assert {"nodemanager_pod_scheduling_seconds_bucket", "nodemanager_leader", "nodemanager_pool_limit_cpu_cores"} <= used
    assert {r["alert"] for g in rules["spec"]["groups"] for r in g["rules"]} >= {
        "NodemanagerBootFailures",
        "NodemanagerPodsPendingLong",
        "NodemanagerLeaderAbsent",
        "NodemanagerDisruptionHeld",
    }
