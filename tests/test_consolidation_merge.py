"""Consolidation asks whether the pods would fit elsewhere plus at most one new node
(Karpenter's question). The packer plans the cheapest fleet, which may be several small nodes;
a consolidation's what-if then puts their pods on one node of the cheapest offering that
takes them all through the filters, unless where they may go depends on other pods."""

from __future__ import annotations

import dataclasses

import pytest
from builders import CATALOG, OD, cell_pool, node, pod, scaler
from hypothesis import given, settings
from hypothesis import strategies as st

from nodemanager.config.schema import Limits, Pool
from nodemanager.model import NodeState, PodPhase, Resources
from nodemanager.model.by_node import PodsByNode
from nodemanager.model.pod import Pod
from nodemanager.model.ports import HostPort
from nodemanager.scaler import ClusterSnapshot
from nodemanager.scaler.consolidation import CheaperSizes, Planner
from nodemanager.scaler.decision import Decision


def _pool(*types: str) -> Pool:
    return Pool(name="general", packing="binpack", instance_types=list(types), capacity_types=[OD])


def _apart(name: str) -> Pod:
    """A web pod that keeps off any node holding another web pod."""
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}
    spec = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
    }
    return Pod.from_manifest({"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}}, "spec": spec})


def _started(pods: list[Pod], one_new_node: bool) -> list[tuple[str, int]]:
    decision = scaler(_pool("a.large", "m.4xlarge")).compute(ClusterSnapshot(tuple(pods), (), one_new_node=one_new_node), 0.0)
    assert set(decision.bindings) == {p.key for p in pods}
    return sorted((s.instance_type, len(s.pods)) for s in decision.start)


def test_a_what_if_puts_the_pods_the_packer_spread_on_one_node() -> None:
    pods = [pod("p1", cpu="1500m", memory="1Gi"), pod("p2", cpu="1500m", memory="1Gi")]  # one per a.large
    assert _started(pods, one_new_node=False) == [("a.large", 1), ("a.large", 1)]  # the cheapest fleet
    assert _started(pods, one_new_node=True) == [("m.4xlarge", 2)]


@pytest.mark.parametrize(
    "pods",
    [
        pytest.param([_apart("w1"), _apart("w2")], id="anti-affinity"),
        pytest.param([dataclasses.replace(pod(f"p{i}", cpu="1500m", memory="1Gi"), host_ports=(HostPort(8080),)) for i in (1, 2)], id="host-port"),
    ],
)
def test_pods_that_may_not_share_a_node_keep_their_nodes(pods: list[Pod]) -> None:
    assert _started(pods, one_new_node=True) == [("a.large", 1), ("a.large", 1)]


def test_a_cell_pools_pods_keep_a_node_each() -> None:
    pods = (pod("p1", cpu="250m"), pod("p2", cpu="250m"))
    decision = scaler(cell_pool()).compute(ClusterSnapshot(pods, (), one_new_node=True), 0.0)
    assert [len(s.pods) for s in decision.start] == [1, 1]


def test_a_pool_limit_the_one_node_would_break_keeps_the_plan() -> None:
    """Two a.large (4 CPUs) fit the pool's 8-CPU limit; one m.4xlarge (16 CPUs) would not."""
    pods = (pod("p1", cpu="1500m", memory="1Gi"), pod("p2", cpu="1500m", memory="1Gi"))
    limited = _pool("a.large", "m.4xlarge").model_copy(update={"limits": Limits(cpu="8")})
    decision = scaler(limited).compute(ClusterSnapshot(pods, (), one_new_node=True), 0.0)
    assert sorted(s.instance_type for s in decision.start) == ["a.large", "a.large"]


def test_eight_nodes_consolidate_into_one_larger_node() -> None:
    """Eight b.large nodes ($0.96/h) hold one 0.9-CPU pod each. The packer would put their pods
    on four a.large nodes ($0.40/h), which is not one replacement; one m.4xlarge ($0.80/h)
    holds them all and is cheaper than the eight."""
    nodes = [dataclasses.replace(node(f"n{i}", "b.large", state=NodeState.AVAILABLE), allocatable=CATALOG["b.large"].allocatable) for i in range(8)]
    pods = tuple(pod(f"p{i}", cpu="900m", memory="1Gi", node=f"n{i}", phase=PodPhase.RUNNING) for i in range(8))
    sc = scaler(_pool("a.large", "b.large", "m.4xlarge"))
    hourly = CATALOG.hourly
    price = lambda n: hourly(n.instance_type, n.capacity_type, n.zone)  # noqa: E731
    planner = Planner(lambda s: sc.compute(s, 0.0), price, lambda _n: 0, sizes_below=CheaperSizes(sc.views).below)
    snapshot = ClusterSnapshot(pods, tuple(nodes))
    spread, _ = planner.relocate(snapshot, nodes)
    assert spread is not None
    assert [r.instance_type for r in spread.replacements] == ["a.large"] * 4
    merged, why = planner.consolidate(snapshot, nodes)
    assert merged is not None, why
    assert [(r.instance_type, len(r.pods)) for r in merged.replacements] == [("m.4xlarge", 8)]
    assert merged.savings == pytest.approx(0.96 - 0.80)
    assert Resources.total(p.requests for p in pods).fits(CATALOG["m.4xlarge"].allocatable)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["250m", "900m", "1500m", "3", "7"]), st.sampled_from(["256Mi", "2Gi", "6Gi"])), min_size=1, max_size=10))
def test_a_what_if_binds_the_same_pods_on_one_node_that_holds_them(asks: list[tuple[str, str]]) -> None:
    pods = tuple(pod(f"p{i}", cpu=cpu, memory=memory) for i, (cpu, memory) in enumerate(asks))
    sc = scaler(_pool("a.large", "b.large", "m.xlarge", "m.4xlarge"))
    planned = sc.compute(ClusterSnapshot(pods, ()), 0.0)
    merged = sc.compute(ClusterSnapshot(pods, (), one_new_node=True), 0.0)
    assert merged.bindings.keys() == planned.bindings.keys()
    assert len(merged.start) in (1, len(planned.start))
    if len(planned.start) <= 1:
        assert merged.start == planned.start  # nothing to put together
    elif len(merged.start) == 1:
        [spec] = merged.start
        assert set(spec.pods) == set(merged.bindings)
        requests = Resources.total((p.requests for p in pods if p.key in merged.bindings), Resources({"pods": len(spec.pods)}))
        assert requests.fits(CATALOG[spec.instance_type].allocatable)


def test_a_what_ifs_grouping_is_its_own_pods_grouped() -> None:
    """A what-if keeps the other nodes' pod tuples (their pictures are reused), and its
    grouping is exactly its pods grouped afresh: the moving pods wait, in key order, and the
    DaemonSet pods of the nodes that go go with them."""
    nodes = [dataclasses.replace(node(f"n{i}", "b.large", state=NodeState.AVAILABLE), allocatable=CATALOG["b.large"].allocatable) for i in range(3)]
    running = [pod(f"p{i}{j}", cpu="200m", node=f"n{i}", phase=PodPhase.RUNNING) for i in range(3) for j in range(2)]
    daemon = dataclasses.replace(pod("ds-n1", node="n1", phase=PodPhase.RUNNING), daemon_set="ds")
    pods = (pod("waiting"), *running, daemon)
    asked: list[ClusterSnapshot] = []
    planner = Planner(lambda s: asked.append(s) or Decision(), lambda n: 0.2, lambda _n: 0, sizes_below=lambda _price, _pods: [])
    snapshot = ClusterSnapshot(pods, tuple(nodes))
    planner.relocate(snapshot, [nodes[1], nodes[0]])
    [what_if] = asked
    fresh = PodsByNode.of(what_if.pods)
    assert what_if.by_node is what_if.grouped
    assert what_if.by_node.waiting == fresh.waiting
    assert [p.key for p in fresh.waiting] == ["default/waiting", "default/p00", "default/p01", "default/p10", "default/p11"]
    assert dict(what_if.by_node.placed) == dict(fresh.placed) == {"n2": snapshot.by_node.placed["n2"]}
    assert what_if.by_node.placed["n2"] is snapshot.by_node.placed["n2"]
