"""Inter-pod constraints planned in batches (``nodemanager.scaler.interpod_plan``): every
binding passes kube-scheduler's own filters in the order the decision lists it, zones are
spread where nothing asks for one, and the per-node caps follow maxSkew and anti-affinity."""

from __future__ import annotations

import collections

import pytest
from builders import binpack_pool, node, scaler
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_interpod import CATALOG3, HOST, ZONE, pod, pod_affinity, pool, spread

from nodemanager.model import Pod
from nodemanager.scaler import ClusterSnapshot, Decision
from nodemanager.scaler.interpod_plan import host_cap, plan_zones
from nodemanager.scheduling import CycleState, Framework
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.profile import DEFAULT_PROFILE
from nodemanager.scheduling.registry import default_registry
from nodemanager.scheduling.topology import PodTopology


def replay(snapshot: ClusterSnapshot, d: Decision) -> list[str]:
    """Bind the decision's pods in its order onto every node (existing and started), each
    first checked by the framework's PreFilter and Filter against the pods bound before
    it, as kube-scheduler would; returns the pods it refuses, with why."""
    infos: dict[str, NodeInfo] = {}
    for n in snapshot.nodes:
        infos[n.name] = NodeInfo(n.name, n.pool, n.instance_type, n.capacity_type, n.zone, n.allocatable, {**n.labels, ZONE: n.zone, HOST: n.name})
    for spec in d.start:
        infos[spec.name] = NodeInfo(spec.name, spec.pool, spec.instance_type, spec.capacity_type, spec.zone, spec.allocatable, spec.labels)
    pods = {p.key: p for p in snapshot.pods}
    for p in snapshot.pods:
        if p.node_name in infos:
            infos[p.node_name].add_pod(p)
    fw = Framework(DEFAULT_PROFILE, default_registry())
    fw.handle.node_infos = infos  # no index: each check counts the pods afresh
    refused = []
    for key, target in d.bindings.items():
        state = CycleState()
        verdict = fw.run_pre_filter_plugins(state, pods[key])
        if verdict.is_success():
            verdict = fw.run_filter_plugins(state, pods[key], infos[target])
        if not verdict.is_success():
            refused.append(f"{key} on {target}: {verdict.message}")
        infos[target].add_pod(pods[key])
    return refused


APPS = ("a", "b", "c")


@st.composite
def workloads(draw: st.DrawFn) -> ClusterSnapshot:
    pods: list[Pod] = []
    nodes = [node(f"old-{i}", "a.large", pool="general", zone=z) for i, z in enumerate(draw(st.lists(st.sampled_from(["z-a", "z-b", "z-c"]), max_size=3)))]
    for i, n in enumerate(nodes):
        for j in range(draw(st.integers(0, 3))):
            pods.append(pod(f"run-{i}-{j}", {"app": draw(st.sampled_from(APPS))}, node=n.name))
    for g in range(draw(st.integers(1, 5))):
        app = draw(st.sampled_from(APPS))
        kind = draw(st.sampled_from(["none", "zone-spread", "host-spread", "zone-affinity", "host-anti", "zone-anti"]))
        other = {"app": draw(st.sampled_from(APPS))}
        constraints = {
            "none": {},
            "zone-spread": spread(ZONE, draw(st.integers(1, 2)), other),
            "host-spread": spread(HOST, draw(st.integers(1, 2)), other),
            "zone-affinity": pod_affinity("podAffinity", ZONE, {"app": app}),
            "host-anti": pod_affinity("podAntiAffinity", HOST, {"app": app}),
            "zone-anti": pod_affinity("podAntiAffinity", ZONE, other),
        }[kind]
        cpu = draw(st.sampled_from(["100m", "500m", "1500m"]))
        for i in range(draw(st.integers(1, 8))):
            pods.append(pod(f"g{g}-{i}", {"app": app}, cpu=cpu, **constraints))
    return ClusterSnapshot(tuple(pods), tuple(nodes))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_every_binding_passes_every_filter_in_the_order_listed(snapshot: ClusterSnapshot) -> None:
    d = scaler(pool(), catalog=CATALOG3, max_boots=1000).compute(snapshot, 0.0)
    assert replay(snapshot, d) == []
    waiting = [p.key for p in snapshot.pods if not p.node_name]
    assert set(d.bindings) | set(d.unschedulable) | set(d.waiting) == set(waiting)  # every pod accounted for


def test_pods_that_ask_for_no_zone_get_nodes_spread_over_the_zones() -> None:
    # each pod fills an s.large: six nodes of one price in three zones
    pods = [pod(f"big-{i}", cpu="1800m") for i in range(6)]
    d = scaler(pool(), catalog=CATALOG3).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert collections.Counter(n.zone for n in d.start) == {"z-a": 2, "z-b": 2, "z-c": 2}


def test_the_zone_plan_fills_the_emptiest_zones_first_counting_existing_pods() -> None:
    old = node("old", "a.large", pool="general", zone="z-a")
    running = [pod(f"web-old-{i}", {"app": "web"}, node="old") for i in range(2)]
    new = [pod(f"web-{i}", {"app": "web"}, **spread(ZONE)) for i in range(4)]
    d = scaler(pool(), catalog=CATALOG3).compute(ClusterSnapshot((*running, *new), (old,)), 0.0)
    zone = {n.name: n.zone for n in d.start} | {"old": "z-a"}
    assert collections.Counter(zone[d.bindings[p.key]] for p in new) == {"z-b": 2, "z-c": 2}  # 2/2/2 with the old ones


def test_plan_zones_admits_pods_in_order_as_the_filter_would() -> None:
    rep = pod("w", {"app": "web"}, **spread(ZONE))
    pods = [pod(f"w-{i}", {"app": "web"}, **spread(ZONE)) for i in range(5)]
    topology = PodTopology({})
    chosen, why = plan_zones(pods, ["z-a", "z-b"], topology, lambda c: frozenset({"z-a", "z-b", "z-c"}), {})
    # z-c is a domain (an existing node's zone) that takes no new pods: at most one more elsewhere
    assert list(chosen.values()) == ["z-a", "z-b"]
    assert "topology spread" in why
    assert rep.inter_pod


def test_hostname_spread_with_max_skew_two_puts_at_most_two_on_a_node() -> None:
    pods = [pod(f"w-{i}", {"app": "web"}, **spread(HOST, 2)) for i in range(6)]
    d = scaler(pool(), catalog=CATALOG3).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    per_node = collections.Counter(d.bindings.values())
    assert len(d.bindings) == 6
    assert max(per_node.values()) == 2
    assert host_cap(pods[0], None, PodTopology({})) == 2


def test_anti_affinity_beyond_the_pools_node_limit_places_what_the_limit_allows() -> None:
    db = pod_affinity("podAntiAffinity", HOST, {"app": "db"})
    pods = [pod(f"db-{i}", {"app": "db"}, **db) for i in range(3)]
    limited = pool(limits={"nodes": 2})
    d = scaler(limited, catalog=CATALOG3).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert len(d.bindings) == 2
    assert len(set(d.bindings.values())) == 2
    (left,) = {**d.waiting, **d.unschedulable}.values()
    assert "limit on nodes" in left
    assert "anti-affinity" in left


@st.composite
def zone_groups(draw: st.DrawFn) -> tuple[ClusterSnapshot, int | None]:
    """Groups with only zone-level constraints (batched: ``zone_batch``), whose spreads count
    one another's pods, beside a few others, under a pool limit on nodes or none."""
    pods: list[Pod] = []
    nodes = [node(f"old-{i}", "a.large", pool="general", zone=z) for i, z in enumerate(draw(st.lists(st.sampled_from(["z-a", "z-b", "z-c"]), max_size=2)))]
    for i, n in enumerate(nodes):
        pods += [pod(f"run-{i}-{j}", {"app": draw(st.sampled_from(APPS))}, node=n.name) for j in range(draw(st.integers(0, 3)))]
    for g in range(draw(st.integers(2, 7))):
        app = draw(st.sampled_from(APPS))
        kind = draw(st.sampled_from(["zone-spread", "zone-spread", "zone-affinity", "none", "host-anti"]))
        constraints = {
            "zone-spread": spread(ZONE, draw(st.integers(1, 2)), {"app": draw(st.sampled_from(APPS))}),
            "zone-affinity": pod_affinity("podAffinity", ZONE, {"app": app}),
            "none": {},
            "host-anti": pod_affinity("podAntiAffinity", HOST, {"app": draw(st.sampled_from(APPS))}),
        }[kind]
        for i in range(draw(st.integers(1, 9))):
            pods.append(pod(f"g{g}-{i}", {"app": app}, cpu=draw(st.sampled_from(["100m", "700m", "1500m"])), **constraints))
    return ClusterSnapshot(tuple(pods), tuple(nodes)), draw(st.none() | st.integers(1, 8))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(zone_groups())
def test_zone_groups_placed_together_pass_every_filter_in_the_order_listed_under_any_limit(case: tuple[ClusterSnapshot, int | None]) -> None:
    """A batch's later groups plan with the earlier ones' pods counted before they are placed;
    where a limit leaves some over, the batch is placed group by group instead, and a group's
    pods planned after ones that found no node are bound only where the filters still admit
    them (they used to be bound where kube-scheduler refuses them: skew over maxSkew)."""
    snapshot, limit = case
    d = scaler(pool(limits={"nodes": limit} if limit else {}), catalog=CATALOG3, max_boots=1000).compute(snapshot, 0.0)
    assert replay(snapshot, d) == []
    waiting = [p.key for p in snapshot.pods if not p.node_name]
    assert set(d.bindings) | set(d.unschedulable) | set(d.waiting) == set(waiting)


def _spread_groups(n: int) -> tuple[Pod, ...]:
    """``n`` groups of zone spread, each counting the next one's pods: they depend on one another."""
    return tuple(
        pod(f"g{g}-{i}", {"app": f"a{g}"}, cpu=("300m", "700m")[i % 2], **spread(ZONE, 1, {"app": f"a{(g + 1) % n}"})) for g in range(n) for i in range(7)
    )


def _bound_zones(snapshot: ClusterSnapshot, d: Decision) -> collections.Counter:
    zone = {n.name: n.zone for n in d.start}
    return collections.Counter((p.labels["app"], zone[d.bindings[p.key]]) for p in snapshot.pods if p.key in d.bindings)


def test_zone_groups_in_a_row_are_packed_together_zone_by_zone(monkeypatch) -> None:
    from nodemanager.scaler import binpack, zone_batch

    snapshot = ClusterSnapshot(_spread_groups(6), ())
    packed: list[int] = []
    original = binpack.pack
    monkeypatch.setattr(binpack, "pack", lambda *a, **kw: packed.append(1) or original(*a, **kw))
    together = scaler(pool(), catalog=CATALOG3, max_boots=1000).compute(snapshot, 0.0)
    batched_packs = len(packed)
    packed.clear()
    monkeypatch.setattr(zone_batch.ZoneBatch, "takes", lambda self, group: False)
    alone = scaler(pool(), catalog=CATALOG3, max_boots=1000).compute(snapshot, 0.0)
    assert replay(snapshot, together) == []
    assert len(together.bindings) == len(alone.bindings) == 42
    assert batched_packs <= 3 < len(packed)  # one packing per zone, not per group and zone
    assert sum(n.price for n in together.start) <= sum(n.price for n in alone.start)


def test_a_batch_a_limit_leaves_pods_over_is_placed_group_by_group(monkeypatch) -> None:
    """Three nodes of s.large hold 15 of the 42 pods: the later groups' plans counted pods that
    were left over, so the batch is undone and placed as one group at a time would be."""
    from nodemanager.scaler import zone_batch

    snapshot = ClusterSnapshot(_spread_groups(6), ())
    limited = binpack_pool(instance_types=["s.large"], limits={"nodes": 3})
    tried = scaler(limited, catalog=CATALOG3).compute(snapshot, 0.0)
    monkeypatch.setattr(zone_batch.ZoneBatch, "takes", lambda self, group: False)
    alone = scaler(limited, catalog=CATALOG3).compute(snapshot, 0.0)
    assert replay(snapshot, tried) == []
    assert 0 < len(tried.bindings) < 42
    assert _bound_zones(snapshot, tried) == _bound_zones(snapshot, alone)
    assert set(tried.bindings) == set(alone.bindings)
    assert tried.waiting == alone.waiting
    assert tried.unschedulable == alone.unschedulable
    assert len(tried.start) == len(alone.start) == 3


def _alike_but_labels(n: int) -> list[Pod]:
    """``n`` groups of hostname spread on the pods labelled app=s, each group labelled its own."""
    return [pod(f"g{g}-{i}", {"app": f"a{g}"}, cpu=("300m", "700m")[i % 2], **spread(HOST, 1, {"app": "s"})) for g in range(n) for i in range(6)]


def test_groups_alike_but_for_their_labels_are_packed_as_one(monkeypatch) -> None:
    """No filter of theirs reads their own labels (the spread counts other pods): one
    packing for all six groups, not one each, and every pod still passes the filters."""
    from nodemanager.scaler import binpack

    counted = [pod(f"s-{i}", {"app": "s"}) for i in range(3)]
    snapshot = ClusterSnapshot((*counted, *_alike_but_labels(6)), ())
    packed: list[int] = []
    original = binpack.pack
    monkeypatch.setattr(binpack, "pack", lambda *a, **kw: packed.append(1) or original(*a, **kw))
    d = scaler(pool(), catalog=CATALOG3, max_boots=1000).compute(snapshot, 0.0)
    assert replay(snapshot, d) == []
    assert len(d.bindings) == 39
    assert len(packed) <= 2  # the counted pods' group, then the six as one


@pytest.mark.parametrize("running", [True, False])
def test_a_group_a_placed_pod_repels_is_placed_apart_from_the_others_alike(running: bool) -> None:
    """A pod's anti-affinity selects one of the label sets, the pod running or placed first
    in the same decision: that group is placed on its own (its filters read its labels), the
    rest together; every pod passes, and none of that group shares the pod's node."""
    repels_a1 = pod("a-guard", {"app": "guard"}, node="old-0" if running else "", **pod_affinity("podAntiAffinity", HOST, {"app": "a1"}))
    old = node("old-0", "a.large", pool="general", zone="z-a")
    snapshot = ClusterSnapshot((repels_a1, *_alike_but_labels(4)), (old,) if running else ())
    d = scaler(pool(), catalog=CATALOG3, max_boots=1000).compute(snapshot, 0.0)
    assert replay(snapshot, d) == []
    assert len(d.bindings) == 24 + (not running)
    guarded = "old-0" if running else d.bindings["default/a-guard"]
    assert not any(node_name == guarded for key, node_name in d.bindings.items() if key.startswith("default/g1-"))
    assert any(node_name == guarded for key, node_name in d.bindings.items() if key.startswith("default/g") and key != "default/a-guard")
