"""Cluster-wide default spread constraints (PodTopologySpreadArgs) with kube's DefaultSelector,
and namespace labels for ``namespaceSelector``: parsing, kube's own table cases, the scaler
planning with them, and a workload file carrying the objects."""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path
from types import MappingProxyType

import pytest
import yaml
from builders import node, scaler
from test_config import MINIMAL, REPO
from test_interpod import CATALOG3, HOST, ZONE, pod, pool

from nodemanager.config.load import parse_config
from nodemanager.errors import ConfigError, InvalidManifest
from nodemanager.model import Pod
from nodemanager.model.interpod import SYSTEM_DEFAULT_SPREAD, WhenUnsatisfiable, parse_spread_defaults
from nodemanager.model.pod_owners import Namespace, PodSelecting, ReplicaSet, ReplicationController, Service, SpreadDefaults, StatefulSet, default_selector
from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot
from nodemanager.scheduling.profile import DEFAULT_PROFILE

NS = "test"
ZONE_DEFAULT = {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}


def owned(name: str, labels: dict, owner: tuple[str, str, str] | None = None, namespace: str = NS, **spec: object) -> Pod:
    """A pod whose controller is ``owner`` (apiVersion, kind, name)."""
    meta: dict = {"name": name, "namespace": namespace, "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner[0], "kind": owner[1], "name": owner[2], "uid": "u", "controller": True}]
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}], **spec}
    return Pod.from_manifest({"metadata": meta, "spec": body})


def obj(kind: type[PodSelecting], name: str, selector: dict | None, namespace: str = NS) -> PodSelecting:
    if selector is not None and not kind.selector_is_map:
        selector = {"matchLabels": selector}
    return kind.from_manifest({"metadata": {"name": name, "namespace": namespace}, "spec": {"selector": selector}})


def as_set(selector: object) -> dict[str, str]:
    assert selector is not None
    return {r.key: r.values[0] for r in selector.requirements}  # type: ignore[attr-defined]


# -- kube's own cases (pkg/scheduler/framework/plugins/helper/spread_test.go) -----------------


@pytest.mark.parametrize(("i", "expect"), [(0, {"app": "test-0"}), (1, {"app": "test-1"}), (2, {"app": "test-2"}), (3, None), (4, None)])
def test_get_pod_services_table(i: int, expect: dict | None) -> None:
    services = [obj(Service, f"service-{j}", {"app": f"test-{j}"}) for j in range(3)]
    p = owned(f"test-pod-{i}", {"app": f"test-{i}", "label": f"label-{i}"})
    found = default_selector(p.labels, p.owner, services)
    assert (as_set(found) if found else None) == expect


def test_default_selector_table() -> None:
    """TestDefaultSelector: resources are added cumulatively, as the kube test does."""
    pod_labels = {"podLabelKey": "podLabelVal"}
    store: list[PodSelecting] = []
    cases = [
        (None, [], None),  # no resources: an empty selector, so no default constraint
        (None, [obj(Service, "test-service", pod_labels)], pod_labels),
        (
            ("apps/v1", "ReplicaSet", "test-replicaset"),
            [obj(ReplicaSet, "test-replicaset", {"replicaSetLabelKey": "replicaSetLabelVal"})],
            {**pod_labels, "replicaSetLabelKey": "replicaSetLabelVal"},
        ),
        (
            ("v1", "ReplicationController", "test-replicationcontroller"),
            [obj(ReplicationController, "test-replicationcontroller", {"replicationLabelKey": "replicationLabelVal"})],
            {**pod_labels, "replicationLabelKey": "replicationLabelVal"},
        ),
        (
            ("apps/v1", "StatefulSet", "test-statefulset"),
            [obj(StatefulSet, "test-statefulset", {"statefulSetLabelKey": "statefulSetLabelVal"})],
            {**pod_labels, "statefulSetLabelKey": "statefulSetLabelVal"},
        ),
    ]
    for owner, added, expect in cases:
        store += added
        p = owned("test-pod", pod_labels, owner)
        found = default_selector(p.labels, p.owner, store)
        assert (as_set(found) if found else None) == expect, owner


def test_a_service_without_a_selector_selects_nothing_and_other_namespaces_do_not_count() -> None:
    p = owned("a", {"app": "web"}, ("apps/v1", "ReplicaSet", "web-1"))
    assert default_selector(p.labels, p.owner, [obj(Service, "headless", None)]) is None
    defaults = SpreadDefaults(SYSTEM_DEFAULT_SPREAD, [obj(Service, "web", {"app": "web"}, namespace="other")])
    assert defaults.apply(p) is p  # the service is in another namespace
    wrong_version = owned("b", {"app": "web"}, ("extensions/v1beta1", "ReplicaSet", "web-1"))  # kube matches the group/version too
    assert default_selector(wrong_version.labels, wrong_version.owner, [obj(ReplicaSet, "web-1", {"app": "web"})]) is None


def test_defaults_apply_only_to_pods_without_constraints_of_their_own() -> None:
    defaults = SpreadDefaults(SYSTEM_DEFAULT_SPREAD, [obj(Service, "web", {"app": "web"})])
    plain = defaults.apply(owned("a", {"app": "web"}))
    assert [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in plain.spread] == [
        (HOST, 3, WhenUnsatisfiable.SCHEDULE_ANYWAY),
        (ZONE, 5, WhenUnsatisfiable.SCHEDULE_ANYWAY),
    ]
    assert all(c.selector is not None and as_set(c.selector) == {"app": "web"} for c in plain.spread)
    own = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}]}
    mine = owned("b", {"app": "web"}, **own)
    assert defaults.apply(mine) is mine


# -- configuration ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"defaultingType": "Sometimes"}, "defaultingType"),
        ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}, "defaultingType"),  # System by default
        ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}, "maxSkew"),
        ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Never"}]}, "whenUnsatisfiable"),
        (
            {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}]},
            "labelSelector",
        ),
        ({"defaultingType": "List", "defaultConstraints": [ZONE_DEFAULT["defaultConstraints"][0]] * 2}, "defaultConstraints[1]"),
        ({"defaultingType": "List", "defaults": []}, "defaults"),
    ],
)
def test_bad_plugin_args_are_refused_naming_the_field(args: dict, field: str) -> None:
    with pytest.raises(InvalidManifest) as caught:
        parse_spread_defaults(args)
    assert field in caught.value.field
    text = MINIMAL + yaml.safe_dump({"scheduling": {"pluginArgs": {"PodTopologySpread": args}}})
    with pytest.raises(ConfigError) as config_error:
        parse_config(text, "provider.yaml", REPO)
    assert any(p.startswith("scheduling.pluginArgs.PodTopologySpread.") and field in p for p in config_error.value.problems), config_error.value.problems


def test_no_args_are_the_system_defaults_and_a_list_may_be_empty() -> None:
    assert parse_spread_defaults({}) == SYSTEM_DEFAULT_SPREAD
    assert parse_spread_defaults({"defaultingType": "List"}) == ()


# -- the scaler -------------------------------------------------------------------------------


def zone_default_scaler() -> object:
    settings = scaler(pool(), catalog=CATALOG3).settings
    args = MappingProxyType({"PodTopologySpread": ZONE_DEFAULT})
    return BindingNodeScaler(dataclasses.replace(settings, profile=dataclasses.replace(DEFAULT_PROFILE, plugin_args=args)), CATALOG3)


def zones_of(s: object, snapshot: ClusterSnapshot) -> collections.Counter[str]:
    d = s.compute(snapshot, 0.0)  # type: ignore[attr-defined]
    assert not d.unschedulable, d.unschedulable
    zone = {n.name: n.zone for n in d.start}
    return collections.Counter(zone[d.bindings[p.key]] for p in snapshot.pods)


def test_a_hard_cluster_default_spreads_a_replica_sets_pods_over_the_zones() -> None:
    rs = ("apps/v1", "ReplicaSet", "web-6d4")
    pods = tuple(owned(f"web-{i}", {"app": "web"}, rs, cpu="1500m") for i in range(6))
    with_owner = ClusterSnapshot(pods, (), pod_selecting=(obj(ReplicaSet, "web-6d4", {"app": "web"}),))
    assert sorted(zones_of(zone_default_scaler(), with_owner).values()) == [2, 2, 2]
    # Nothing selects them: kube gives them no default constraint, so nothing asks them apart.
    alone = ClusterSnapshot(pods, ())
    assert sum(zones_of(zone_default_scaler(), alone).values()) == 6


def test_a_namespace_selector_repels_only_pods_of_namespaces_with_matching_labels() -> None:
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "db"}}, "namespaceSelector": {"matchLabels": {"tier": "data"}}}
                ]
            }
        }
    }
    guard = pod("guard", {"app": "guard"}, node="n-a", namespace="ops", **anti)
    nodes = (node("n-a", "a.large", pool="general", zone="z-a"),)
    dbs = (pod("db-1", {"app": "db"}, namespace="prod-data"), pod("db-2", {"app": "db"}, namespace="scratch"))
    snapshot = ClusterSnapshot((guard, *dbs), nodes, namespaces={"prod-data": {"tier": "data"}, "scratch": {"tier": "tmp"}})
    d = scaler(pool(), catalog=CATALOG3).compute(snapshot, 0.0)
    zone = {n.name: n.zone for n in d.start} | {"n-a": "z-a"}
    assert zone[d.bindings["prod-data/db-1"]] != "z-a"  # its namespace matches the guard's term
    assert d.bindings["scratch/db-2"] == "n-a"  # the same labels in a namespace the term does not select


def test_a_workload_file_carries_namespaces_and_the_objects_that_select_pods(tmp_path: Path) -> None:
    from nodemanager.cluster.workload import parse_cluster_objects

    doc = {
        "pods": [],
        "namespaces": [{"metadata": {"name": "prod", "labels": {"tier": "data"}}}],
        "services": [{"metadata": {"name": "web", "namespace": "prod"}, "spec": {"selector": {"app": "web"}}}],
        "replicaSets": [{"metadata": {"name": "web-1", "namespace": "prod"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}}],
        "statefulSets": [{"metadata": {"name": "db"}, "spec": {"selector": {"matchLabels": {"app": "db"}}}}],
        "replicationControllers": [{"metadata": {"name": "old"}, "spec": {"selector": {"app": "old"}}}],
    }
    objects = parse_cluster_objects(yaml.safe_dump(doc))
    assert objects.namespaces == (Namespace("prod", {"tier": "data"}),)
    assert [(type(o).__name__, o.key) for o in objects.pod_selecting] == [
        ("Service", "prod/web"),
        ("ReplicationController", "default/old"),
        ("ReplicaSet", "prod/web-1"),
        ("StatefulSet", "default/db"),
    ]
    doc["services"] = [{"metadata": {"name": "web"}, "spec": {"selector": ["app"]}}]
    with pytest.raises(Exception, match=r"services\[0\]\.spec\.selector"):
        parse_cluster_objects(yaml.safe_dump(doc))
