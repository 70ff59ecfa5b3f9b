"""What a scaler keeps between computations (node pictures, the packer's tables, offering
frontiers) never changes a decision: a scaler that has computed before decides exactly as
a fresh one on every snapshot of a changing cluster (hypothesis)."""

from __future__ import annotations

import dataclasses
import gc

from builders import CATALOG, OD, SPOT, ZONES, binpack_pool, cell_pool, node, pod, scaler
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodemanager.model import NodeState, PodPhase, Taint, TaintEffect
from nodemanager.model.daemonset import DaemonSet
from nodemanager.scaler import ClusterSnapshot
from nodemanager.scaler.pictures import NodePictures
from nodemanager.scaler.pools import node_node_info, pool_views

POOLS = (cell_pool(), binpack_pool())
CONTAINERS = [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]
DAEMON = DaemonSet.from_manifest({"metadata": {"name": "proxy", "namespace": "kube-system"}, "spec": {"template": {"spec": {"containers": CONTAINERS}}}})
TAINT = Taint("dedicated", TaintEffect.NO_SCHEDULE, "db")

steps = st.lists(
    st.tuples(
        st.sampled_from(["arrive", "bind", "finish", "record", "taint", "cordon", "claim", "daemons", "offering"]),
        st.integers(0, 7),
        st.sampled_from(["100m", "500m", "1", "3"]),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_a_scaler_that_computed_before_decides_as_a_fresh_one(changes: list[tuple[str, int, str]]) -> None:
    kept = scaler(*POOLS)
    nodes = {
        f"n{i}": dataclasses.replace(node(f"n{i}", itype, pool=pool, zone=ZONES[i % 2]), ready_at=0.0)
        for i, (itype, pool) in enumerate([("a.large", "cells"), ("m.xlarge", "general"), ("m.4xlarge", "general"), ("b.large", "cells")])
    }
    pods = {f"p{i}": pod(f"p{i}", "500m", node=f"n{i % 4}", phase=PodPhase.RUNNING) for i in range(6)}
    daemon_sets: tuple[DaemonSet, ...] = ()
    unavailable: dict = {}
    for now, (change, i, cpu) in enumerate(changes, start=1):
        names = sorted(nodes)
        target = names[i % len(names)]
        if change == "arrive":
            pods[f"q{now}"] = pod(f"q{now}", cpu, created=float(now))
        elif change == "bind":
            pods[f"b{now}"] = pod(f"b{now}", "100m", node=target, phase=PodPhase.RUNNING)
        elif change == "finish" and pods:
            pods.pop(sorted(pods)[i % len(pods)])
        elif change == "record":  # a new record, equal in all a picture reads
            nodes[target] = dataclasses.replace(nodes[target], ready_at=float(now))
        elif change == "taint":
            nodes[target] = dataclasses.replace(nodes[target], taints=() if nodes[target].taints else (TAINT,))
        elif change == "cordon":
            nodes[target] = dataclasses.replace(nodes[target], unschedulable=not nodes[target].unschedulable)
        elif change == "claim":
            nodes[target] = dataclasses.replace(nodes[target], state=NodeState.CLAIMED if nodes[target].state is NodeState.AVAILABLE else NodeState.AVAILABLE)
        elif change == "daemons":
            daemon_sets = () if daemon_sets else (DAEMON,)
        elif change == "offering":
            key = ("m.xlarge", SPOT if i % 2 else OD, ZONES[i % 2])
            unavailable = {} if unavailable else {key: 1e9}
        snapshot = ClusterSnapshot(tuple(pods.values()), tuple(nodes.values()), unavailable, daemon_sets=daemon_sets)
        assert kept.compute(snapshot, float(now)) == scaler(*POOLS).compute(snapshot, float(now)), f"after {changes[:now]}"


def test_a_picture_is_lent_and_made_again_once_spoiled_or_when_the_node_changes() -> None:
    view = pool_views(list(POOLS), CATALOG, 0, {})[0]
    record = node("n0", "a.large", pool="cells")
    placed = [pod("p0", "500m", node="n0", phase=PodPhase.RUNNING)]
    pictures = NodePictures(CATALOG, 0, ())
    first = pictures.info(record, view, placed)
    assert pictures.info(dataclasses.replace(record, ready_at=5.0), view, placed) is first  # lent, not copied
    first.add_pod(pod("extra", "1", node="n0"))  # what a computation does with its picture
    pictures.spoiled(["n0", "gone"])  # ... and then says so
    again = pictures.info(dataclasses.replace(record, ready_at=5.0), view, placed)
    assert again is not first
    assert set(again.pods) == {"default/p0"}
    assert again.requested.cpu == 500
    more = [*placed, pod("p1", "250m", node="n0", phase=PodPhase.RUNNING)]
    grown = pictures.info(record, view, more)  # the record stands, its pods changed: made from a copy of its bare picture
    fresh = node_node_info(record, view, CATALOG, 0)
    fresh.add_pods(more)
    assert grown == fresh
    assert grown.requested.cpu == 750
    assert set(again.pods) == {"default/p0"}  # the picture lent before is not touched
    tainted = pictures.info(dataclasses.replace(record, taints=(TAINT,)), view, placed)
    assert tainted.taints == (TAINT,)
    built = node_node_info(dataclasses.replace(record, taints=(TAINT,)), view, CATALOG, 0)
    built.add_pods(placed)
    assert tainted == built


def test_pictures_of_nodes_gone_are_forgotten() -> None:
    view = pool_views(list(POOLS), CATALOG, 0, {})[0]
    pictures = NodePictures(CATALOG, 0, ())
    records = [node(f"n{i}", pool="cells") for i in range(40)]
    for record in records:
        pictures.info(record, view, [])
    pictures.forget_all_but(records[:5])
    assert len(pictures._kept) == 5


def test_a_computation_leaves_nothing_for_the_cycle_collector() -> None:
    """A computation's run, framework and plugins are freed when it returns (each run's
    framework held the run's own methods, so every decision was cyclic garbage: the
    collector spent 0.63 s of the README's day on it, 0.08 s without)."""
    sc = scaler(*POOLS)
    ready = node("n1", "a.large", pool="binpack", state=NodeState.AVAILABLE)
    snapshot = ClusterSnapshot((pod("placed", node="n1", phase=PodPhase.RUNNING), pod("w1", "1"), pod("w2", "3")), (ready,))
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        decision = sc.compute(snapshot, 0.0)
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage if type(o).__module__.startswith("nodemanager")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    assert decision.bindings  # it placed pods (so the run made pictures, classes and new nodes)
    assert left == []
