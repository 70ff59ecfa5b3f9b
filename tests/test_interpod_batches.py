"""Inter-pod constraints planned in batches (``nodemanager.scaler.interpod_plan``): every
binding passes kube-scheduler's own filters in the order the decision lists it, zones are
spread where nothing asks for one, and the per-node caps follow maxSkew and anti-affinity."""

from __future__ import annotations

import collections

from builders import node, scaler
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
