"""Cases from kube-scheduler's own InterPodAffinity Score table, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/interpodaffinity/scoring_test.go
(TestPreferredAffinity, 26 cases, and TestPreferredAffinityWithHardPodAffinitySymmetricWeight,
5, at commit 030880a5dc5449403c6d1f0aa146a7dc21d6c6dc), every case. The expectations are
kube's: PreScore's Skip or Error, else the normalized score of each node. kube's test pods
carry no namespace; here they are in ``default``, and the one term that names the empty
namespace names ``default``. Two case names appear twice in kube's table (the second pair
with anti-affinity); they keep their names, with ``(anti)`` added."""

from __future__ import annotations

import dataclasses

import pytest
from test_kube_interpod_filter_table import expr, term

from nodemanager.errors import InvalidManifest
from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scheduling import CycleState, Framework
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.plugins.interpod import InterPodAffinity, parse_interpod_args
from nodemanager.scheduling.profile import DEFAULT_PROFILE
from nodemanager.scheduling.registry import default_registry
from nodemanager.scheduling.status import Code
from nodemanager.scheduling.topology import PodTopology

NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}
CHINA, INDIA, AZ1, AZ2 = {"region": "China"}, {"region": "India"}, {"az": "az1"}, {"az": "az2"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
S1, S2 = {"security": "S1"}, {"security": "S2"}
TEAM1 = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]}


def _weighted(weight: int, term: dict) -> dict:
    return {"weight": weight, "podAffinityTerm": term}


def _affinity(prefer: list[dict] = (), avoid: list[dict] = (), require: list[dict] = ()) -> dict:
    out: dict = {}
    if prefer or require:
        out["podAffinity"] = {}
        if prefer:
            out["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = list(prefer)
        if require:
            out["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = list(require)
    if avoid:
        out["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": list(avoid)}
    return out


STAY_WITH_S1_IN_REGION = _affinity([_weighted(5, term("region", expr("security", "In", "S1")))])
STAY_WITH_S2_IN_REGION = _affinity([_weighted(6, term("region", expr("security", "In", "S2")))])
AFFINITY3 = _affinity(
    [
        _weighted(8, term("region", expr("security", "NotIn", "S1"), expr("security", "In", "S2"))),
        _weighted(2, term("region", expr("security", "Exists"), expr("wrongkey", "DoesNotExist"))),
    ]
)
HARD_AFFINITY = _affinity(
    require=[
        term("region", expr("security", "In", "S1", "value2")),
        term("region", expr("security", "Exists"), expr("wrongkey", "DoesNotExist")),
    ]
)
AWAY_FROM_S1_IN_AZ = _affinity(avoid=[_weighted(5, term("az", expr("security", "In", "S1")))])
AWAY_FROM_S2_IN_AZ = _affinity(avoid=[_weighted(5, term("az", expr("security", "In", "S2")))])
STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ = _affinity(
    [_weighted(8, term("region", expr("security", "In", "S1")))], [_weighted(5, term("az", expr("security", "In", "S2")))]
)
_S1_IN_TEAM1 = term("region", expr("security", "In", "S1"), namespaces=["subteam2.team2"], namespace_selector=TEAM1)
AFFINITY_NAMESPACE_SELECTOR = _affinity([_weighted(5, _S1_IN_TEAM1)])
ANTI_AFFINITY_NAMESPACE_SELECTOR = _affinity(avoid=[_weighted(5, _S1_IN_TEAM1)])
INVALID_AFFINITY = _affinity([_weighted(8, term("region", expr("security", "In", "{{.bad-value.}}")))])
INVALID_ANTI_AFFINITY = _affinity(avoid=[_weighted(5, term("az", expr("security", "In", "{{.bad-value.}}")))])


def _pod(labels: dict | None = None, affinity: dict | None = None, *, node: str = "", namespace: str = "default") -> Pod:
    spec: dict = {"containers": []}
    if affinity:
        spec["affinity"] = affinity
    if node:
        spec["nodeName"] = node
    _pod.made = getattr(_pod, "made", 0) + 1  # type: ignore[attr-defined]
    return Pod.from_manifest({"metadata": {"name": f"p{_pod.made}", "namespace": namespace, "labels": labels or {}}, "spec": spec})  # type: ignore[attr-defined]


SKIP, ERROR = "skip", "error"
PREFERRED = [
    # (kube's name, incoming pod, pods on nodes, nodes in order with their labels, kube's scores (or "skip"/"error"), ignorePreferredTermsOfExistingPods)
    ("all nodes are same priority as Affinity is nil", _pod(S1), [], {"node1": CHINA, "node2": INDIA, "node3": AZ1}, SKIP, False),
    (
        "Affinity: pod that matches topology key & pods in nodes will get high score comparing to others"
        "which doesn't match either pods in nodes or in topology key",
        _pod(S1, STAY_WITH_S1_IN_REGION),
        [_pod(S1, node="node1"), _pod(S2, node="node2"), _pod(S1, node="node3")],
        {"node1": CHINA, "node2": INDIA, "node3": AZ1},
        [100, 0, 0],
        False,
    ),
    (
        "All the nodes that have the same topology key & label value with one of them has an existing pod that match the affinity rules, have the same score",
        _pod(None, STAY_WITH_S1_IN_REGION),
        [_pod(S1, node="node1")],
        {"node1": CHINA, "node2": CHINA_AZ1, "node3": INDIA},
        [100, 100, 0],
        False,
    ),
    (
        "Affinity: nodes in one region has more matching pods comparing to other region, so the region which has more matches will get high score",
        _pod(S1, STAY_WITH_S2_IN_REGION),
        [_pod(S2, node=n) for n in ("node1", "node1", "node2", "node3", "node4", "node5")],
        {"node1": CHINA, "node2": INDIA, "node3": CHINA, "node4": CHINA, "node5": INDIA},
        [100, 0, 100, 100, 0],
        False,
    ),
    (
        "Affinity: different Label operators and values for pod affinity scheduling preference, including some match failures ",
        _pod(S1, AFFINITY3),
        [_pod(S1, node="node1"), _pod(S2, node="node2"), _pod(S1, node="node3")],
        {"node1": CHINA, "node2": INDIA, "node3": AZ1},
        [20, 100, 0],
        False,
    ),
    (
        "Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
        _pod(S2),
        [_pod(S1, STAY_WITH_S1_IN_REGION, node="node1"), _pod(S2, STAY_WITH_S2_IN_REGION, node="node2")],
        {"node1": CHINA, "node2": INDIA, "node3": AZ1},
        [0, 100, 0],
        False,
    ),
    (
        "Affinity symmetry with namespace selector",
        _pod(S1, namespace="subteam1.team1"),
        [_pod(S1, AFFINITY_NAMESPACE_SELECTOR, node="node1"), _pod(S2, STAY_WITH_S2_IN_REGION, node="node2")],
        {"node1": CHINA, "node2": INDIA, "node3": AZ1},
        [100, 0, 0],
        False,
    ),
    (
        "AntiAffinity symmetry with namespace selector",
        _pod(S1, namespace="subteam1.team1"),
        [_pod(S1, ANTI_AFFINITY_NAMESPACE_SELECTOR, node="node1"), _pod(S2, STAY_WITH_S2_IN_REGION, node="node2")],
        {"node1": CHINA, "node2": INDIA, "node3": AZ1},
        [0, 100, 100],
        False,
    ),
    (
        "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
        _pod(S1),
        [_pod(S1, HARD_AFFINITY, node="node1"), _pod(S2, HARD_AFFINITY, node="node2")],
        {"node1": CHINA, "node2": INDIA, "node3": AZ1},
        [100, 100, 0],
        False,
    ),
    (
        "Anti Affinity: pod that does not match existing pods in node will get high score ",
        _pod(S1, AWAY_FROM_S1_IN_AZ),
        [_pod(S1, node="node1"), _pod(S2, node="node2")],
        {"node1": AZ1, "node2": CHINA},
        [0, 100],
        False,
    ),
    (
        "Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score comparing to others ",
        _pod(S1, AWAY_FROM_S1_IN_AZ),
        [_pod(S1, node="node1"), _pod(S1, node="node2")],
        {"node1": AZ1, "node2": CHINA},
        [0, 100],
        False,
    ),
    (
        "Anti Affinity: one node has more matching pods comparing to other node, so the node which has more unmatches will get high score",
        _pod(S1, AWAY_FROM_S1_IN_AZ),
        [_pod(S1, node="node1"), _pod(S1, node="node1"), _pod(S2, node="node2")],
        {"node1": AZ1, "node2": INDIA},
        [0, 100],
        False,
    ),
    (
        "Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score",
        _pod(S2),
        [_pod(S1, AWAY_FROM_S2_IN_AZ, node="node1"), _pod(S2, AWAY_FROM_S1_IN_AZ, node="node2")],
        {"node1": AZ1, "node2": AZ2},
        [0, 100],
        False,
    ),
    (
        "Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity",
        _pod(S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
        [_pod(S1, node="node1"), _pod(S1, node="node2")],
        {"node1": CHINA, "node2": AZ1},
        [100, 0],
        False,
    ),
    (
        "Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and existing pods have the same labels",
        _pod(S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
        [_pod(S1, node=n) for n in ("node1", "node1", "node2", "node3", "node3", "node4", "node5")],
        {"node1": CHINA_AZ1, "node2": INDIA, "node3": CHINA, "node4": CHINA, "node5": INDIA},
        [100, 0, 100, 100, 0],
        False,
    ),
    (
        "Affinity and Anti Affinity and symmetry: considered only preferredDuringSchedulingIgnoredDuringExecution "
        "in both pod affinity & anti affinity & symmetry",
        _pod(S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
        [
            _pod(S1, node="node1"),
            _pod(S2, node="node2"),
            _pod(None, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ, node="node3"),
            _pod(None, AWAY_FROM_S1_IN_AZ, node="node4"),
        ],
        {"node1": CHINA, "node2": AZ1, "node3": INDIA, "node4": AZ2},
        [100, 0, 100, 0],
        False,
    ),
    (
        "Avoid panic when partial nodes in a topology don't have pods with affinity",
        _pod(S1),
        [_pod(S1, node="node1"), _pod(None, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ, node="node2")],
        {"node1": CHINA, "node2": CHINA},
        [0, 0],
        False,
    ),
    ("invalid Affinity fails PreScore", _pod(None, INVALID_AFFINITY), [], {"node1": CHINA, "node2": CHINA}, ERROR, False),
    ("invalid AntiAffinity fails PreScore", _pod(None, INVALID_ANTI_AFFINITY), [], {"node1": CHINA, "node2": CHINA}, ERROR, False),
    (
        "Affinity with pods matching NamespaceSelector",
        _pod(S1, AFFINITY_NAMESPACE_SELECTOR, namespace="subteam1.team1"),
        [
            _pod(S1, node="node1", namespace="subteam1.team1"),
            _pod(S1, node="node1", namespace="subteam1.team1"),
            _pod(S1, node="node1", namespace="subteam1.team2"),
            _pod(S1, node="node2", namespace="subteam2.team1"),
        ],
        {"node1": CHINA, "node2": INDIA},
        [100, 0],
        False,
    ),
    (
        "Affinity with pods matching both NamespaceSelector and Namespaces fields",
        _pod(S1, AFFINITY_NAMESPACE_SELECTOR, namespace="subteam1.team1"),
        [
            _pod(S1, node="node1", namespace="subteam1.team1"),
            _pod(S1, node="node1", namespace="subteam1.team1"),
            _pod(S1, node="node1", namespace="subteam2.team2"),
            _pod(S1, node="node2", namespace="subteam2.team1"),
        ],
        {"node1": CHINA, "node2": INDIA},
        [100, 0],
        False,
    ),
    (
        "Affinity with pods matching NamespaceSelector (anti)",
        _pod(S1, ANTI_AFFINITY_NAMESPACE_SELECTOR, namespace="subteam1.team1"),
        [
            _pod(S1, node="node1", namespace="subteam1.team1"),
            _pod(S1, node="node1", namespace="subteam1.team1"),
            _pod(S1, node="node1", namespace="subteam1.team2"),
            _pod(S1, node="node2", namespace="subteam2.team1"),
        ],
        {"node1": CHINA, "node2": INDIA},
        [0, 100],
        False,
    ),
    (
        "Affinity with pods matching both NamespaceSelector and Namespaces fields (anti)",
        _pod(S1, ANTI_AFFINITY_NAMESPACE_SELECTOR, namespace="subteam1.team1"),
        [
            _pod(S1, node="node1", namespace="subteam1.team1"),
            _pod(S1, node="node1", namespace="subteam1.team1"),
            _pod(S1, node="node1", namespace="subteam2.team2"),
            _pod(S1, node="node2", namespace="subteam2.team1"),
        ],
        {"node1": CHINA, "node2": INDIA},
        [0, 100],
        False,
    ),
    (
        "Ignore preferred terms of existing pods",
        _pod(S2),
        [_pod(S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ, node="node1"), _pod(S2, STAY_WITH_S2_IN_REGION, node="node2")],
        {"node1": CHINA, "node2": INDIA},
        SKIP,
        True,
    ),
    (
        "Do not ignore preferred terms of existing pods",
        _pod(S2),
        [_pod(S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ, node="node1"), _pod(S2, STAY_WITH_S2_IN_REGION, node="node2")],
        {"node1": CHINA, "node2": INDIA},
        [0, 100],
        False,
    ),
    ("No nodes to score", _pod(S2), [], {}, SKIP, False),
]

_SERVICE_S1 = {"service": "S1"}
HARD_POD_AFFINITY = _affinity(require=[term("region", expr("service", "In", "S1"), namespaces=["default", "subteam2.team2"], namespace_selector=TEAM1)])
_ON_TWO = [_pod(None, HARD_POD_AFFINITY, node="node1"), _pod(None, HARD_POD_AFFINITY, node="node2")]
HARD_WEIGHT = [
    # (kube's name, incoming pod, hardPodAffinityWeight, kube's scores or "skip"); nodes: China, India, az1
    ("with default weight", _pod(_SERVICE_S1), 1, [100, 100, 0]),
    ("with zero weight", _pod(_SERVICE_S1), 0, SKIP),
    ("with no matching namespace", _pod(_SERVICE_S1, namespace="subteam1.team2"), 1, SKIP),
    ("with matching NamespaceSelector", _pod(_SERVICE_S1, namespace="subteam1.team1"), 1, [100, 100, 0]),
    ("with matching Namespaces", _pod(_SERVICE_S1, namespace="subteam2.team2"), 1, [100, 100, 0]),
]


def _scored(pod: Pod, placed: list[Pod], nodes: dict[str, dict], args: dict) -> tuple[Code | None, str, list[int]]:
    """kube's harness: PreScore over every node, then Score and NormalizeScore."""
    infos = {n: NodeInfo(n, "p", "", CapacityType.ON_DEMAND, "", Resources({"cpu": 1000, "memory": 2**30, "pods": 50}), labels) for n, labels in nodes.items()}
    for other in placed:
        infos[other.node_name].add_pod(other)
    fw = Framework(dataclasses.replace(DEFAULT_PROFILE, plugin_args={"InterPodAffinity": args}), default_registry())
    fw.handle.node_infos = infos
    fw.handle.topology = PodTopology(infos, NAMESPACES)
    plugin = fw.plugins["InterPodAffinity"]
    state = CycleState()
    status = plugin.pre_score(state, pod, list(infos.values()))
    if status is not None and not status.is_success():
        return status.code, status.message, []
    scores = {n: plugin.score(state, pod, info)[0] for n, info in infos.items()}
    assert plugin.normalize_score(state, pod, scores) is None
    return None, "", [scores[n] for n in nodes]


@pytest.mark.parametrize("case", PREFERRED, ids=[c[0][:100] for c in PREFERRED])
def test_preferred_affinity_as_kube_scores_it(case: tuple) -> None:
    name, pod, placed, nodes, expected, ignore = case
    code, message, scores = _scored(pod, placed, nodes, {"ignorePreferredTermsOfExistingPods": True} if ignore else {})
    if expected == SKIP:
        assert code is Code.SKIP, name
    elif expected == ERROR:
        assert code is Code.ERROR, name
        assert 'Invalid value: "{{.bad-value.}}"' in message, name
    else:
        assert code is None, f"{name}: {message}"
        assert scores == expected, name


@pytest.mark.parametrize("case", HARD_WEIGHT, ids=[c[0] for c in HARD_WEIGHT])
def test_hard_pod_affinity_symmetric_weight_as_kube_scores_it(case: tuple) -> None:
    name, pod, weight, expected = case
    code, message, scores = _scored(pod, _ON_TWO, {"node1": CHINA, "node2": INDIA, "node3": AZ1}, {"hardPodAffinityWeight": weight})
    if expected == SKIP:
        assert code is Code.SKIP, name
    else:
        assert code is None, f"{name}: {message}"
        assert scores == expected, name


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": "1"}, "hardPodAffinityWeight"),
        ({"ignorePreferredTermsOfExistingPods": "yes"}, "ignorePreferredTermsOfExistingPods"),
        ({"hardPodAffinityWieght": 1}, "hardPodAffinityWieght"),
    ],
)
def test_interpod_args_kube_refuses_are_refused(args: dict, field: str) -> None:
    with pytest.raises(InvalidManifest) as caught:
        parse_interpod_args(args)
    assert caught.value.field == field


def test_the_defaults_are_kubes() -> None:
    assert parse_interpod_args({}) == (1, False)
    assert InterPodAffinity(Framework(DEFAULT_PROFILE, default_registry()).handle).hard_weight == 1
