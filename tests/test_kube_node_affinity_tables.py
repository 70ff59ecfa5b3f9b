"""Cases from kube-scheduler's own NodeAffinity table, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/nodeaffinity/node_affinity_test.go
(TestNodeAffinity, at commit 022462ccaeb5664cfd0c860978624bb0619aaa01): the cases whose
terms name nodes (``matchFields`` on ``metadata.name``), which kube's PreFilter reads, and
the one whose term holds a value that is no label value (the API server lets it through;
kube's selector parser fails the term, which then matches no node). The
expectations are kube's: a pod whose terms name no node in common is unschedulable at
PreFilter ("pod affinity terms conflict"); otherwise the Filter decides node by node. (The
``PreFilterResult`` node names kube returns are an optimisation of its own and not
compared.) The ``addedAffinity`` cases (a scheduler profile's ``NodeAffinityArgs``) of
TestNodeAffinity and TestNodeAffinityPriority are below."""

from __future__ import annotations

import dataclasses

import pytest

from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scheduling import CycleState
from nodemanager.scheduling.interfaces import FrameworkHandle
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.plugins.placement import ENFORCED, NodeAffinity
from nodemanager.scheduling.status import Code


def _pod(*terms: dict) -> Pod:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}
    return Pod.from_manifest({"metadata": {"name": "p", "namespace": "default"}, "spec": {"affinity": affinity, "containers": []}})


def _names(*names: str) -> dict:
    return {"key": "metadata.name", "operator": "In", "values": list(names)}


def _label(key: str, *values: str) -> dict:
    return {"key": key, "operator": "In", "values": list(values)}


CASES = [
    # (name, pod, node, labels, kube's PreFilter status, whether kube's Filter passes)
    (
        "Pod with one term: both matchFields and matchExpressions match",
        _pod({"matchFields": [_names("node1")], "matchExpressions": [_label("foo", "bar")]}),
        "node1",
        {"foo": "bar"},
        None,
        True,
    ),
    (
        "Pod with two terms: both matchFields and matchExpressions do not match",
        _pod({"matchFields": [_names("node1")]}, {"matchExpressions": [_label("foo", "not-match-to-bar")]}),
        "node2",
        {"foo": "bar"},
        None,
        False,
    ),
    ("Pod with two terms of node.Name affinity", _pod({"matchFields": [_names("node1")]}, {"matchFields": [_names("node2")]}), "node2", {}, None, True),
    (
        "Pod with an invalid value in Affinity term won't be scheduled onto the node",
        _pod({"matchExpressions": [{"key": "foo", "operator": "NotIn", "values": ["invalid value: ___@#$%^"]}]}),
        "node1",
        {"foo": "bar"},
        None,
        False,
    ),
    (
        "Pod with two conflicting mach field requirements",
        _pod({"matchFields": [_names("node1"), _names("node2")]}),
        "node2",
        {"foo": "bar"},
        "pod affinity terms conflict",
        False,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_node_affinity_as_kube_decides(case: tuple) -> None:
    name, pod, node, labels, pre_filter, passes = case
    plugin = NodeAffinity(FrameworkHandle())
    info = NodeInfo(node, "pool", "m.large", CapacityType.ON_DEMAND, "z", Resources({"cpu": 1000, "memory": 2**30, "pods": 10}), labels)
    status = plugin.pre_filter(CycleState(), pod)
    if pre_filter is None:
        assert status is None, name
    else:
        assert status is not None
        assert (status.code, status.message) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, pre_filter), name
    verdict = plugin.filter(CycleState(), pod, info)
    assert (verdict is None) is passes, name
    if not passes:
        assert verdict is not None
        assert verdict.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE, name


def test_the_scaler_reports_conflicting_terms_as_unschedulable_and_boots_nothing() -> None:
    """The PreFilter's answer reaches the user: the reason is kube's, and no node is booted."""
    from builders import scaler

    from nodemanager.scaler import ClusterSnapshot

    pod = _pod({"matchFields": [_names("node1"), _names("node2")]})
    decision = scaler().compute(ClusterSnapshot((pod,), ()), 0.0)
    assert decision.start == ()
    assert "pod affinity terms conflict" in decision.unschedulable[pod.key]


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ({"key": "foo", "operator": "NotIn", "values": ["invalid value: ___@#$%^"]}, "values[0]: invalid label value"),
        ({"key": "foo", "operator": "In", "values": ["bar", "x" * 64]}, "values[1]: invalid label value"),
        ({"key": "gpu-score", "operator": "Gt", "values": ["high"]}, "values[0]: for 'Gt', 'Lt' operators, the value must be an integer"),
    ],
)
def test_a_term_kubes_parser_refuses_matches_no_node_and_the_user_is_told_why(expression: dict, problem: str) -> None:
    """The term matches nothing (another term still may), so no node is booted for it,
    and the reason names the field and what is wrong with it."""
    from builders import scaler

    from nodemanager.scaler import ClusterSnapshot

    pod = _pod({"matchExpressions": [expression]})
    decision = scaler().compute(ClusterSnapshot((pod,), ()), 0.0)
    assert decision.start == ()
    assert "nodeSelectorTerms[0].matchExpressions[0]." + problem in decision.unschedulable[pod.key]
    either = _pod({"matchExpressions": [expression]}, {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]})
    assert scaler().compute(ClusterSnapshot((either,), ()), 0.0).bindings


# -- addedAffinity (NodeAffinityArgs) ------------------------------------------------------------

_NODE2 = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [_names("node2")]}]}}
_ZONE_BAR = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [_label("zone", "bar")]}]}}

POD_REASON = "node(s) didn't match Pod's node affinity"
ADDED_CASES = [
    # (kube's name, pod, addedAffinity, kube's Filter status: None or its reason)
    ("Matches added affinity and Pod's node affinity", _pod({"matchExpressions": [_label("zone", "foo")]}), _NODE2, None),
    ("Matches added affinity but not Pod's node affinity", _pod({"matchExpressions": [_label("zone", "bar")]}), _NODE2, POD_REASON),
    ("Doesn't match added affinity", Pod.from_manifest({"metadata": {"name": "p"}, "spec": {"containers": []}}), _ZONE_BAR, ENFORCED),
]


@pytest.mark.parametrize("case", ADDED_CASES, ids=[c[0] for c in ADDED_CASES])
def test_added_affinity_filters_as_kube_decides(case: tuple) -> None:
    name, pod, added, reason = case
    plugin = NodeAffinity(FrameworkHandle(), {"addedAffinity": added})
    info = NodeInfo("node2", "pool", "m.large", CapacityType.ON_DEMAND, "z", Resources({"cpu": 1000, "memory": 2**30, "pods": 10}), {"zone": "foo"})
    assert plugin.pre_filter(CycleState(), pod) is None, name  # (a pod with no affinity of its own is not skipped)
    verdict = plugin.filter(CycleState(), pod, info)
    if reason is None:
        assert verdict is None, name
    else:
        assert verdict is not None
        assert (verdict.code, verdict.message) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason), name


def _preferring(weight: int, key: str, value: str) -> dict:
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "preference": {"matchExpressions": [_label(key, value)]}}]}


@pytest.mark.parametrize(
    ("case", "own", "added", "nodes", "expected"),
    [
        ("added affinity", None, _preferring(2, "foo", "bar"), {"node1": {"foo": "bar"}, "node2": {"key": "value"}}, {"node1": 100, "node2": 0}),
        (
            "added affinity and pod has default affinity",
            _preferring(2, "foo", "bar"),
            _preferring(3, "key", "value"),
            {"node1": {"foo": "bar"}, "node2": {"key": "value"}, "node3": {"foo": "bar", "key": "value", "az": "az1"}},
            {"node1": 40, "node2": 60, "node3": 100},
        ),
    ],
)
def test_added_preferred_affinity_scores_as_kube_scores_it(case: str, own: dict | None, added: dict, nodes: dict, expected: dict) -> None:
    """kube's TestNodeAffinityPriority, its addedAffinity cases: the added preferences add
    to the pod's own."""
    spec: dict = {"containers": []}
    if own:
        spec["affinity"] = {"nodeAffinity": own}
    pod = Pod.from_manifest({"metadata": {"name": "p"}, "spec": spec})
    plugin = NodeAffinity(FrameworkHandle(), {"addedAffinity": added})
    room = Resources({"cpu": 1000, "memory": 2**30, "pods": 10})
    infos = [NodeInfo(n, "pool", "m.large", CapacityType.ON_DEMAND, "z", room, labels) for n, labels in nodes.items()]
    assert plugin.pre_score(CycleState(), pod, infos) is None
    scores, _ = plugin.score_nodes(CycleState(), pod, infos)
    plugin.normalize_score(CycleState(), pod, scores)
    assert scores == expected, case


def test_the_scaler_boots_only_nodes_the_added_affinity_admits() -> None:
    """New nodes meet the profile's added affinity as existing ones must: a pool whose
    nodes it refuses boots nothing, the one it admits boots for every pod."""
    from builders import binpack_pool, pod, scaler

    from nodemanager.config.schema import NodeDefaults
    from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, ScalerSettings
    from nodemanager.scheduling.profile import DEFAULT_PROFILE

    added = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [_label("team", "blue")]}]}}
    profile = dataclasses.replace(DEFAULT_PROFILE, plugin_args={"NodeAffinity": {"addedAffinity": added}})
    pools = (binpack_pool("green", labels={"team": "green"}, weight=10), binpack_pool("blue", labels={"team": "blue"}))
    template = scaler(*pools)
    settings = ScalerSettings(pools, NodeDefaults(default_instance_type="a.large", name_tag="nm"), profile)
    pods = [pod(f"p{i}") for i in range(3)]
    d = BindingNodeScaler(settings, template.catalog).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert {n.pool for n in d.start} == {"blue"}
    assert len(d.bindings) == 3
    assert {n.pool for n in template.compute(ClusterSnapshot(tuple(pods), ()), 0.0).start} == {"green"}  # without it: the heavier pool
