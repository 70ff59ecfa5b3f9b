"""What a scaler keeps between computations (node pictures, the packer's tables, offering
frontiers) never changes a decision: a scaler that has computed before decides exactly as
a fresh one on every snapshot of a changing cluster (hypothesis)."""

from __future__ import annotations

import dataclasses
import gc
import operator

from builders import CATALOG, OD, SPOT, ZONES, binpack_pool, cell_pool, node, pod, scaler
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nodemanager.model import NodeState, Pod, PodPhase, Taint, TaintEffect
from nodemanager.model.daemonset import DaemonSet
from nodemanager.scaler import ClusterSnapshot
from nodemanager.scaler.pictures import NodePictures
from nodemanager.scaler.pools import node_node_info, pool_views
from nodemanager.scheduling import NodeInfo

POOLS = (cell_pool(), binpack_pool())
CONTAINERS = [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]
DAEMON = DaemonSet.from_manifest({"metadata": {"name": "proxy", "namespace": "kube-system"}, "spec": {"template": {"spec": {"containers": CONTAINERS}}}})
TAINT = Taint("dedicated", TaintEffect.NO_SCHEDULE, "db")

steps = st.lists(
    st.tuples(
        st.sampled_from(["arrive", "bind", "finish", "record", "taint", "cordon", "claim", "daemons", "offering", "join", "leave", "stop", "boot"]),
        st.integers(0, 7),
        st.sampled_from(["100m", "500m", "1", "3"]),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
    last_records: tuple = ()
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
        elif change == "join":  # a node whose name sorts anywhere among the others'
            name = f"n{i}j{now}"
            nodes[name] = dataclasses.replace(node(name, "m.xlarge", pool="general", zone=ZONES[i % 2]), ready_at=0.0)
        elif change == "leave" and len(nodes) > 1:
            del nodes[target]
        elif change == "stop":
            nodes[target] = dataclasses.replace(nodes[target], state=NodeState.TERMINATING)
        elif change == "boot":  # Ready, booting (with no pods yet) or Ready again
            order = [NodeState.AVAILABLE, NodeState.CREATING, NodeState.CREATED]
            nodes[target] = dataclasses.replace(nodes[target], state=order[(order.index(nodes[target].state) + 1) % 3 if nodes[target].state in order else 0])
        elif change == "offering":
            key = ("m.xlarge", SPOT if i % 2 else OD, ZONES[i % 2])
            unavailable = {} if unavailable else {key: 1e9}
        records = tuple(nodes.values())
        if len(records) == len(last_records) and all(map(operator.is_, records, last_records)):
            records = last_records  # the controller gives the very tuple while no record changed
        last_records = records
        snapshot = ClusterSnapshot(tuple(pods.values()), records, unavailable, daemon_sets=daemon_sets)
        assert kept.compute(snapshot, float(now)) == scaler(*POOLS).compute(snapshot, float(now)), f"after {changes[:now]}"


WEB = {"matchLabels": {"app": "web"}}
ZONE_KEY = "topology.kubernetes.io/zone"


def _web(name: str, cpu: str, created: float, **spec: object) -> Pod:
    """A web pod (with ``spec``'s constraints, if any)."""
    containers = [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]
    manifest = {"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}}, "spec": {"containers": containers, **spec}}
    return dataclasses.replace(Pod.from_manifest(manifest), created_at=created)


def _apart(name: str, cpu: str, created: float) -> Pod:
    """A web pod that keeps out of any zone holding another web pod."""
    term = {"topologyKey": ZONE_KEY, "labelSelector": WEB}
    return _web(name, cpu, created, affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})


def _spread(name: str, cpu: str, created: float) -> Pod:
    """A web pod spread evenly over the zones with the other web pods."""
    constraint = {"maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": WEB}
    return _web(name, cpu, created, topologySpreadConstraints=[constraint])


def _repelling(name: str, node: str) -> Pod:
    """A pod running on ``node`` that keeps web pods out of its zone."""
    term = {"topologyKey": ZONE_KEY, "labelSelector": WEB}
    spec = {"nodeName": node, "containers": CONTAINERS, "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    return dataclasses.replace(Pod.from_manifest({"metadata": {"name": name, "namespace": "default"}, "spec": spec}), phase=PodPhase.RUNNING)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["arrive", "arrive", "apart", "spread", "apply", "apply", "repel", "taint", "bind", "resize", "finish", "booted"]),
            st.integers(0, 15),
            st.sampled_from(["100m", "500m", "1", "3"]),
        ),
        min_size=1,
        max_size=16,
    )
)
@example([("arrive", 0, "1"), ("apply", 0, "1"), ("repel", 0, "1")])  # a pod that repels them came (kept: refused)
@example([("spread", 0, "3"), ("apply", 0, "3"), ("arrive", 0, "1"), ("bind", 6, "1")])  # their own spread no longer holds there
@example([("arrive", 0, "1"), ("apply", 0, "1"), ("spread", 0, "1"), ("apply", 0, "1"), ("arrive", 0, "1")])  # kept pods count for spread
def test_pods_kept_on_the_nodes_planned_for_them_are_those_a_fresh_scaler_places_there(changes: list[tuple[str, int, str]]) -> None:
    """Pods the last decision placed on a booting node, still waiting for it, stay on its
    picture for the next decision (``keep_placed``) only where a fresh scaler places them
    there too: whatever came meanwhile (pods bound there, a taint, a pod that repels them,
    a pod resized), whatever the pods' own constraints (anti-affinity, spread)."""
    kept = scaler(*POOLS)
    nodes = {
        "n0": node("n0", "m.xlarge", pool="general", zone=ZONES[0], state=NodeState.CREATED),  # (the first a pod goes to)
        "n1": node("n1", "m.4xlarge", pool="general", zone=ZONES[1], state=NodeState.CREATING),
        "n2": dataclasses.replace(node("n2", "m.xlarge", pool="general", zone=ZONES[0]), ready_at=0.0, unschedulable=True),  # (holds what runs there)
        "n3": node("n3", "a.large", pool="cells", zone=ZONES[1], state=NodeState.CREATING),
    }
    pods: dict[str, Pod] = {}
    last = None
    for now, (change, i, cpu) in enumerate(changes, start=1):
        target = sorted(nodes)[i % len(nodes)]
        waiting = sorted(k for k, p in pods.items() if not p.node_name)
        if change in ("arrive", "apart", "spread"):
            pods[f"q{now}"] = {"arrive": _web, "apart": _apart, "spread": _spread}[change](f"q{now}", cpu, float(now))
        elif change == "apply" and last is not None:  # what the provisioner records of a decision
            for name, record in nodes.items():
                nodes[name] = dataclasses.replace(record, bound_pods=tuple(sorted(k for k, n in last.bindings.items() if n == name)))
        elif change == "repel" and pods.pop("repel", None) is None:  # a pod that repels them comes (or goes)
            pods["repel"] = _repelling("repel", "n2")
        elif change == "taint":
            nodes[target] = dataclasses.replace(nodes[target], taints=() if nodes[target].taints else (TAINT,))
        elif change == "bind" and waiting:  # a waiting pod bound (by the provisioner, or another scheduler)
            key = waiting[(i // 4) % len(waiting)]
            pods[key] = dataclasses.replace(pods[key], node_name=target, phase=PodPhase.RUNNING)
        elif change == "resize" and waiting:  # the same pod, asking for more
            key = waiting[i % len(waiting)]
            pods[key] = dataclasses.replace(pods[key], requests=pods[key].requests + pod("x", cpu).requests)
        elif change == "finish" and pods:
            pods.pop(sorted(pods)[i % len(pods)])
        elif change == "booted":
            nodes[target] = dataclasses.replace(nodes[target], state=NodeState.AVAILABLE, ready_at=float(now))
        snapshot = ClusterSnapshot(tuple(pods.values()), tuple(nodes.values()))
        last = kept.compute(snapshot, float(now))
        assert last == scaler(*POOLS).compute(snapshot, float(now)), f"after {changes[:now]}"


def _as_built(info: NodeInfo) -> tuple:
    """Everything a picture says (its pods in order, by identity), but how many changes it saw."""
    return (dataclasses.replace(info, generation=0, pods={}), [(key, id(p)) for key, p in info.pods.items()])


def test_a_picture_is_lent_and_brought_up_to_date_once_spoiled_or_made_again_when_the_node_changes() -> None:
    view = pool_views(list(POOLS), CATALOG, 0, {})[0]
    record = node("n0", "a.large", pool="cells")
    placed = [pod("p0", "500m", node="n0", phase=PodPhase.RUNNING)]
    pictures = NodePictures(CATALOG, 0, ())
    first = pictures.info(record, view, placed)
    assert pictures.info(dataclasses.replace(record, ready_at=5.0), view, placed) is first  # lent, not copied
    extra = pod("extra", "1", node="n0")
    first.add_pod(extra)  # what a computation does with its picture
    pictures.spoiled(["n0", "gone"])  # ... and then says so
    again = pictures.info(dataclasses.replace(record, ready_at=5.0), view, placed)
    assert pictures.placed == {"n0": (extra,)}  # the next computation is told what it placed
    pictures.settle(["n0"])  # ... which it keeps there
    assert set(again.pods) == {"default/p0", "default/extra"}
    assert again.requested.cpu == 1500
    pictures.spoiled(["n0"])
    assert pictures.info(record, view, placed) is again
    assert pictures.placed == {"n0": (extra,)}
    pictures.settle()  # ... or takes off
    assert set(again.pods) == {"default/p0"}
    assert again.requested.cpu == 500
    assert pictures.placed == {}
    assert pictures.info(record, view, placed) is again
    assert pictures.placed == {}
    more = [*placed, pod("p1", "250m", node="n0", phase=PodPhase.RUNNING)]
    grown = pictures.info(record, view, more)  # the record stands, its pods changed: brought up to date by the one that came
    fresh = node_node_info(record, view, CATALOG, 0)
    fresh.add_pods(more)
    assert _as_built(grown) == _as_built(fresh)
    assert grown.requested.cpu == 750
    tainted = pictures.info(dataclasses.replace(record, taints=(TAINT,)), view, placed)
    assert tainted.taints == (TAINT,)
    built = node_node_info(dataclasses.replace(record, taints=(TAINT,)), view, CATALOG, 0)
    built.add_pods(placed)
    assert tainted == built


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(0, 9), max_size=8, unique=True),
            st.lists(st.integers(10, 12), max_size=2, unique=True),
            st.booleans(),
            st.booleans(),
            st.sampled_from(["untouched", "placed", "took one off"]),
        ),
        max_size=8,
    )
)
@example([([0, 1], [], False, False, "untouched"), ([1, 2], [], False, False, "untouched")])  # other pods, as many
@example([([0, 1], [10], False, False, "took one off"), ([0, 1], [], False, False, "untouched")])
def test_a_picture_brought_up_to_date_is_the_one_built_again(steps_: list[tuple[list[int], list[int], bool, bool, str]]) -> None:
    """Whatever pods come and go between computations (and whatever a computation did to
    the picture it was lent: placed pods, kept there by the next or not, or even took one
    of the node's own off), a picture brought up to date says what one built from all the
    node's pods (and those kept) says, its pods in the same order."""
    view = pool_views(list(POOLS), CATALOG, 0, {})[1]
    record = node("n0", "m.4xlarge", pool="general")
    made = {i: pod(f"p{i}", ["100m", "500m", "1"][i % 3], node="n0", phase=PodPhase.RUNNING) for i in range(10)}
    pictures = NodePictures(CATALOG, 0, ())
    for held, placed_by_run, changed, keep, run in steps_:
        if changed:  # a pod changed (a new object of the same key)
            made[0] = dataclasses.replace(made[0], labels={"v": str(len(made[0].labels) + 1)})
        on = tuple(sorted((made[i] for i in held), key=lambda p: p.key))
        info = pictures.info(record, view, on)
        placed = pictures.placed.get("n0", ())
        assert not placed or info.pods.keys() >= {p.key for p in placed}
        pictures.settle(["n0"] if keep else [])
        fresh = node_node_info(record, view, CATALOG, 0)
        fresh.add_pods(on)
        for kept in placed if keep else ():
            fresh.add_pod(kept)
        assert _as_built(info) == _as_built(fresh)
        if run == "untouched":
            continue
        for i in placed_by_run:  # what a computation places on the picture lent to it
            if f"default/new{i}" not in info.pods:
                info.add_pod(pod(f"new{i}", "250m"))
        if run == "took one off" and on:
            info.remove_pod(on[0].key)
        pictures.spoiled(["n0"])


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
