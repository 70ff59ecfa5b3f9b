"""Topology spread and pod (anti-)affinity: parsing, kube-scheduler's documented cases for
the filters, and the scaler placing groups on existing and new nodes."""

from __future__ import annotations

import collections
import dataclasses

import pytest
from builders import binpack_pool, node, scaler

from cloud.catalog import Catalog
from nodemanager.config.schema import Pool
from nodemanager.errors import InvalidManifest
from nodemanager.model import InstanceType, Pod, Taint, TaintEffect
from nodemanager.model.interpod import InclusionPolicy
from nodemanager.model.pod import OwnerRef
from nodemanager.scaler import ClusterSnapshot
from nodemanager.scheduling import CycleState, Framework
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.profile import DEFAULT_PROFILE
from nodemanager.scheduling.registry import default_registry

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
THREE_ZONES = ("z-a", "z-b", "z-c")
CATALOG3 = Catalog(
    [InstanceType("s.large", 2, 8192, 0.10, zones=THREE_ZONES, max_pods=29), InstanceType("s.2xlarge", 8, 32768, 0.40, zones=THREE_ZONES, max_pods=58)],
    region="test",
)


def pool(**kw: object) -> Pool:
    return binpack_pool(instance_types=["*"], **kw)


def pod(name: str, labels: dict | None = None, *, cpu: str = "100m", namespace: str = "default", node: str = "", **spec: object) -> Pod:
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}], **spec}
    if node:
        body["nodeName"] = node
    return Pod.from_manifest({"metadata": {"name": name, "namespace": namespace, "labels": labels or {}}, "spec": body})


def spread(key: str, skew: int = 1, labels: dict | None = None, **extra: object) -> dict:
    selector = {"matchLabels": labels or {"app": "web"}}
    return {"topologySpreadConstraints": [{"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector, **extra}]}


def pod_affinity(kind: str, key: str, labels: dict) -> dict:
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": key, "labelSelector": {"matchLabels": labels}}]}}}


def info(name: str, zone: str, *pods: Pod) -> NodeInfo:
    made = NodeInfo(name, "p", "s.large", None, zone, CATALOG3["s.large"].allocatable, {ZONE: zone, HOST: name})  # type: ignore[arg-type]
    for p in pods:
        made.add_pod(p)
    return made


def feasible(incoming: Pod, nodes: list[NodeInfo]) -> list[str]:
    fw = Framework(DEFAULT_PROFILE, default_registry())
    fw.handle.node_infos = {n.name: n for n in nodes}
    state = CycleState()
    assert fw.run_pre_filter_plugins(state, incoming).is_success()
    return [n.name for n in nodes if fw.run_filter_plugins(state, incoming, n).is_success()]


# -- parsing ----------------------------------------------------------------------------------


def test_match_label_keys_are_folded_into_the_selector_as_the_api_server_does() -> None:
    p = pod("a", {"app": "web", "pod-template-hash": "v2"}, **spread(ZONE, matchLabelKeys=["pod-template-hash", "absent"]))
    (c,) = p.spread
    assert c.selector is not None
    assert c.selector.matches({"app": "web", "pod-template-hash": "v2"})
    assert not c.selector.matches({"app": "web", "pod-template-hash": "v1"})  # an old revision is not counted
    assert c.node_affinity_policy is InclusionPolicy.HONOR
    assert c.node_taints_policy is InclusionPolicy.IGNORE


def test_affinity_terms_default_to_the_pods_namespace_and_an_empty_namespace_selector_means_all() -> None:
    own = pod("a", namespace="team", **pod_affinity("podAffinity", ZONE, {"app": "x"})).pod_affinity.required[0]
    assert own.selects("team", {"app": "x"}, {})
    assert not own.selects("other", {"app": "x"}, {})
    term = {"topologyKey": ZONE, "labelSelector": {}, "namespaceSelector": {}}
    every = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    assert pod("b", **every).pod_affinity.required[0].selects("anywhere", {}, {})


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}, "topologySpreadConstraints[0].maxSkew"),
        ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Sometimes"}]}, "whenUnsatisfiable"),
        ({"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]}, "topologyKey"),
        ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}]}}}, "topologyKey"),
        (
            {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 101, "podAffinityTerm": {"topologyKey": ZONE}}]}}},
            "weight",
        ),
    ],
)
def test_bad_constraints_are_refused_naming_the_field(spec: dict, field: str) -> None:
    with pytest.raises(InvalidManifest, match=field.replace("[", r"\[").replace("]", r"\]")):
        pod("bad", **spec)


# -- kube-scheduler's documented cases --------------------------------------------------------


def test_spread_example_from_the_kubernetes_docs_one_constraint() -> None:
    """kubernetes.io "Pod Topology Spread Constraints", example one: four nodes in two zones,
    three foo=bar pods (node1, node2 in zone A; node3 in zone B). maxSkew 1 by zone sends the
    fourth to zone B; with maxSkew 2 it may go anywhere."""
    foo = {"foo": "bar"}
    nodes = [info("node1", "A", pod("p1", foo)), info("node2", "A", pod("p2", foo)), info("node3", "B", pod("p3", foo)), info("node4", "B")]
    assert feasible(pod("new", foo, **spread(ZONE, 1, foo)), nodes) == ["node3", "node4"]
    assert feasible(pod("new", foo, **spread(ZONE, 2, foo)), nodes) == ["node1", "node2", "node3", "node4"]


def test_spread_example_two_constraints_zone_and_node() -> None:
    """Example two: the same cluster, spread by zone and by node (maxSkew 1 each): only node4."""
    foo = {"foo": "bar"}
    nodes = [info("node1", "A", pod("p1", foo)), info("node2", "A", pod("p2", foo)), info("node3", "B", pod("p3", foo)), info("node4", "B")]
    both = {"topologySpreadConstraints": spread(ZONE, 1, foo)["topologySpreadConstraints"] + spread(HOST, 1, foo)["topologySpreadConstraints"]}
    assert feasible(pod("new", foo, **both), nodes) == ["node4"]


def _inclusion_nodes(tainted: tuple[str, ...], empty: str = "") -> list[NodeInfo]:
    """kube's integration cluster for node inclusion policies: node-1, node-2 in zone-1 and
    node-3, node-4 in zone-2; all but node-3 labelled foo; one foo pod on each but ``empty``."""
    nodes = []
    for i, zone in ((1, "zone-1"), (2, "zone-1"), (3, "zone-2"), (4, "zone-2")):
        name = f"node-{i}"
        labels = {"node": name, "zone": zone, **({"foo": ""} if i != 3 else {})}
        made = NodeInfo(name, "p", "s.large", None, zone, CATALOG3["s.large"].allocatable, labels)  # type: ignore[arg-type]
        made.taints = (Taint("node.kubernetes.io/unschedulable", TaintEffect.NO_SCHEDULE),) if name in tainted else ()
        if name != empty:
            made.add_pod(pod(f"p{i}a", {"foo": ""}))
        nodes.append(made)
    return nodes


def _foo_spread(key: str, **policies: str) -> dict:
    return {
        "maxSkew": 1,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
        **policies,
    }


FOO_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In", "values": [""]}]}]}
    }
}


@pytest.mark.parametrize(
    ("spec", "tainted", "candidates"),
    [
        # "NodeAffinityPolicy honored with labelSelectors, pods spread across zone as 2/1"
        ({"nodeSelector": {"foo": ""}, "topologySpreadConstraints": [_foo_spread("zone")]}, (), ["node-4"]),
        # "NodeAffinityPolicy ignored with nodeAffinity, pods spread across zone as 1/~2~"
        ({"affinity": FOO_AFFINITY, "topologySpreadConstraints": [_foo_spread("zone", nodeAffinityPolicy="Ignore")]}, (), ["node-1", "node-2"]),
        # "NodeTaintsPolicy honored, pods spread across zone as 2/1"
        ({"topologySpreadConstraints": [_foo_spread("zone", nodeTaintsPolicy="Honor")]}, ("node-3",), ["node-4"]),
        # "NodeTaintsPolicy ignored, pods spread across zone as 2/2"
        ({"topologySpreadConstraints": [_foo_spread("zone")]}, ("node-3",), ["node-1", "node-2", "node-4"]),
        # "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore"
        ({"nodeSelector": {"foo": ""}, "topologySpreadConstraints": [_foo_spread("zone"), _foo_spread("node")]}, ("node-2",), ["node-4"]),
        # "two node inclusion Constraints, zone: ignore/ignore, node: honor/honor"
        (
            {
                "nodeSelector": {"foo": ""},
                "topologySpreadConstraints": [_foo_spread("zone", nodeAffinityPolicy="Ignore"), _foo_spread("node", nodeTaintsPolicy="Honor")],
            },
            ("node-2",),
            ["node-1", "node-4"],
        ),
    ],
)
def test_node_inclusion_policies_table_from_kube_integration_tests(spec: dict, tainted: tuple[str, ...], candidates: list[str]) -> None:
    """test/integration/scheduler/filters: a spread counts only the pods on nodes eligible for
    the incoming pod (its node affinity with Honor, its tolerations with Honor)."""
    empty = "node-2" if spec.get("affinity") else ""  # the 1/~2~ case has no pod on node-2
    assert feasible(pod("p", {"foo": ""}, **spec), _inclusion_nodes(tainted, empty)) == candidates


def test_a_node_without_the_topology_key_is_not_a_candidate() -> None:
    bare = NodeInfo("bare", "p", "s.large", None, "", CATALOG3["s.large"].allocatable, {})  # type: ignore[arg-type]
    assert feasible(pod("new", {"app": "web"}, **spread(ZONE)), [bare]) == []


def test_anti_affinity_both_ways_and_the_first_of_a_self_affine_group() -> None:
    web = pod("web-0", {"app": "web"}, **pod_affinity("podAntiAffinity", HOST, {"app": "web"}))
    nodes = [info("n1", "A", web), info("n2", "A")]
    assert feasible(pod("web-1", {"app": "web"}, **pod_affinity("podAntiAffinity", HOST, {"app": "web"})), nodes) == ["n2"]
    assert feasible(pod("plain-web", {"app": "web"}), nodes) == ["n2"]  # symmetry: web-0's anti-affinity repels it
    assert feasible(pod("other", {"app": "db"}), nodes) == ["n1", "n2"]
    cache = pod_affinity("podAffinity", ZONE, {"app": "cache"})
    assert feasible(pod("cache-0", {"app": "cache"}, **cache), nodes) == ["n1", "n2"]  # first of its group: anywhere
    assert feasible(pod("client", {"app": "client"}, **cache), nodes) == []  # not self-affine: needs a cache pod
    placed = [info("n1", "A", pod("cache-0", {"app": "cache"})), info("n2", "B")]
    assert feasible(pod("cache-1", {"app": "cache"}, **cache), placed) == ["n1"]


def test_a_node_counts_its_pods_with_required_anti_affinity_through_every_change() -> None:
    """Existing pods' anti-affinity is looked for only on nodes that count some (kube's
    PodsWithRequiredAntiAffinity): the count follows adds, bulk adds, removals and clones."""
    web = pod("web-0", {"app": "web"}, **pod_affinity("podAntiAffinity", HOST, {"app": "web"}))
    bulk = info("n1", "A")
    bulk.add_pods([pod("a"), web])
    assert bulk.anti_pods == 1
    copy = bulk.clone()
    copy.remove_pod(web.key)
    assert (bulk.anti_pods, copy.anti_pods) == (1, 0)
    assert feasible(pod("plain-web", {"app": "web"}), [bulk, info("n2", "A")]) == ["n2"]  # a bulk-added pod repels too
    assert feasible(pod("plain-web", {"app": "web"}), [copy, info("n2", "A")]) == ["n1", "n2"]  # once it is gone, nothing does


def _skipped(incoming: Pod, nodes: list[NodeInfo]) -> set[str]:
    fw = Framework(DEFAULT_PROFILE, default_registry())
    fw.handle.node_infos = {n.name: n for n in nodes}
    state = CycleState()
    assert fw.run_pre_filter_plugins(state, incoming).is_success()
    return set(state.skip_filter)


def test_prefilter_skips_the_filters_with_nothing_to_check_as_kube_does() -> None:
    """PodTopologySpread skips with no DoNotSchedule constraint, InterPodAffinity with no
    required terms of its own and no placed pod's required anti-affinity matching it,
    VolumeBinding, VolumeZone and NodeVolumeLimits with no claims, NodeAffinity with no node selector
    or required node affinity, NodePorts with no host ports, DynamicResources with no
    resource claims (their PreFilters in kube-scheduler); this project's InstanceTypeMatch,
    CapacityType and Zone with no annotation (CapacityType also checks a pod no controller
    makes again, which stays off Capacity Blocks)."""
    plain = dataclasses.replace(pod("plain", {"app": "db"}), owner=OwnerRef("apps/v1", "ReplicaSet", "db"))
    assert "CapacityType" not in _skipped(pod("bare", {"app": "db"}), [info("n1", "A")])
    assert _skipped(plain, [info("n1", "A")]) == {
        "PodTopologySpread",
        "InterPodAffinity",
        "VolumeBinding",
        "VolumeZone",
        "NodeVolumeLimits",
        "NodeAffinity",
        "NodePorts",
        "DynamicResources",
        "InstanceTypeMatch",
        "CapacityType",
        "Zone",
    }
    assert "NodeAffinity" not in _skipped(pod("sel", nodeSelector={ZONE: "A"}), [info("n1", "A")])
    ported = {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}
    assert "NodePorts" not in _skipped(pod("ports", **ported), [info("n1", "A")])
    assert "PodTopologySpread" not in _skipped(pod("s", {"app": "web"}, **spread(ZONE)), [info("n1", "A")])
    soft = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}]}
    assert "PodTopologySpread" in _skipped(pod("soft", {"app": "web"}, **soft), [info("n1", "A")])  # scored, not filtered
    assert "InterPodAffinity" not in _skipped(pod("a", {"app": "db"}, **pod_affinity("podAffinity", ZONE, {"app": "x"})), [info("n1", "A")])
    assert "InterPodAffinity" not in _skipped(pod("aa", {"app": "db"}, **pod_affinity("podAntiAffinity", HOST, {"app": "x"})), [info("n1", "A")])
    guard = pod("guard", {"app": "guard"}, **pod_affinity("podAntiAffinity", HOST, {"app": "web"}))
    assert "InterPodAffinity" not in _skipped(pod("plain-web", {"app": "web"}), [info("n1", "A", guard)])  # symmetry
    assert "InterPodAffinity" in _skipped(pod("plain-db", {"app": "db"}), [info("n1", "A", guard)])


# -- the scaler ---------------------------------------------------------------------------------


def test_thirty_replicas_spread_by_zone_get_ten_per_zone() -> None:
    pods = [pod(f"web-{i}", {"app": "web"}, **spread(ZONE)) for i in range(30)]
    d = scaler(pool(), catalog=CATALOG3).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    zone = {n.name: n.zone for n in d.start}
    assert collections.Counter(zone[d.bindings[p.key]] for p in pods) == {"z-a": 10, "z-b": 10, "z-c": 10}


def test_hostname_anti_affinity_gets_one_node_per_replica_and_others_fill_them() -> None:
    db = pod_affinity("podAntiAffinity", HOST, {"app": "db"})
    pods = [pod(f"db-{i}", {"app": "db"}, **db) for i in range(4)] + [pod(f"job-{i}", {"app": "job"}) for i in range(4)]
    d = scaler(pool(), catalog=CATALOG3).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert len(d.bindings) == 8
    assert len({d.bindings[f"default/db-{i}"] for i in range(4)}) == 4
    assert len(d.start) == 4  # the jobs fill the room the replicas leave


def test_a_zonal_self_affine_group_lands_in_one_zone_and_an_existing_member_draws_the_rest() -> None:
    cache = pod_affinity("podAffinity", ZONE, {"app": "cache"})
    pods = [pod(f"c-{i}", {"app": "cache"}, cpu="1500m", **cache) for i in range(12)]
    d = scaler(pool(), catalog=CATALOG3).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert len(d.bindings) == 12
    assert len({n.zone for n in d.start}) == 1
    anchor = node("n0", "a.large", pool="general", zone="z-c")
    running = pod("c-old", {"app": "cache"}, node="n0")
    d = scaler(pool(), catalog=CATALOG3).compute(ClusterSnapshot((*pods, running), (anchor,)), 0.0)
    assert {n.zone for n in d.start} == {"z-c"}


def test_a_kept_binding_is_checked_against_the_anti_affinity_of_pods_kept_before_it() -> None:
    """Last loop's bindings are kept while they still pass the filters, in priority order;
    pods of one class share a PreFilter answer, but a pod kept with required anti-affinity
    makes the next ones ask again (its terms repel them: symmetry)."""
    guard = pod("b-guard", {"app": "guard"}, **pod_affinity("podAntiAffinity", HOST, {"app": "web"}))
    first, second = pod("a-web", {"app": "web"}), pod("c-web", {"app": "web"})
    nodes = (node("n1", "a.large", pool="general", zone="z-a", bound=("a-web",)), node("n2", "a.large", pool="general", zone="z-a", bound=("b-guard", "c-web")))
    d = scaler(pool(), catalog=CATALOG3).compute(ClusterSnapshot((first, guard, second), nodes), 0.0)
    assert (d.bindings[first.key], d.bindings[guard.key]) == ("n1", "n2")
    assert d.bindings[second.key] != "n2"


def test_spread_over_a_zone_no_pool_may_use_is_unschedulable_with_the_constraint_named() -> None:
    only_a = pool(zones=["z-a"])
    elsewhere = node("n-b", "a.large", pool="other", zone="z-b").with_changes(unschedulable=True)  # still a domain (nodeTaintsPolicy: Ignore)
    pods = [pod(f"web-{i}", {"app": "web"}, **spread(ZONE)) for i in range(3)] + [pod("web-placed", {"app": "web"}, node="n-b")]
    d = scaler(only_a, catalog=CATALOG3).compute(ClusterSnapshot(tuple(pods), (elsewhere,)), 0.0)
    placed = [k for k in d.bindings if k.startswith("default/web-")]
    assert len(placed) == 2  # zone a may hold at most one more than zone b, which takes no more
    (why,) = {d.unschedulable.get(f"default/web-{i}", "") for i in range(3)} - {""}
    assert "topology spread" in why


def test_schedule_anyway_spread_scores_the_emptier_domain_higher() -> None:
    foo = {"foo": "bar"}
    nodes = [info("node1", "A", pod("p1", foo), pod("p2", foo)), info("node2", "B")]
    soft = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": foo}}]}
    incoming = pod("new", foo, **soft)
    assert not incoming.inter_pod  # a preference: placed with its class, not one at a time
    fw = Framework(DEFAULT_PROFILE, default_registry())
    fw.handle.node_infos = {n.name: n for n in nodes}
    state = CycleState()
    assert fw.run_pre_filter_plugins(state, incoming).is_success()
    assert [n.name for n in nodes if fw.run_filter_plugins(state, incoming, n).is_success()] == ["node1", "node2"]
    scores, status = fw.run_score_plugins(state, incoming, nodes)
    assert status.is_success()
    assert scores["PodTopologySpread"]["node2"] > scores["PodTopologySpread"]["node1"]


def test_a_terminating_pod_is_not_counted_by_topology_spread_as_kube_bypasses_it() -> None:
    """kube's countPodsMatchSelector skips pods with a deletionTimestamp (kubernetes#87621):
    a replica on its way out leaves its zone free for the one replacing it. Anti-affinity
    still counts it, as kube's InterPodAffinity does."""
    foo = {"foo": "bar"}
    going = Pod.from_manifest(
        {
            "metadata": {"name": "old", "namespace": "default", "labels": foo, "deletionTimestamp": "2026-11-28T01:00:00Z"},
            "spec": {"containers": [{"name": "c"}], "nodeName": "node1"},
        }
    )
    assert going.terminating
    nodes = [info("node1", "A", going), info("node2", "B")]
    assert feasible(pod("new", foo, **spread(ZONE, 1, foo)), nodes) == ["node1", "node2"]
    staying = pod("old", foo, node="node1")
    assert feasible(pod("new", foo, **spread(ZONE, 1, foo)), [info("node1", "A", staying), info("node2", "B")]) == ["node2"]
    assert feasible(pod("new", foo, **pod_affinity("podAntiAffinity", ZONE, foo)), nodes) == ["node2"]
