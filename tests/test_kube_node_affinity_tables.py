"""Cases from kube-scheduler's own NodeAffinity table, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/nodeaffinity/node_affinity_test.go
(TestNodeAffinity, at commit 022462ccaeb5664cfd0c860978624bb0619aaa01): the cases whose
terms name nodes (``matchFields`` on ``metadata.name``), which kube's PreFilter reads, and
the one whose term holds a value that is no label value (the API server lets it through;
kube's selector parser fails the term, which then matches no node). The
expectations are kube's: a pod whose terms name no node in common is unschedulable at
PreFilter ("pod affinity terms conflict"); otherwise the Filter decides node by node. (The
``PreFilterResult`` node names kube returns are an optimisation of its own and not
compared; the ``addedAffinity`` cases are not modelled: see the profile's options.)"""

from __future__ import annotations

import pytest

from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scheduling import CycleState
from nodemanager.scheduling.interfaces import FrameworkHandle
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.plugins.placement import NodeAffinity
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
