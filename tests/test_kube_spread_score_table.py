"""Cases from kube-scheduler's own PodTopologySpread Score table, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/podtopologyspread/scoring_test.go
(TestPodTopologySpreadScore, at commit 38f68d59a73f5685774b2f1e1d1921e231cc8ab4): its
first seven cases, one ScheduleAnyway constraint on the hostname. The expectations are kube's
normalized scores of the candidate nodes (a node that failed the filters still holds pods
that count)."""

from __future__ import annotations

import dataclasses

import pytest

from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.model.labels import HOSTNAME
from nodemanager.scheduling import CycleState, Framework
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.profile import DEFAULT_PROFILE
from nodemanager.scheduling.registry import default_registry

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}


def _incoming(skew: int, selector: dict | None) -> Pod:
    constraint: dict = {"maxSkew": skew, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"}
    if selector is not None:
        constraint["labelSelector"] = selector
    spec = {"containers": [], "topologySpreadConstraints": [constraint]}
    return Pod.from_manifest({"metadata": {"name": "p", "namespace": "default", "labels": {"foo": ""}}, "spec": spec})


CASES = [
    # (kube's name, incoming pod, candidate nodes, failed nodes, matching pods per node, kube's scores)
    ("one constraint on node, no existing pods", _incoming(1, FOO), ["node-a", "node-b"], [], {}, {"node-a": 100, "node-b": 100}),
    ("one constraint on node, only one node is candidate", _incoming(1, FOO), ["node-a"], ["node-b"], {"node-a": 2, "node-b": 1}, {"node-a": 100}),
    (
        "one constraint on node, all nodes have the same number of matching pods",
        _incoming(1, FOO),
        ["node-a", "node-b"],
        [],
        {"node-a": 1, "node-b": 1},
        {"node-a": 100, "node-b": 100},
    ),
    (
        "one constraint on node, all 4 nodes are candidates",
        _incoming(1, FOO),
        ["node-a", "node-b", "node-c", "node-d"],
        [],
        {"node-a": 2, "node-b": 1, "node-d": 3},
        {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0},
    ),
    (
        "one constraint on node, null selector",
        _incoming(1, None),
        ["node-a", "node-b", "node-c", "node-d"],
        [],
        {"node-a": 2, "node-b": 1, "node-d": 3},
        {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100},
    ),
    (
        "one constraint on node, all 4 nodes are candidates, maxSkew=2",
        _incoming(2, FOO),
        ["node-a", "node-b", "node-c", "node-d"],
        [],
        {"node-a": 2, "node-b": 1, "node-d": 3},
        {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16},
    ),
    (
        "one constraint on node, all 4 nodes are candidates, maxSkew=3",
        _incoming(3, FOO),
        ["node-a", "node-b", "node-c", "node-d"],
        [],
        {"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1},
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_spread_scores_as_kube_does(case: tuple) -> None:
    name, pod, candidates, failed, matching, expected = case
    room = Resources({"cpu": 1000, "memory": 2**30, "pods": 50})
    infos = {n: NodeInfo(n, "p", "", CapacityType.ON_DEMAND, "", room, {HOSTNAME: n}) for n in (*candidates, *failed)}
    for n, count in matching.items():
        for i in range(count):
            placed = {"metadata": {"name": f"{n}-{i}", "namespace": "default", "labels": {"foo": ""}}, "spec": {"containers": [], "nodeName": n}}
            infos[n].add_pod(Pod.from_manifest(placed))
    fw = Framework(dataclasses.replace(DEFAULT_PROFILE, score=(("PodTopologySpread", 1),)), default_registry())
    fw.handle.node_infos = infos
    state = CycleState()
    assert fw.run_pre_filter_plugins(state, pod).is_success()
    scores, status = fw.run_score_plugins(state, pod, [infos[n] for n in candidates])
    assert status.is_success()
    assert scores["PodTopologySpread"] == expected, name
