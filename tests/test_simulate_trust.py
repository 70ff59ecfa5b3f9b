"""``simulate`` runs to the end: pods that run forever are placed before it stops, a workload
spanning months is not cut at a hidden cap, and a run that cannot finish says which pods
wait and why, and exits non-zero."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodemanager.cli import main
from nodemanager.cluster.workload import parse_workload
from nodemanager.config import parse_config
from nodemanager.simulator import Simulation

PROVIDER = """
controllerId: trust
cloud: {provider: simulated, simulated: {bootDelay: 60s}}
cluster: {source: simulated, simulated: {registerDelay: 10s}}
nodes: {idleGrace: 10s, maxBootsPerLoop: 1}
pools:
  - name: general
    instanceTypes: ["m5.large"]
    capacityTypes: [on-demand]
    limits: {nodes: %(nodes)s}
"""

# Each pod needs a node of its own (m5.large: 2 vCPU); no duration: they run forever, as every
# pod of a `kubectl get pods -o yaml` list does.
FOREVER = """
pods:
  - name: web
    count: %(count)s
    at: %(at)s
    pod: {containers: [{name: c, resources: {requests: {cpu: 1500m, memory: 1Gi}}}]}
"""


def simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: str, workload: str, *extra: str) -> tuple[int, dict]:
    (tmp_path / "provider.yaml").write_text(provider)
    (tmp_path / "workload.yaml").write_text(workload)
    code = main(["simulate", "--config", str(tmp_path / "provider.yaml"), "--workload", str(tmp_path / "workload.yaml"), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_pods_that_run_forever_are_all_placed_before_the_run_stops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One boot per loop and a 60 s boot: placing 40 pods takes longer than the idle grace
    the old run waited after "settling" (it counted only pods with a duration)."""
    code, report = simulate(tmp_path, capsys, PROVIDER % {"nodes": 100}, FOREVER % {"count": 40, "at": 0})
    assert code == 0
    assert report["ended"] == "settled"
    assert report["pods"]["bound"] == report["pods"]["total"] == 40
    assert report["pods"]["running"] == 40
    assert report["pods"]["unfinished"] == []
    assert report["nodes"]["booted"] == 40
    assert report["cost"]["usd"] >= report["cost"]["lower_bound_usd"] > 0  # pods waited long: the old bound counted that


def test_the_cost_is_what_ec2_bills_from_running_not_from_the_launch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One pod for 1,000 s on one m5.large: billed from when the instance is ``running`` (60 s
    after its launch here) until it is terminated, the boot delay not included."""
    workload = "pods:\n  - {name: job, duration: 1000s, pod: {containers: [{name: c, resources: {requests: {cpu: 1500m, memory: 1Gi}}}]}}\n"
    code, report = simulate(tmp_path, capsys, PROVIDER % {"nodes": 1}, workload)
    assert code == 0
    assert report["nodes"]["booted"] == report["nodes"]["terminated"] == 1
    sim = Simulation(*parse_config(PROVIDER % {"nodes": 1}, "provider.yaml", tmp_path), parse_workload(workload, "workload.yaml"), timeline=True)
    sim.run()
    ((instance, ended),) = sim.cloud.all_instances()
    assert ended is not None
    price = sim.catalog.hourly("m5.large", instance.capacity_type, instance.zone)
    running = instance.launched_at + 60
    assert report["cost"]["usd"] == pytest.approx(price * (ended - running) / 3600, abs=1e-4)
    assert report["cost"]["usd"] < price * (ended - instance.launched_at) / 3600 - 1e-3  # what the old report charged
    # --plot's cost rate is the same bill's: nothing while the instance is pending
    assert sim.timeline is not None
    rates = [(s.at, s.cost_rate) for s in sim.timeline.samples]
    assert any(instance.launched_at <= at < running for at, _ in rates)
    assert any(running <= at < ended for at, _ in rates)
    assert rates == [(at, price if running <= at < ended else 0.0) for at, _ in rates]


def test_a_workload_spanning_months_is_not_cut_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Pods arriving after day 30 were never seen (a hidden 30-day cap); the empty months
    before them are skipped, not simulated loop by loop."""
    late = "  - {name: late, at: 3600h, duration: 1h, pod: {containers: [{name: c, resources: {requests: {cpu: 1500m}}}]}}\n"
    workload = FOREVER % {"count": 2, "at": "0s"} + late
    code, report = simulate(tmp_path, capsys, PROVIDER % {"nodes": 100}, workload.replace("count: 2", "count: 2\n    duration: 1h"))
    assert code == 0
    assert report["pods"]["bound"] == report["pods"]["total"] == 3
    assert report["simulated_seconds"] > 3600 * 3600


def test_pods_that_can_never_be_placed_end_the_run_with_their_reason_and_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A node limit of 2 for 3 pods: the third waits for good (a limit can clear, so it is
    not "unschedulable"). The run stops once nothing can change, lists it and exits 1."""
    (tmp_path / "provider.yaml").write_text(PROVIDER % {"nodes": 2})
    (tmp_path / "workload.yaml").write_text(FOREVER % {"count": 3, "at": 0})
    code = main(["simulate", "--config", str(tmp_path / "provider.yaml"), "--workload", str(tmp_path / "workload.yaml"), "--json"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert code == 1
    assert report["ended"] == "stalled"
    assert report["pods"]["bound"] == 2
    [waiting] = report["pods"]["unfinished"]
    assert waiting["pod"].startswith("default/web-")
    assert "limit on nodes" in waiting["reason"]
    assert "1 pod(s) still waiting" in captured.err


def test_an_explicit_until_ends_the_run_there_and_lists_what_still_waits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = simulate(tmp_path, capsys, PROVIDER % {"nodes": 100}, FOREVER % {"count": 10, "at": 0}, "--until", "90s")
    assert code == 0
    assert report["ended"] == "until"
    assert report["simulated_seconds"] == 90
    assert report["pods"]["bound"] + len(report["pods"]["unfinished"]) == 10
    assert report["pods"]["unfinished"]


# -- the cost bound -----------------------------------------------------------------------------

BOUND_PROVIDER = """
controllerId: bound
cloud: {provider: simulated, simulated: {bootDelay: %(boot)s}}
cluster: {source: simulated, simulated: {registerDelay: 10s}}
nodes: {idleGrace: 30s, maxBootsPerLoop: %(boots)s}
pools:
  - name: general
    instanceTypes: ["m5.*", "c5.*", "r5.*"]
    capacityTypes: [on-demand, spot]
"""
# A tainted spot cell pool beside an on-demand bin-pack one: pods that may use only the
# general pool must not be priced at the cell pool's spot prices, and a cell pod holds a
# node of its own.
TWO_POOLS = (
    BOUND_PROVIDER.replace("[on-demand, spot]", "[on-demand]")
    + """  - name: batch
    packing: cell
    instanceTypes: ["c5.large", "c5.xlarge", "m5.large"]
    capacityTypes: [spot]
    labels: {workload: batch}
    taints: [{key: workload, value: batch, effect: NoSchedule}]
"""
)
BATCH_SPEC = "nodeSelector: {workload: batch}, tolerations: [{key: workload, value: batch, effect: NoSchedule}], "


def play(workload: str, boot: str = "30s", boots: int = 10, provider: str = BOUND_PROVIDER) -> dict:
    from nodemanager.cluster.workload import parse_cluster_objects, parse_workload
    from nodemanager.config import parse_config
    from nodemanager.simulator import Simulation

    config, catalog = parse_config(provider % {"boot": boot, "boots": boots}, "provider.yaml", Path("."))
    return Simulation(config, catalog, parse_workload(workload), None, parse_cluster_objects(workload)).run()


entries = st.lists(
    st.tuples(
        st.integers(1, 4),
        st.sampled_from(["100m", "500m", "1", "3"]),
        st.sampled_from(["256Mi", "2Gi", "6Gi"]),
        st.integers(0, 600),
        st.one_of(st.none(), st.integers(60, 900)),
    ),
    min_size=1,
    max_size=5,
)


def workload_of(drawn: list, batch: list[bool] | None = None) -> str:
    lines = ["pods:"]
    for i, (count, cpu, memory, at, duration) in enumerate(drawn):
        run = f", duration: {duration}" if duration is not None else ""
        spec = BATCH_SPEC if batch and batch[i % len(batch)] else ""
        pod = f"{{{spec}containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}', memory: {memory}}}}}}}]}}"
        lines.append(f"  - {{name: g{i}, count: {count}, at: {at}{run}, pod: {pod}}}")
    return "\n".join(lines) + "\n"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries, st.integers(1, 10))
def test_no_run_costs_less_than_its_bound(drawn: list, boots: int) -> None:
    report = play(workload_of(drawn), boots=boots)
    assert report["ended"] == "settled"
    assert report["cost"]["usd"] >= report["cost"]["lower_bound_usd"] >= 0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries, st.lists(st.booleans(), min_size=1, max_size=5), st.integers(1, 10))
def test_no_run_costs_less_than_its_bound_with_a_spot_cell_pool_beside(drawn: list, batch: list[bool], boots: int) -> None:
    report = play(workload_of(drawn, batch), boots=boots, provider=TWO_POOLS)
    assert report["ended"] == "settled"
    assert report["cost"]["usd"] >= report["cost"]["lower_bound_usd"] >= 0


def test_pods_are_priced_only_at_offerings_they_may_use() -> None:
    """The README's day cost 4.9 times its bound: every pod was priced at the cheapest
    offering of any pool, the batch pool's spot prices for pods that may run only
    on-demand. Now an on-demand pod counts on-demand prices, and a cell pod a node of its own."""
    from nodemanager.config import parse_config
    from nodemanager.model import CapacityType
    from nodemanager.scaler.lp import DualSolver, Shape

    OD, SPOT = CapacityType.ON_DEMAND, CapacityType.SPOT

    report = play(workload_of([(2, "1", "2Gi", 0, 3600), (1, "500m", "256Mi", 0, 1800)], [False, True]), provider=TWO_POOLS)
    config, catalog = parse_config(TWO_POOLS % {"boot": "30s", "boots": 10}, "provider.yaml", Path("."))
    allowed = catalog.matching(**config.pools[0].type_query())
    general = [(t, catalog.hourly(t.name, OD, z)) for t in catalog if t.name in allowed for z in t.zones]
    # each type counted for what 1-CPU/2Gi pods could use of it (see test_cost_bound)
    allocatable = {t.name: t.allocatable_for(config.nodes.volume_size) for t, _ in general}
    shapes = [
        Shape(t.name, min(a.cpu, a.memory * 1000 // 2**31, a.pods * 1000), min(a.memory, a.cpu * 2**31 // 1000, a.pods * 2**31), p)
        for t, p in general
        if (a := allocatable[t.name]).cpu >= 1000 and a.memory >= 2**31
    ]
    on_demand = DualSolver(shapes).solve(2 * 1000 * 3600, 2 * 2 * 2**30 * 3600).bound / 3600
    cell = min(catalog.hourly(name, SPOT, z) for name in ("c5.large", "c5.xlarge", "m5.large") for z in catalog[name].zones) / 2  # half an hour
    assert report["cost"]["lower_bound_usd"] == pytest.approx(on_demand + cell, abs=1e-4)
    assert report["cost"]["usd"] >= report["cost"]["lower_bound_usd"]


def test_the_bound_does_not_depend_on_how_fast_pods_were_placed() -> None:
    """Pods with a duration: a configuration with slow boots places them later, and its
    bound is the same (the old bound counted pods while they waited, so slower was "fairer")."""
    workload = workload_of([(4, "1", "2Gi", 0, 1800), (3, "3", "6Gi", 600, 3600), (2, "500m", "256Mi", 900, 600)])
    fast, slow = play(workload, boot="10s", boots=10), play(workload, boot="3m", boots=1)
    assert slow["pods"]["pending_seconds"]["max"] > fast["pods"]["pending_seconds"]["max"]
    assert slow["cost"]["lower_bound_usd"] == pytest.approx(fast["cost"]["lower_bound_usd"], rel=1e-6)


def test_a_cloud_that_never_has_capacity_ends_the_run_stalled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Boots fail, offerings expire from the unavailable list and are tried again, forever:
    that is not progress. The run stops after an hour without a pod placed."""
    provider = (PROVIDER % {"nodes": 100}).replace("simulated: {bootDelay: 60s}", "simulated: {bootDelay: 60s, capacity: {'*': 0}}")
    (tmp_path / "provider.yaml").write_text(provider)
    (tmp_path / "workload.yaml").write_text(FOREVER % {"count": 2, "at": 0})
    code = main(["simulate", "--config", str(tmp_path / "provider.yaml"), "--workload", str(tmp_path / "workload.yaml"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["ended"] == "stalled"
    assert report["simulated_seconds"] < 2 * 3600
    assert len(report["pods"]["unfinished"]) == 2


def test_a_run_freezes_what_exists_for_the_collector_and_thaws_it_after() -> None:
    """What exists when a run starts is frozen for the cycle collector while it runs (full
    collections walk only what the run makes), and thawed after, even when the run fails:
    a process that simulates again and again keeps no frozen garbage."""
    import gc

    from nodemanager.cluster.workload import parse_workload
    from nodemanager.config import parse_config
    from nodemanager.simulator import Simulation

    config, catalog = parse_config(BOUND_PROVIDER % {"boot": "30s", "boots": 10}, "provider.yaml", Path("."))
    workload = "pods: [{name: p, duration: 60s, pod: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}}]"
    frozen: list[int] = []
    assert gc.get_freeze_count() == 0
    Simulation(config, catalog, parse_workload(workload)).run(progress=lambda *_: frozen.append(gc.get_freeze_count()))
    assert min(frozen) > 0
    assert gc.get_freeze_count() == 0

    def fail(*_: float) -> None:
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError):
        Simulation(config, catalog, parse_workload(workload)).run(progress=fail)
    assert gc.get_freeze_count() == 0


def test_the_load_integrated_at_every_step_is_the_load_summed_afresh() -> None:
    """The simulation sums the registered nodes' allocatable again only when a node
    registered or left or a record changed what the census counts, and the running pods'
    requests when pods changed: at every step, what it integrates is what a fresh sum gives
    (nodes register, pods come and go, nodes stop once idle)."""
    from nodemanager.cluster.workload import parse_workload
    from nodemanager.config import parse_config
    from nodemanager.simulator import Simulation

    config, catalog = parse_config(BOUND_PROVIDER % {"boot": "30s", "boots": 2}, "provider.yaml", Path("."))
    workload = """
pods:
  - {name: a, count: 3, duration: 120s, pod: {containers: [{name: c, resources: {requests: {cpu: 1500m, memory: 1Gi}}}]}}
  - {name: b, at: 90s, count: 5, duration: 300s, pod: {containers: [{name: c, resources: {requests: {cpu: 700m, memory: 3Gi}}}]}}
"""
    sim = Simulation(config, catalog, parse_workload(workload))
    integrate, checked = sim._integrate, []

    def checking(dt: float) -> None:
        integrate(dt)
        if dt > 0:
            nodes = [sim.controller.state.nodes[n] for n in sim.cluster.nodes if n in sim.controller.state.nodes]
            running = [s.pod for s in sim.cluster.pods.values() if s.pod.node_name and not s.pod.is_terminal]
            fresh = (
                sum(p.requests.cpu for p in running),
                sum(p.requests.memory for p in running),
                sum(n.allocatable.cpu for n in nodes),
                sum(n.allocatable.memory for n in nodes),
            )
            assert sim._load == fresh, sim.clock.now()
            checked.append(fresh)

    sim._integrate = checking  # type: ignore[method-assign]
    sim.run()
    assert len({load[2] for load in checked}) >= 3  # nodes came and went while it was checked


def test_a_node_that_leaves_the_cluster_leaves_the_allocatable_summed_though_its_record_stays() -> None:
    from nodemanager.cluster.workload import parse_workload
    from nodemanager.config import parse_config
    from nodemanager.simulator import Simulation

    config, catalog = parse_config(BOUND_PROVIDER % {"boot": "30s", "boots": 2}, "provider.yaml", Path("."))
    sim = Simulation(config, catalog, parse_workload("pods: [{name: a, pod: {containers: [{name: c, resources: {requests: {cpu: 1500m}}}]}}]"))
    sim.run(until=120)
    [name] = sim.cluster.nodes
    record = sim.controller.state.nodes[name]
    assert sim._allocatable_now() == record.allocatable.cpu_memory()
    sim.cluster.remove_node(name)  # (the controller has not heard of it yet: the record stands)
    assert sim.controller.state.nodes[name] is record
    assert sim._allocatable_now() == (0, 0)


def test_a_simulation_keeps_no_metrics_and_decides_as_a_scraped_controller_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline simulator's controller drops its metric updates (no one can scrape
    them), and what it decides does not depend on that: the same run with scraped metrics
    reports the same, and those metrics saw the run (its loops, decisions and boots)."""
    from nodemanager import simulator
    from nodemanager.status.metrics import Metrics

    workload = workload_of([(3, "1", "2Gi", 0, 600), (2, "500m", "256Mi", 120, None), (4, "3", "6Gi", 300, 300)])
    config, catalog = parse_config(BOUND_PROVIDER % {"boot": "30s", "boots": 10}, "provider.yaml", Path("."))
    quiet = Simulation(config, catalog, parse_workload(workload))
    unscraped = quiet.run()
    assert b"nodemanager_" not in quiet.controller.metrics.exposition()

    made: list[Metrics] = []

    def scraped(scraped: bool) -> Metrics:
        made.append(Metrics())
        return made[-1]

    monkeypatch.setattr(simulator, "Metrics", scraped)
    report = Simulation(config, catalog, parse_workload(workload)).run()
    for each in (report, unscraped):
        each["decisions"].pop("compute_ms")  # (wall time)
    assert report == unscraped
    registry = made[0].registry
    assert registry.get_sample_value("nodemanager_loop_duration_seconds_count", {"loop": "pool"}) > 0
    assert registry.get_sample_value("nodemanager_decisions_total") == unscraped["decisions"]["count"]
    booted = [s.value for m in registry.collect() if m.name == "nodemanager_boots" for s in m.samples if s.name == "nodemanager_boots_total"]
    assert sum(booted) == unscraped["nodes"]["booted"] > 0


def test_progress_follows_the_pods_not_the_clock() -> None:
    """Two short pods on the first day, forty on the tenth, one that stays: at day nine the
    clock is nine tenths of the way and the work is not a tenth done (the bar's estimate of
    the time left follows ``work_done``); at the end every pod's three steps are done."""
    config, catalog = parse_config(BOUND_PROVIDER % {"boot": "30s", "boots": 10}, "provider.yaml", Path("."))
    spec = "{containers: [{name: c, resources: {requests: {cpu: 100m}}}]}"
    workload = parse_workload(
        "pods:\n"
        f"  - {{name: early, count: 2, duration: 1h, pod: {{spec: {spec}}}}}\n"
        f"  - {{name: late, count: 40, at: 240h, duration: 1h, pod: {{spec: {spec}}}}}\n"
        f"  - {{name: stays, at: 240h, pod: {{spec: {spec}}}}}\n"
    )
    at_day_nine = Simulation(config, catalog, workload)
    at_day_nine.run(until=216 * 3600)
    done, total = at_day_nine.work_done()
    assert total == 3 * 43
    assert done == 3 * 2  # the two early pods arrived, were bound and finished
    whole = Simulation(config, catalog, workload)
    whole.run()
    assert whole.work_done() == (total, total)
