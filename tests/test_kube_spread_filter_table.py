"""Cases from kube-scheduler's own PodTopologySpread Filter table, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go
(TestSingleConstraint, at commit e7827879dbc282e7f5103451dc63169e964b6bb7): its first eleven
cases, on the plugin alone as kube runs them (no NodeAffinity filter: a node the pod's
affinity refuses may still pass here). The expectations are kube's status codes per node. Node
inclusion policies and minDomains are checked against kube's integration table in
``test_interpod.py``."""

from __future__ import annotations

import pytest

from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scheduling import CycleState, Framework
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.profile import DEFAULT_PROFILE
from nodemanager.scheduling.registry import default_registry
from nodemanager.scheduling.status import Code

OK, NO, NEVER = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
FOO, BAR = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}, {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
FOUR = {
    "node-a": {"zone": "zone1", "node": "node-a"},
    "node-b": {"zone": "zone1", "node": "node-b"},
    "node-x": {"zone": "zone2", "node": "node-x"},
    "node-y": {"zone": "zone2", "node": "node-y"},
}


def codes(*per_node: Code, nodes: tuple[str, ...] = ("node-a", "node-b", "node-x", "node-y")) -> dict[str, Code]:
    return dict(zip(nodes, per_node, strict=True))


def _incoming(labels: dict, skew: int, key: str, selector: dict | None, affinity: list[str] | None = None) -> Pod:
    constraint: dict = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule"}
    if selector is not None:
        constraint["labelSelector"] = selector
    spec: dict = {"containers": [], "topologySpreadConstraints": [constraint]}
    if affinity:
        term = {"matchExpressions": [{"key": "node", "operator": "In", "values": affinity}]}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    return Pod.from_manifest({"metadata": {"name": "p", "namespace": "default", "labels": labels}, "spec": spec})


def _placed(spec: str) -> Pod:
    """``name@node[/namespace]``, labelled foo."""
    name, where = spec.split("@")
    node, _, namespace = where.partition("/")
    return Pod.from_manifest(
        {"metadata": {"name": name, "namespace": namespace or "default", "labels": {"foo": ""}}, "spec": {"containers": [], "nodeName": node}}
    )


SPREAD_2103 = ["p-a1@node-a", "p-a2@node-a", "p-b1@node-b", "p-y1@node-y", "p-y2@node-y", "p-y3@node-y"]
CASES = [
    # (kube's name, incoming pod, nodes, existing pods, kube's code per node)
    ("no existing pods", _incoming({"foo": ""}, 1, "zone", FOO), FOUR, [], codes(OK, OK, OK, OK)),
    (
        "no existing pods, incoming pod doesn't match itself",
        _incoming({"foo": ""}, 1, "zone", BAR),
        FOUR,
        [],
        codes(OK, OK, OK, OK),
    ),
    (
        "existing pods in a different namespace do not count",
        _incoming({"foo": ""}, 1, "zone", FOO),
        FOUR,
        ["p-a1@node-a/ns1", "p-b1@node-a/ns2", "p-x1@node-x", "p-y1@node-y"],
        codes(OK, OK, NO, NO),
    ),
    (
        "existing pods do not match null selector",
        _incoming({"foo": ""}, 1, "zone", None),
        FOUR,
        ["p-x1@node-x", "p-y1@node-y"],
        codes(OK, OK, OK, OK),
    ),
    (
        "pods spread across zones as 3/3, all nodes fit",
        _incoming({"foo": ""}, 1, "zone", FOO),
        FOUR,
        SPREAD_2103,
        codes(OK, OK, OK, OK),
    ),
    (
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        _incoming({"foo": ""}, 1, "zone", FOO),
        {**FOUR, "node-b": {"zon": "zone1", "node": "node-b"}},
        ["p-a1@node-a", "p-b1@node-b", "p-x1@node-x", "p-y1@node-y"],
        codes(OK, NEVER, NO, NO),
    ),
    (
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        _incoming({"foo": ""}, 1, "rack", FOO),
        {"node-a": FOUR["node-a"], "node-x": FOUR["node-x"]},
        [],
        codes(NEVER, NEVER, nodes=("node-a", "node-x")),
    ),
    (
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        _incoming({"foo": ""}, 1, "node", FOO),
        FOUR,
        SPREAD_2103,
        codes(NO, NO, OK, NO),
    ),
    (
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        _incoming({"foo": ""}, 2, "node", FOO),
        FOUR,
        SPREAD_2103,
        codes(NO, OK, OK, NO),
    ),
    (
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        _incoming({"bar": ""}, 1, "node", FOO),
        FOUR,
        SPREAD_2103,
        codes(NO, OK, OK, NO),
    ),
    (
        "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        _incoming({"foo": ""}, 1, "node", FOO, affinity=["node-a", "node-y"]),
        FOUR,
        SPREAD_2103,
        codes(OK, OK, OK, NO),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_single_constraint_as_kube_decides(case: tuple) -> None:
    name, pod, nodes, existing, expected = case
    infos = {n: NodeInfo(n, "p", "", CapacityType.ON_DEMAND, "", Resources({"cpu": 1000, "memory": 2**30, "pods": 50}), labels) for n, labels in nodes.items()}
    for spec in existing:
        placed = _placed(spec)
        infos[placed.node_name].add_pod(placed)
    fw = Framework(DEFAULT_PROFILE, default_registry())
    fw.handle.node_infos = infos
    plugin = fw.plugins["PodTopologySpread"]
    state = CycleState()
    assert plugin.pre_filter(state, pod) is None, name
    got = {}
    for n, info in infos.items():
        verdict = plugin.filter(state, pod, info)
        got[n] = Code.SUCCESS if verdict is None else verdict.code
    assert got == expected, name
