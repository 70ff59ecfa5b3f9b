"""Where a simulated fleet's dollars go: each billed second of each instance in one part, the
parts adding up to the cost to the cent, none below zero where it cannot be, and each part
checked against what a hand count of a small run says it must be."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from bench_modules import load_benchmark

from nodemanager.cluster.workload import parse_workload
from nodemanager.config import parse_config
from nodemanager.cost_breakdown import Billed, OccupancyMeter, Span, breakdown
from nodemanager.model import CapacityPolicy, CapacityType, Pod, Resources
from nodemanager.scaler.cost_bound import CostBound
from nodemanager.scaler.pools import pool_views
from nodemanager.simulator import Simulation

HOUR = 3600.0
corpus = load_benchmark("corpus")


def test_each_billed_second_is_in_one_part() -> None:
    """$1/h, running an hour: 9 minutes empty, 30 holding pods a $0.25 node would hold, 10
    holding pods no offering is known to hold (priced at its own), the rest not registered."""
    billed = Billed("n1", 1.0, 0.0, HOUR, HOUR)
    spans = [Span(60, 600, None), Span(600, 2400, 0.25), Span(2400, 3000, math.inf)]
    parts = breakdown([(billed, spans)], bound=0.1, bound_of_runs=0.15)
    assert parts.empty_nodes == pytest.approx(540 / HOUR)
    assert parts.premium == pytest.approx(1800 * 0.75 / HOUR)
    assert parts.booting_and_stopping == pytest.approx((HOUR - 540 - 1800 - 600) / HOUR)
    assert parts.work_redone == pytest.approx(0.05)
    assert parts.unused_room == pytest.approx((1800 * 0.25 + 600) / HOUR - 0.15)
    assert parts.refunded == 0.0
    assert parts.total() == pytest.approx(1.0)


def test_a_node_still_registered_after_its_instance_ended_counts_only_its_billed_time() -> None:
    """EC2 bills a minute at least: the instance ran 20 s; its node was seen registered from
    10 s to 40 s (the cluster noticed the end later): 10 s holding, 50 s not registered."""
    billed = Billed("n1", 3.6, 100.0, 120.0, 60.0)
    parts = breakdown([(billed, [Span(110, 140, 3.6)])], bound=0.0, bound_of_runs=0.0)
    assert parts.unused_room == pytest.approx(0.01)
    assert parts.booting_and_stopping == pytest.approx(0.05)
    assert parts.total() == pytest.approx(0.06)


def test_a_spot_instance_reclaimed_in_its_first_hour_is_refunded() -> None:
    billed = Billed("n1", 0.9, 0.0, 1000.0, 0.0)
    parts = breakdown([(billed, [Span(20, 1000, 0.9)])], bound=0.2, bound_of_runs=0.2)
    assert parts.refunded == pytest.approx(-0.25)
    assert parts.unused_room == pytest.approx(980 * 0.9 / HOUR - 0.2)
    assert parts.total() == pytest.approx(0.0, abs=1e-12)


def test_the_meter_keeps_one_span_per_state() -> None:
    meter = OccupancyMeter()
    meter.set("n1", 10, True, None)
    meter.set("n1", 20, True, 0.5)
    meter.set("n1", 30, True, 0.5)  # (another pod, the same holder: the same span)
    meter.set("n1", 50, True, None)
    meter.set("n1", 70, False, None)
    meter.set("n2", 60, True, 1.0)
    assert meter.spans("n1", 100) == [Span(10, 20, None), Span(20, 50, 0.5), Span(50, 70, None)]
    assert meter.spans("n2", 100) == [Span(60, 100, 1.0)]
    assert meter.nodes() == {"n2"}


def _bound(pods: list[Pod]) -> tuple[CostBound, dict[str, float]]:
    config, catalog = parse_config(
        "pools: [{name: p, instanceTypes: ['m5.large', 'm5.xlarge', 'm5.2xlarge'], capacityTypes: [on-demand, spot]}]\n", "provider.yaml", Path(".")
    )
    views = pool_views(config.pools, catalog, config.nodes.volume_size)
    prices = {c.offering.instance_type + "/" + c.offering.capacity_type.value: c.price for c in views[0].candidates}
    return CostBound(views, pods), prices


def test_the_holder_is_the_cheapest_offering_every_pod_may_use_that_holds_them_together() -> None:
    anywhere = Pod("default", "a", "a", Resources({"cpu": 1500, "memory": 2**30}))
    on_demand = Pod("default", "b", "b", Resources({"cpu": 1500, "memory": 2**30}), capacity_policy=CapacityPolicy.ON_DEMAND)
    bound, prices = _bound([anywhere, on_demand])
    assert bound.holder_price([anywhere]) == prices["m5.large/spot"]
    assert bound.holder_price([on_demand]) == prices["m5.large/on-demand"]
    assert bound.holder_price([anywhere, on_demand]) == prices["m5.xlarge/on-demand"]  # 3 CPU together; on-demand for b
    stranger = Pod("default", "c", "c", Resources({"cpu": 100}))
    assert bound.holder_price([anywhere, stranger]) is None  # not of the workload
    huge = Pod("default", "d", "d", Resources({"cpu": 64000}))
    assert _bound([huge])[0].holder_price([huge]) is None  # nothing holds it


def _simulate(provider: str, doc: dict) -> tuple[Simulation, dict]:
    config, catalog = parse_config(provider, "provider.yaml", Path("."))
    sim = Simulation(config, catalog, parse_workload(json.dumps(doc), "workload.json"))
    return sim, sim.run()


def test_a_pod_left_alone_on_a_big_node_pays_the_premium_and_the_idle_grace_is_empty() -> None:
    """Four 3-CPU pods arrive together on one m5.4xlarge (its pool comes first); three end
    after 10 minutes, the last after an hour; consolidation off. For the last 50 minutes its node is dearer than the
    m5.xlarge that would hold it: that difference is the premium. After it ends, the node
    waits out its idle grace empty."""
    provider = """
cloud: {provider: simulated, simulated: {bootDelay: 30s}}
cluster: {source: simulated, simulated: {registerDelay: 10s}}
nodes: {idleGrace: 5m}
pools:
  - {name: big, weight: 10, instanceTypes: [m5.4xlarge], capacityTypes: [on-demand], disruption: {consolidationPolicy: WhenEmpty}}
  - {name: small, instanceTypes: [m5.xlarge], capacityTypes: [on-demand]}
"""
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "3", "memory": "4Gi"}}}]}
    short, long = ({"name": n, "count": c, "duration": d, "pod": {"spec": spec}} for n, c, d in (("short", 3, "10m"), ("long", 1, "60m")))
    doc = {"pods": [short, long]}
    sim, report = _simulate(provider, doc)
    assert report["nodes"]["by_instance_type"] == {"m5.4xlarge": 1}
    big, small = (sim.catalog.hourly(t, CapacityType.ON_DEMAND, "us-east-1a") for t in ("m5.4xlarge", "m5.xlarge"))
    parts = report["cost"]["breakdown"]
    loop = 10.0  # (the pool loop: when a change is seen)
    assert parts["premium"] == pytest.approx((big - small) * 50 / 60, abs=(big - small) * loop / HOUR)
    assert parts["empty_nodes"] == pytest.approx(big * 300 / HOUR, abs=big * 3 * loop / HOUR)
    assert parts["booting_and_stopping"] == pytest.approx(big * 10 / HOUR, abs=big * 2 * loop / HOUR)  # registering
    assert parts["work_redone"] == 0.0
    assert sum(parts.values()) == pytest.approx(report["cost"]["usd"], abs=0.005)


@pytest.mark.parametrize(("name", "seed"), [(name, seed) for name in ("batch", "web", "gpu") for seed in (11, 12)])
def test_the_parts_add_up_to_the_cost_on_random_workloads(name: str, seed: int) -> None:
    """Corpus workloads cut to a few of their groups (evictions, spot and GPU pools, DaemonSets,
    zone spread and disruption budgets among them); with spot reclaimed now and then."""
    doc, provider = corpus.workload(name, seed)
    doc = {**doc, "pods": doc["pods"][:: max(1, len(doc["pods"]) // 12)]}
    provider = provider.replace("seed: 1}", "seed: 1, spotInterruptionPerHour: 0.3}")
    _, report = _simulate(provider, doc)
    parts, cost = report["cost"]["breakdown"], report["cost"]["usd"]
    assert report["ended"] == "settled"
    assert sum(parts.values()) == pytest.approx(cost, abs=0.005)
    assert parts["lower_bound"] == report["cost"]["lower_bound_usd"]  # (both rounded down: the one figure)
    assert min(parts["unused_room"], parts["empty_nodes"], parts["booting_and_stopping"], parts["premium"], parts["work_redone"]) >= -0.005
    assert parts["refunded"] <= 0.0
    assert report["cost"]["clairvoyant_usd"] >= report["cost"]["lower_bound_usd"]  # (a real fleet's cost)
    if parts["work_redone"] > 0:  # (redone work the bound prices at nothing, where GPU offerings set it, shows as unused room)
        assert report["pods"]["evicted"]["work_redone_hours"] > 0
