"""Cases from kube-scheduler's own TaintToleration tables, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/tainttoleration/taint_toleration_test.go
(TestTaintTolerationScore and TestTaintTolerationFilter, at commit
04c0d74f8e8bf18e93a9d8d082b218d3eb4c6395), every case; the numeric ``Gt``/``Lt`` ones as with
kube's feature gate on (nodemanager always reads them). Not modelled, and so not run: the four
cases of TestTaintTolerationFilterWithFeatureGate with the gate off. The expectations are
kube's: the filter's code (kube's message for a non-numeric taint value is its parser's
error; here the reason is the untolerated taint), the normalized scores."""

from __future__ import annotations

import pytest

from nodemanager.model import CapacityType, Pod, Resources, Taint, TaintEffect
from nodemanager.scheduling import CycleState
from nodemanager.scheduling.interfaces import FrameworkHandle
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.plugins.placement import TaintToleration
from nodemanager.scheduling.status import Code

NS, PNS = "NoSchedule", "PreferNoSchedule"
SLA, LEVEL = "node.kubernetes.io/sla", "node.example.com/priority-level"


def _pod(*tolerations: tuple) -> Pod:
    """Tolerations as (key, operator, value, effect); an empty effect tolerates every effect."""
    spec = {"containers": [], "tolerations": [{"key": k, "operator": o, "value": v, **({"effect": e} if e else {})} for k, o, v, e in tolerations]}
    return Pod.from_manifest({"metadata": {"name": "pod1", "namespace": "default"}, "spec": spec})


def _node(name: str, *taints: tuple[str, str, str]) -> NodeInfo:
    """Taints as (key, value, effect)."""
    made = tuple(Taint(k, TaintEffect(e), v) for k, v, e in taints)
    return NodeInfo(name, "p", "", CapacityType.ON_DEMAND, "", Resources({"cpu": 1000, "memory": 2**30, "pods": 10}), {}, made)


SCORE_CASES = [
    (
        "node with taints tolerated by the pod, gets a higher score than those node with intolerable taints",
        _pod(("foo", "Equal", "bar", PNS)),
        [_node("nodeA", ("foo", "bar", PNS)), _node("nodeB", ("foo", "blah", PNS))],
        {"nodeA": 100, "nodeB": 0},
    ),
    (
        "the nodes that all of their taints are tolerated by the pod, get the same score, no matter how many tolerable taints a node has",
        _pod(("cpu-type", "Equal", "arm64", PNS), ("disk-type", "Equal", "ssd", PNS)),
        [_node("nodeA"), _node("nodeB", ("cpu-type", "arm64", PNS)), _node("nodeC", ("cpu-type", "arm64", PNS), ("disk-type", "ssd", PNS))],
        {"nodeA": 100, "nodeB": 100, "nodeC": 100},
    ),
    (
        "the more intolerable taints a node has, the lower score it gets.",
        _pod(("foo", "Equal", "bar", PNS)),
        [_node("nodeA"), _node("nodeB", ("cpu-type", "arm64", PNS)), _node("nodeC", ("cpu-type", "arm64", PNS), ("disk-type", "ssd", PNS))],
        {"nodeA": 100, "nodeB": 50, "nodeC": 0},
    ),
    (
        "only taints and tolerations that have effect PreferNoSchedule are checked by taints-tolerations priority function",
        _pod(("cpu-type", "Equal", "arm64", NS), ("disk-type", "Equal", "ssd", NS)),
        [_node("nodeA"), _node("nodeB", ("cpu-type", "arm64", NS)), _node("nodeC", ("cpu-type", "arm64", PNS), ("disk-type", "ssd", PNS))],
        {"nodeA": 100, "nodeB": 100, "nodeC": 0},
    ),
    (
        "Default behaviour No taints and tolerations, lands on node with no taints",
        _pod(),
        [_node("nodeA"), _node("nodeB", ("cpu-type", "arm64", PNS))],
        {"nodeA": 100, "nodeB": 0},
    ),
    (
        "Numeric Gt operator: pod with Gt toleration prefers nodes with matching SLA taint",
        _pod((SLA, "Gt", "950", PNS)),
        [_node("nodeA", (SLA, "800", PNS)), _node("nodeB", (SLA, "999", PNS))],
        {"nodeA": 0, "nodeB": 100},
    ),
    (
        "Numeric Lt operator: pod with Lt toleration prefers nodes with matching SLA taint",
        _pod((SLA, "Lt", "800", PNS)),
        [_node("nodeA", (SLA, "950", PNS)), _node("nodeB", (SLA, "700", PNS))],
        {"nodeA": 0, "nodeB": 100},
    ),
    (
        "Score ignores parse errors from numeric PreferNoSchedule taint value",
        _pod((SLA, "Gt", "950", PNS)),
        [_node("nodeA"), _node("nodeB", (SLA, "high", PNS))],
        {"nodeA": 100, "nodeB": 0},
    ),
]


@pytest.mark.parametrize("case", SCORE_CASES, ids=[c[0] for c in SCORE_CASES])
def test_taint_toleration_scores_as_kube_does(case: tuple) -> None:
    name, pod, nodes, expected = case
    plugin = TaintToleration(FrameworkHandle())
    state = CycleState()
    scores = {n.name: plugin.score(state, pod, n)[0] for n in nodes}
    plugin.normalize_score(state, pod, scores)
    assert scores == expected, name


FILTER_CASES = [
    ("A pod having no tolerations can't be scheduled onto a node with nonempty taints", _pod(), _node("nodeA", ("dedicated", "user1", NS)), False),
    (
        "A pod which can be scheduled on a dedicated node assigned to user1 with effect NoSchedule",
        _pod(("dedicated", "Equal", "user1", NS)),
        _node("nodeA", ("dedicated", "user1", NS)),
        True,
    ),
    (
        "A pod which can't be scheduled on a dedicated node assigned to user2 with effect NoSchedule",
        _pod(("dedicated", "Equal", "user2", NS)),
        _node("nodeA", ("dedicated", "user1", NS)),
        False,
    ),
    (
        "A pod can be scheduled onto the node, with a toleration uses operator Exists that tolerates the taints on the node",
        _pod(("foo", "Exists", "", NS)),
        _node("nodeA", ("foo", "bar", NS)),
        True,
    ),
    (
        "A pod has multiple tolerations, node has multiple taints, all the taints are tolerated, pod can be scheduled onto the node",
        _pod(("dedicated", "Equal", "user2", NS), ("foo", "Exists", "", NS)),
        _node("nodeA", ("dedicated", "user2", NS), ("foo", "bar", NS)),
        True,
    ),
    (
        "A pod has a toleration that keys and values match the taint on the node, but (non-empty) effect doesn't match, can't be scheduled onto the node",
        _pod(("foo", "Equal", "bar", PNS)),
        _node("nodeA", ("foo", "bar", NS)),
        False,
    ),
    (
        "The pod has a toleration that keys and values match the taint on the node, the effect of toleration is empty, "
        "and the effect of taint is NoSchedule. Pod can be scheduled onto the node",
        _pod(("foo", "Equal", "bar", "")),
        _node("nodeA", ("foo", "bar", NS)),
        True,
    ),
    (
        "The pod has a toleration that key and value don't match the taint on the node, "
        "but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
        _pod(("dedicated", "Equal", "user2", NS)),
        _node("nodeA", ("dedicated", "user1", PNS)),
        True,
    ),
    (
        "The pod has no toleration, but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
        _pod(),
        _node("nodeA", ("dedicated", "user1", PNS)),
        True,
    ),
    (
        "Pod with Gt toleration cannot be scheduled on node when taint value is lower than threshold",
        _pod((LEVEL, "Gt", "950", NS)),
        _node("nodeA", (LEVEL, "800", NS)),
        False,
    ),
    (
        "Pod with Gt toleration can be scheduled on node when taint value is higher than threshold",
        _pod((SLA, "Gt", "750", NS)),
        _node("nodeA", (SLA, "950", NS)),
        True,
    ),
    (
        "Pod with Lt toleration cannot be scheduled on node when taint value is higher than threshold",
        _pod((LEVEL, "Lt", "800", NS)),
        _node("nodeA", (LEVEL, "950", NS)),
        False,
    ),
    (
        "Pod with Lt toleration can be scheduled on node when taint value is lower than threshold",
        _pod((SLA, "Lt", "950", NS)),
        _node("nodeA", (SLA, "800", NS)),
        True,
    ),
    ("Pod with Gt toleration cannot be scheduled on node with non-numeric taint value", _pod((SLA, "Gt", "950", NS)), _node("nodeA", (SLA, "high", NS)), False),
]


@pytest.mark.parametrize("case", FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_taint_toleration_filters_as_kube_does(case: tuple) -> None:
    name, pod, node, passes = case
    verdict = TaintToleration(FrameworkHandle()).filter(CycleState(), pod, node)
    if passes:
        assert verdict is None, name
    else:
        assert verdict is not None, name
        assert verdict.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE, name
