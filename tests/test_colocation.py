"""Batch resources feeding the scaler: reconcile loop, estimates, translation, simulation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from builders import CATALOG, node, pod, scaler
from harness import Harness, arrive

from nodemanager.cluster.arrivals import UsageProfile
from nodemanager.cluster.workload import load_workload_file
from nodemanager.config import parse_config
from nodemanager.config.schema import Colocation, Pool
from nodemanager.model import NodeState, PodPhase, Resources
from nodemanager.model.resources import BATCH_CPU, BATCH_MEMORY
from nodemanager.noderesource import ColocationStrategy, NodeMetric
from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, ScalerSettings
from nodemanager.scaler.pools import estimated_batch
from nodemanager.simulator import Simulation

HERE = Path(__file__).parent
GI = 2**30
CONFIG = """
controllerId: colo
cloud: {{provider: simulated, simulated: {{bootDelay: 30s}}}}
cluster: {{source: simulated, simulated: {{registerDelay: 10s, systemCpu: 200m, systemMemory: 512Mi}}}}
nodes: {{idleGrace: 2m}}
colocation: {{enable: {enable}}}
pools:
  - name: general
    instanceTypes: ["m5.*"]
    capacityTypes: [on-demand]
    disruption: {{consolidationPolicy: WhenEmpty}}  # boots compared for the batch tier alone
"""


def batch_pod(name, cpu=1000, memory=2 * GI, **kw):
    base = pod(name, cpu="0", memory="0", **kw)
    return dataclasses.replace(base, requests=Resources({BATCH_CPU: cpu, BATCH_MEMORY: memory}), labels={"koordinator.sh/priority-class": "koord-batch"})


def simulate(enable: bool) -> dict:
    config, catalog = parse_config(CONFIG.format(enable=str(enable).lower()), "t", HERE)
    return Simulation(config, catalog, load_workload_file(HERE / "data" / "colocation-workload.yaml").arrivals).run()


@pytest.mark.heavy
def test_batch_job_runs_on_reclaimed_capacity_and_fewer_nodes_boot():
    on, off = simulate(True), simulate(False)
    assert on["colocation"] == {"enabled": True, "batch_pods": 4, "batch_bound": 4}
    assert off["colocation"] == {"enabled": False, "batch_pods": 4, "batch_bound": 4}
    assert on["pods"]["bound"] == off["pods"]["bound"] == 18
    # Web pods use 30% of their requests: the batch job fits in what they leave.
    assert on["nodes"]["booted"] < off["nodes"]["booted"]
    assert (on["nodes"]["booted"], off["nodes"]["booted"]) == (1, 2)
    assert on["cost"]["usd"] < off["cost"]["usd"]


# -- the reconcile loop --------------------------------------------------------------------


def colocation_harness(**kw):
    pool = Pool(name="cells", packing="binpack", instance_types=["m.4xlarge"], capacity_types=["on-demand"], colocation=Colocation(enable=True, **kw))
    return Harness(pool, arrivals=[arrive(f"w{i}", cpu="2", memory="4Gi") for i in range(3)], register_delay=5)


def test_loop_writes_batch_resources_only_when_need_sync_says_so():
    h = colocation_harness()
    h.run(40)
    [name] = h.controller.state.nodes
    h.controller.colocation_loop()
    node = h.controller.state.nodes[name]
    first = node.allocatable[BATCH_CPU]
    # 16 cores - 40% margin - 200m system - 3 pods x 2 cores used (no usage profile: requests)
    assert first == 16_000 - 6_400 - 200 - 6_000
    when, reason, messages = h.controller.colocation.synced[name]
    assert reason == "never synced"
    assert "nodeCapacity:16000" in messages[BATCH_CPU]
    generation = h.controller.state.nodes.stamp
    h.clock.advance(30)
    h.controller.colocation_loop()
    assert h.controller.state.nodes.stamp == generation  # nothing changed: nothing written
    assert h.controller.colocation.synced[name][0] == when
    doc = next(n for n in h.controller.status()["nodes"] if n["name"] == name)
    assert doc["batch"]["allocatable"][BATCH_CPU] == str(first)
    assert doc["batch"]["reason"] == "never synced"


def test_stale_metrics_remove_batch_resources():
    h = colocation_harness()
    h.run(40)
    [name] = h.controller.state.nodes
    h.controller.colocation_loop()
    assert BATCH_CPU in h.controller.state.nodes[name].allocatable.names()
    frozen = h.cluster.node_metrics()
    h.cluster.node_metrics = lambda: frozen  # the metrics source stops updating
    h.clock.advance(16 * 60)
    h.controller.colocation_loop()
    assert BATCH_CPU not in h.controller.state.nodes[name].allocatable.names()
    assert "degrade" in h.controller.colocation.synced[name][2][BATCH_CPU]


def test_without_colocation_the_loop_wakes_for_a_node_that_offers_batch_resources() -> None:
    """No pool offers batch resources: the loop has nothing to do until a node's record has
    them (the pool turned it off with batch resources still written), and again once it has
    none. Its answer is kept between passes while no record's allocatable changes."""
    pool = Pool(name="cells", packing="binpack", instance_types=["m.4xlarge"], capacity_types=["on-demand"])
    h = Harness(pool, arrivals=[arrive("w0", cpu="2", memory="4Gi")], register_delay=5)
    h.run(40)
    [name] = h.controller.state.nodes
    state, reconciler = h.controller.state, h.controller.colocation
    assert not reconciler.wanted()
    plain = state.nodes[name]
    state.nodes[name] = plain.with_changes(allocatable=plain.allocatable + Resources({BATCH_CPU: 1000}))
    assert reconciler.wanted()
    state.nodes[name] = plain
    assert not reconciler.wanted()


def test_disabled_pool_takes_its_batch_resources_back():
    h = colocation_harness()
    h.run(40)
    [name] = h.controller.state.nodes
    h.controller.colocation_loop()
    h.controller.config.pools[0].colocation.__dict__["enable"] = False  # turned off in the config
    h.controller.colocation_loop()
    assert BATCH_CPU not in h.controller.state.nodes[name].allocatable.names()
    assert BATCH_MEMORY not in h.controller.state.nodes[name].allocatable.names()


# -- the scaler ------------------------------------------------------------------------------


def colo_scaler():
    pool = Pool(name="general", instance_types=["m.4xlarge"], capacity_types=["on-demand"])
    strategy = ColocationStrategy(enable=True)
    settings = ScalerSettings((pool,), scaler(pool).settings.nodes, colocation={"general": strategy})
    return BindingNodeScaler(settings, CATALOG), strategy


def test_new_nodes_offer_batch_capacity_estimated_with_the_request_policy():
    s, strategy = colo_scaler()
    itype = CATALOG["m.4xlarge"]
    estimate = estimated_batch(itype, itype.allocatable, 20 * GI, strategy)
    assert estimate[BATCH_CPU] == 16_000 - 6_400 - (16_000 - itype.allocatable.cpu)
    d = s.compute(ClusterSnapshot((batch_pod("b1"),), ()), 0.0)
    [spec] = d.start
    assert spec.allocatable[BATCH_CPU] == estimate[BATCH_CPU]


def test_high_priority_pods_use_up_the_estimate_where_batch_pods_share_a_new_node():
    s, _ = colo_scaler()
    web = [pod(f"w{i}", cpu="1", memory="1Gi") for i in range(8)]
    jobs = [batch_pod(f"b{i}") for i in range(4)]
    d = s.compute(ClusterSnapshot(tuple(web + jobs), ()), 0.0)
    for spec in d.start:
        on_node = [p for p in web + jobs if p.key in spec.pods]
        hp_cpu = sum(p.requests.cpu for p in on_node)
        batch_cpu = sum(p.requests[BATCH_CPU] for p in on_node)
        assert hp_cpu <= spec.allocatable.cpu
        if batch_cpu:
            assert hp_cpu + batch_cpu <= spec.allocatable[BATCH_CPU]  # byRequest holds


def test_batch_pods_take_reclaimed_capacity_on_ready_nodes_first():
    s, _ = colo_scaler()
    ready = dataclasses.replace(
        node("n1", "m.4xlarge", pool="general", state=NodeState.AVAILABLE),
        allocatable=CATALOG["m.4xlarge"].allocatable + Resources({BATCH_CPU: 5000, BATCH_MEMORY: 20 * GI}),
    )
    d = s.compute(ClusterSnapshot(tuple(batch_pod(f"b{i}") for i in range(4)), (ready,)), 0.0)
    assert d.start == ()
    assert set(d.bindings.values()) == {"n1"}


def test_without_colocation_anywhere_batch_requests_are_ordinary_cpu_and_memory():
    pool = Pool(name="general", instance_types=["m.*"], capacity_types=["on-demand"])
    d = scaler(pool).compute(ClusterSnapshot((batch_pod("b1", cpu=3000, memory=4 * GI),), ()), 0.0)
    [spec] = d.start
    assert spec.allocatable.cpu >= 3000
    assert BATCH_CPU not in spec.allocatable.names()
    assert d.unschedulable == {}


def test_without_colocation_anywhere_a_placed_batch_pods_requests_take_cpu_on_its_node():
    """The pictures of existing nodes see placed batch pods as the scheduler does where no
    pool offers batch resources: their batch requests are ordinary cpu and memory."""
    pool = Pool(name="general", instance_types=["m.*"], capacity_types=["on-demand"])
    allocatable = CATALOG["m.4xlarge"].allocatable
    ready = dataclasses.replace(node("n1", "m.4xlarge", pool="general", state=NodeState.AVAILABLE), allocatable=allocatable)
    placed = dataclasses.replace(batch_pod("b1", cpu=allocatable.cpu - 500, memory=GI), node_name="n1", phase=PodPhase.RUNNING)
    s = scaler(pool)
    d = s.compute(ClusterSnapshot((placed, pod("w", cpu="1", memory="1Gi")), (ready,)), 0.0)
    assert "default/w" not in d.bindings or d.bindings["default/w"] != "n1"  # 500m left on n1: the 1-CPU pod goes to a new node
    assert len(d.start) == 1
    fits = s.compute(ClusterSnapshot((placed, pod("w", cpu="400m", memory="1Gi")), (ready,)), 0.0)
    assert fits.bindings == {"default/w": "n1"}


def test_metrics_follow_usage_profiles():
    h = Harness(
        Pool(name="cells", instance_types=["m.4xlarge"], capacity_types=["on-demand"]),
        arrivals=[dataclasses.replace(arrive("w", cpu="2", memory="4Gi"), usage=UsageProfile(((0, 0.25), (600, 0.5)), ((0, 0.5),)))],
        register_delay=5,
    )
    h.run(40)
    [name] = h.controller.state.nodes
    metric: NodeMetric = h.cluster.node_metrics()[name]
    assert (metric.pods["default/w"].cpu, metric.pods["default/w"].memory) == (500, 2 * GI)
    assert (metric.system_cpu, metric.system_memory, metric.update_time) == (200, 512 * 2**20, h.clock.now())
    h.run(600)
    assert h.cluster.node_metrics()[name].pods["default/w"].cpu == 1000
