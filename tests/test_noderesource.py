"""The node-resource framework's stages and BatchResource's formulas (Koordinator §1)."""

from __future__ import annotations

import dataclasses

import pytest
from builders import pod

from nodemanager.model import PodPhase
from nodemanager.noderesource import (
    BATCH_CPU,
    BATCH_MEMORY,
    BatchResource,
    CalculatePolicy,
    ColocationStrategy,
    NodeMetric,
    NodeResourceFramework,
    NodeView,
    PodUsage,
    ResourceItem,
    plugin_enabled,
    priority_class,
)
from nodemanager.noderesource.batch import DEGRADE_MESSAGE, resource_differs
from nodemanager.noderesource.framework import CalculatePlugin, NeedSyncMetaPlugin, NeedSyncPlugin, PreparePlugin, SetupPlugin, StageRegistry

G = 10**9
ON = ColocationStrategy(enable=True, cpu_reclaim_threshold_percent=65, memory_reclaim_threshold_percent=65)


def node(cpu_cores=100, memory_g=120, alloc_cpu=None, alloc_mem=None, **extra) -> NodeView:
    cap = {"cpu": cpu_cores * 1000, "memory": memory_g * G}
    alloc = {"cpu": (alloc_cpu if alloc_cpu is not None else cpu_cores) * 1000, "memory": (alloc_mem if alloc_mem is not None else memory_g) * G}
    return NodeView("n1", {**cap, **extra}, {**alloc, **extra})


def hp(name, cores, g, priority=9500, phase=PodPhase.RUNNING, **kw):
    return pod(name, cpu=str(cores), memory=str(g * G), priority=priority, phase=phase, node="n1", **kw)


def worked_example():
    pods = [
        hp("prod-1", 10, 10),
        hp("prod-2", 10, 10),
        hp("mid", 30, 30, priority=7500),
        hp("batch", 20, 20, priority=5500),
        hp("done", 10, 10, phase=PodPhase.SUCCEEDED),
    ]
    usage = {
        "default/prod-1": PodUsage(5000, 5 * G),
        "default/prod-2": PodUsage(6000, 6 * G),
        "default/mid": PodUsage(22000, 22 * G),
        "default/batch": PodUsage(15000, 15 * G),
    }
    metric = NodeMetric(update_time=1000.0, system_cpu=7000, system_memory=12 * G, pods=usage)
    return pods, metric


def items(result):
    return {i.name: i for i in result}


# -- BatchResource ---------------------------------------------------------------------------


def test_worked_example_exact_numbers():
    pods, metric = worked_example()
    out = items(BatchResource().calculate(ON, node(), pods, metric, now=1000.0))
    assert out[BATCH_CPU].quantity == 25_000  # 100 - 35 - 7 - 33 cores
    assert out[BATCH_MEMORY].quantity == 33 * G  # 120 - 42 - 12 - 33 G
    assert (
        out[BATCH_CPU].message
        == "batchAllocatable[CPU(Milli-Core)]:25000 = nodeCapacity:100000 - nodeSafetyMargin:35000 - systemUsageOrNodeReserved:7000 - podHPUsed:33000"
    )
    assert out[BATCH_MEMORY].message == "batchAllocatable[Mem(GB)]:33 = nodeCapacity:120 - nodeSafetyMargin:42 - systemUsageOrNodeReserved:12 - podHPUsed:33"


@pytest.mark.parametrize(
    ("cpu_policy", "memory_policy", "cpu", "memory"),
    [
        pytest.param(CalculatePolicy.USAGE, CalculatePolicy.USAGE, 25_000, 33 * G, id="usage"),
        # request: HP requests 50 cores / 50 G, reserved 0: memory 120 - 42 - 0 - 50 = 28 G; cpu falls back to usage
        pytest.param(CalculatePolicy.REQUEST, CalculatePolicy.REQUEST, 25_000, 28 * G, id="request"),
        # maxUsageRequest: max(req, usage) per HP pod = 10 + 10 + 30 = 50
        pytest.param(
            CalculatePolicy.MAX_USAGE_REQUEST,
            CalculatePolicy.MAX_USAGE_REQUEST,
            100_000 - 35_000 - 7_000 - 50_000,
            (120 - 42 - 12 - 50) * G,
            id="maxUsageRequest",
        ),
    ],
)
def test_policies(cpu_policy, memory_policy, cpu, memory):
    pods, metric = worked_example()
    strategy = dataclasses.replace(ON, cpu_calculate_policy=cpu_policy, memory_calculate_policy=memory_policy)
    out = items(BatchResource().calculate(strategy, node(), pods, metric, now=1000.0))
    assert (out[BATCH_CPU].quantity, out[BATCH_MEMORY].quantity) == (cpu, memory)


def test_caps_bound_the_result_by_a_share_of_capacity():
    pods, metric = worked_example()
    strategy = dataclasses.replace(ON, batch_cpu_threshold_percent=10, batch_memory_threshold_percent=20)
    out = items(BatchResource().calculate(strategy, node(), pods, metric, now=1000.0))
    assert (out[BATCH_CPU].quantity, out[BATCH_MEMORY].quantity) == (10_000, 24 * G)


def test_reclaim_thresholds_change_the_safety_margin():
    pods, metric = worked_example()
    strategy = dataclasses.replace(ON, cpu_reclaim_threshold_percent=80, memory_reclaim_threshold_percent=50)
    out = items(BatchResource().calculate(strategy, node(), pods, metric, now=1000.0))
    assert out[BATCH_CPU].quantity == 100_000 - 20_000 - 7_000 - 33_000
    assert out[BATCH_MEMORY].quantity == (120 - 60 - 12 - 33) * G


def test_reserved_beats_smaller_system_usage_and_results_clamp_at_zero():
    pods, metric = worked_example()
    metric.system_cpu = 1000
    out = items(BatchResource().calculate(ON, node(alloc_cpu=90), pods, metric, now=1000.0))
    assert out[BATCH_CPU].quantity == 100_000 - 35_000 - 10_000 - 33_000  # kubelet reserves 10 cores
    crowded = [hp(f"p{i}", 10, 10) for i in range(10)]
    out = items(BatchResource().calculate(ON, node(), crowded, NodeMetric(update_time=1000.0), now=1000.0))
    assert out[BATCH_CPU].quantity == 0  # pods without metrics count their requests as used
    assert out[BATCH_MEMORY].quantity == 0


def test_reservation_annotation_reserves_cpus():
    pods, metric = worked_example()
    metric.system_cpu = 0
    view = node()
    view.annotations["node.koordinator.sh/reservation"] = '{"reservedCPUs": "0-9,12"}'
    out = items(BatchResource().calculate(ON, view, pods, metric, now=1000.0))
    assert out[BATCH_CPU].quantity == 100_000 - 35_000 - 11_000 - 33_000


def test_lse_pods_do_not_give_back_cpu_and_dangling_metrics_count():
    view = node()
    lse = hp("lse", 10, 10, extra=None)
    lse = dataclasses.replace(lse, labels={"koordinator.sh/qosClass": "LSE"})
    metric = NodeMetric(update_time=1.0, pods={"default/lse": PodUsage(2000, 4 * G), "default/ghost": PodUsage(3000, 1 * G)})
    out = items(BatchResource().calculate(ON, view, [lse], metric, now=1.0))
    assert out[BATCH_CPU].quantity == 100_000 - 35_000 - 0 - (10_000 + 3_000)
    assert out[BATCH_MEMORY].quantity == (120 - 42) * G - (4 + 1) * G


@pytest.mark.parametrize(("metric_time", "now"), [(None, 0.0), (0.0, 15 * 60 + 1)], ids=["no-update-time", "stale"])
def test_degrade_removes_batch_resources(metric_time, now):
    out = items(BatchResource().calculate(ON, node(), [], NodeMetric(update_time=metric_time), now))
    assert all(i.reset and i.quantity is None and i.message == DEGRADE_MESSAGE for i in out.values())
    assert set(out) == {BATCH_CPU, BATCH_MEMORY}
    assert items(BatchResource().calculate(ON, node(), [], None, 0.0))[BATCH_CPU].reset


def test_fresh_metrics_do_not_degrade_up_to_the_limit():
    out = items(BatchResource().calculate(ON, node(), [], NodeMetric(update_time=0.0), 15 * 60))
    assert not out[BATCH_CPU].reset


@pytest.mark.parametrize(
    ("labels", "priority", "klass"),
    [
        ({}, 9999, "Prod"),
        ({}, 7000, "Mid"),
        ({}, 5500, "Batch"),
        ({}, 3000, "Free"),
        ({}, 100, None),
        ({"koordinator.sh/priority-class": "koord-batch"}, 9500, "Batch"),
        ({"koordinator.sh/qosClass": "BE"}, 0, "Batch"),
        ({"koordinator.sh/qosClass": "LS"}, 0, "Prod"),
    ],
)
def test_priority_classes(labels, priority, klass):
    assert priority_class(dataclasses.replace(pod("p", priority=priority), labels=labels)) == klass


@pytest.mark.parametrize(
    ("old", "new", "differs"),
    [
        ({}, {}, False),
        ({}, {"x": 0}, True),
        ({"x": 5}, {}, True),
        ({"x": 0}, {"x": 5}, True),  # 0 -> anything syncs
        ({"x": 1000}, {"x": 1100}, False),  # exactly 10% is not above
        ({"x": 1000}, {"x": 1101}, True),
        ({"x": 1000}, {"x": 899}, True),
    ],
)
def test_need_sync_threshold(old, new, differs):
    assert resource_differs(old, new, "x", 0.1) is differs


# -- the framework -----------------------------------------------------------------------------


def test_reconcile_prepares_a_copy_and_syncs_by_rule():
    pods, metric = worked_example()
    fw = NodeResourceFramework([BatchResource()])
    original = node()
    first = fw.reconcile(ON, original, pods, metric, now=1000.0, last_sync=None)
    assert (first.need_sync, first.reason) == (True, "never synced")
    assert first.node.allocatable[BATCH_CPU] == 25_000
    assert BATCH_CPU not in original.allocatable  # the caller's node is untouched
    same = fw.reconcile(ON, first.node, pods, metric, now=1100.0, last_sync=1000.0)
    assert same.need_sync is False
    metric.pods["default/mid"] = PodUsage(10_000, 22 * G)  # 12 cores more reclaimable: +48%
    moved = fw.reconcile(ON, first.node, pods, metric, now=1100.0, last_sync=1000.0)
    assert moved.need_sync
    assert moved.reason.startswith("BatchResource: kubernetes.io/batch-cpu changed from 25000 to 37000")
    later = fw.reconcile(ON, first.node, pods, metric, now=1000.0 + 301, last_sync=1000.0)
    assert later.reason == "last sync 301s ago (> 300s)"


def test_prepare_is_idempotent():
    pods, metric = worked_example()
    fw = NodeResourceFramework([BatchResource()])
    result, _ = fw.calculate(ON, node(), pods, metric, 1000.0)
    once = fw.prepare(ON, node(), result)
    twice = fw.prepare(ON, once, result)
    assert once == twice


def test_disabled_colocation_resets_and_removes_batch_resources():
    fw = NodeResourceFramework([BatchResource()])
    synced = node(**{BATCH_CPU: 5000, BATCH_MEMORY: G})
    out = fw.reconcile(ColocationStrategy(enable=False), synced, [], NodeMetric(update_time=0.0), now=0.0, last_sync=0.0)
    assert BATCH_CPU not in out.node.allocatable
    assert BATCH_MEMORY not in out.node.capacity
    assert out.need_sync
    assert "colocation is disabled" in out.messages[BATCH_CPU]


class Recorder(CalculatePlugin, PreparePlugin, NeedSyncPlugin, NeedSyncMetaPlugin, SetupPlugin):
    def __init__(self, name, log, fail=False, sync=False, item=None):
        self.name, self.log, self.fail, self.sync, self.item = name, log, fail, sync, item

    def setup(self, options):
        self.log.append(f"{self.name}.setup")
        if self.fail:
            raise RuntimeError("no client")

    def calculate(self, strategy, node, pods, metric, now):
        self.log.append(f"{self.name}.calculate")
        if self.fail:
            raise RuntimeError("broken")
        return [self.item] if self.item else []

    def reset(self, node, message):
        self.log.append(f"{self.name}.reset")
        return []

    def prepare(self, strategy, node, result):
        self.log.append(f"{self.name}.prepare")

    def need_sync(self, strategy, old, new):
        self.log.append(f"{self.name}.need_sync")
        return self.sync, "said so"

    def need_sync_meta(self, strategy, old, new):
        self.log.append(f"{self.name}.need_sync_meta")
        return self.sync, "labels"


def test_stages_run_in_registration_order_and_first_yes_wins():
    log: list[str] = []
    fw = NodeResourceFramework([Recorder("A", log), Recorder("B", log, sync=True), Recorder("C", log, sync=True)])
    out = fw.reconcile(ON, node(), [], None, now=0.0, last_sync=0.0)
    assert (out.need_sync, out.reason) == (True, "B: said so")
    assert (out.need_sync_meta, out.meta_reason) == (True, "B: labels")
    assert log == [
        "A.calculate", "B.calculate", "C.calculate",
        "A.prepare", "B.prepare", "C.prepare",
        "A.need_sync", "B.need_sync",  # C is not asked: B said yes
        "A.need_sync_meta", "B.need_sync_meta",
    ]  # fmt: skip


def test_a_failing_calculate_drops_only_its_items():
    log: list[str] = []
    good = ResourceItem("example.com/thing", 7)
    fw = NodeResourceFramework([Recorder("Bad", log, fail=True), Recorder("Good", log, item=good)])
    result, errors = fw.calculate(ON, node(), [], None, 0.0)
    assert result.resources == {"example.com/thing": 7}
    assert errors == ["Bad: calculate failed: broken"]


def test_setup_failures_are_reported_and_others_still_run():
    log: list[str] = []
    fw = NodeResourceFramework([Recorder("A", log, fail=True), Recorder("B", log)])
    assert fw.setup({}) == ["A: setup failed: no client"]
    assert log == ["A.setup", "B.setup"]


@pytest.mark.parametrize(
    ("switches", "enabled"),
    [
        (["*"], True),
        ([], False),
        (["BatchResource"], True),
        (["-BatchResource", "*"], False),
        (["*", "-BatchResource"], False),  # no earlier explicit match: the explicit one decides
        (["Other"], False),
        (["BatchResource", "-BatchResource"], True),  # the first explicit match wins
    ],
)
def test_enable_disable_rules(switches, enabled):
    assert plugin_enabled("BatchResource", switches) is enabled
    fw = NodeResourceFramework([BatchResource()], enabled=switches)
    assert bool(fw.stages["calculate"].all()) is enabled


def test_registry_skips_duplicates_keeps_order_and_unregisters():
    reg = StageRegistry("calculate")
    a, b, a2 = Recorder("A", []), Recorder("B", []), Recorder("A", [])
    reg.register(a, b, a2)
    assert [p.name for p in reg.all()] == ["A", "B"]
    assert reg.all()[0] is a
    reg.unregister("A")
    assert [p.name for p in reg.all()] == ["B"]
    with pytest.raises(TypeError, match="does not serve stage"):
        StageRegistry("setup").register(BatchResource())
