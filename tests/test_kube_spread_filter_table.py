"""Cases from kube-scheduler's own PodTopologySpread Filter table, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go
(TestSingleConstraint and TestMultipleConstraints, at commit
e7827879dbc282e7f5103451dc63169e964b6bb7), every case
(terminating pods, minDomains, and the node inclusion policies with kube's feature gate on
included), on the plugin alone as kube runs them: no NodeAffinity or TaintToleration filter,
so a node the pod's affinity or taints refuse may still pass here. The expectations are
kube's status codes per node."""

from __future__ import annotations

import pytest

from nodemanager.model import CapacityType, Pod, Resources, Taint, TaintEffect
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


def _incoming(
    labels: dict,
    skew: int,
    key: str,
    selector: dict | None,
    affinity: list[str] | None = None,
    *,
    term: dict | None = None,
    spec: dict | None = None,
    **extra: object,
) -> Pod:
    """kube's ``SpreadConstraint(skew, key, DoNotSchedule, selector, ...)``; ``extra`` are the
    constraint's other fields (``minDomains``, the inclusion policies), ``affinity`` the nodes
    a node-affinity term on the ``node`` label admits (``term``: another term)."""
    constraint: dict = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", **extra}
    if selector is not None:
        constraint["labelSelector"] = selector
    body: dict = {"containers": [], "topologySpreadConstraints": [constraint], **(spec or {})}
    if affinity:
        term = {"matchExpressions": [{"key": "node", "operator": "In", "values": affinity}]}
    if term:
        body["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    return Pod.from_manifest({"metadata": {"name": "p", "namespace": "default", "labels": labels}, "spec": body})


def placed(spec: str) -> Pod:
    """``name@node[/namespace][:label,label]``, labelled foo unless labels are listed; ``~``
    ahead of the name: terminating."""
    terminating = spec.startswith("~")
    spec, _, listed = spec.partition(":")
    labels = dict.fromkeys(listed.split(","), "") if listed else {"foo": ""}
    name, where = spec.removeprefix("~").split("@")
    node, _, namespace = where.partition("/")
    if terminating:
        meta = {"name": name, "namespace": namespace or "default", "labels": labels, "deletionTimestamp": "2026-01-01T00:00:00Z"}
        return Pod.from_manifest({"metadata": meta, "spec": {"containers": [], "nodeName": node}})
    return Pod.from_manifest({"metadata": {"name": name, "namespace": namespace or "default", "labels": labels}, "spec": {"containers": [], "nodeName": node}})


SPREAD_2103 = ["p-a1@node-a", "p-a2@node-a", "p-b1@node-b", "p-y1@node-y", "p-y2@node-y", "p-y3@node-y"]
SPREAD_110 = ["p-b1@node-a", "p-b2@node-b", "p-y1@node-y"]
THREE = {name: {"node": name} for name in ("node-a", "node-b", "node-c")}
FOO_NODES = {**{name: {"node": name, "foo": ""} for name in ("node-a", "node-b", "node-x")}, "node-y": {"node": "node-y"}}
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", TaintEffect.NO_SCHEDULE)
CASES = [
    # (kube's name, incoming pod, nodes, existing pods, kube's code per node[, tainted nodes])
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
    (
        "terminating Pods should be excluded",
        _incoming({"foo": ""}, 1, "node", FOO),
        {"node-a": {"node": "node-a"}, "node-b": {"node": "node-b"}},
        ["~p-a@node-a", "p-b@node-b"],
        codes(OK, NO, nodes=("node-a", "node-b")),
    ),
    (
        "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
        _incoming({"foo": ""}, 1, "zone", FOO, term={"matchExpressions": [{"key": "node", "operator": "NotIn", "values": ["node-b"]}]}),
        FOUR,
        ["p-b1@node-b", "p-b2@node-b", "p-y1@node-y"],
        codes(OK, OK, NO, NO),
    ),
    (
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third node fits",
        _incoming({"foo": ""}, 2, "node", FOO, minDomains=4),
        THREE,
        ["p-a1@node-a", "p-a2@node-a", "p-b1@node-b", "p-b2@node-b", "p-c1@node-c"],
        codes(NO, NO, OK, nodes=("node-a", "node-b", "node-c")),
    ),
    (
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all nodes fit",
        _incoming({"foo": ""}, 2, "node", FOO, minDomains=2),
        THREE,
        ["p-a1@node-a", "p-a2@node-a", "p-b1@node-b", "p-b2@node-b", "p-c1@node-c"],
        codes(OK, OK, OK, nodes=("node-a", "node-b", "node-c")),
    ),
    (
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and fourth nodes fit",
        _incoming({"foo": ""}, 2, "zone", FOO, minDomains=3),
        FOUR,
        ["p-b1@node-a", "p-b2@node-b", "p-y1@node-y"],
        codes(NO, NO, OK, OK),
    ),
    (
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all nodes fit",
        _incoming({"foo": ""}, 2, "zone", FOO, minDomains=1),
        FOUR,
        ["p-b1@node-a", "p-b2@node-b", "p-y1@node-y"],
        codes(OK, OK, OK, OK),
    ),
    (
        "NodeAffinityPolicy honored with labelSelectors",
        _incoming({"foo": ""}, 1, "node", FOO, spec={"nodeSelector": {"foo": ""}}),
        FOO_NODES,
        SPREAD_110,
        codes(NO, NO, OK, OK),
    ),
    (
        "NodeAffinityPolicy ignored with labelSelectors",
        _incoming({"foo": ""}, 1, "node", FOO, spec={"nodeSelector": {"foo": ""}}, nodeAffinityPolicy="Ignore"),
        FOO_NODES,
        SPREAD_110,
        codes(NO, NO, OK, NO),
    ),
    (
        "NodeAffinityPolicy honored with nodeAffinity",
        _incoming({"foo": ""}, 1, "node", FOO, term={"matchExpressions": [{"key": "foo", "operator": "In", "values": [""]}]}),
        FOO_NODES,
        SPREAD_110,
        codes(NO, NO, OK, OK),
    ),
    (
        "NodeAffinityPolicy ignored with labelSelectors",  # (kube's name; this one is on nodeAffinity)
        _incoming({"foo": ""}, 1, "node", FOO, term={"matchExpressions": [{"key": "foo", "operator": "In", "values": [""]}]}, nodeAffinityPolicy="Ignore"),
        FOO_NODES,
        SPREAD_110,
        codes(NO, NO, OK, NO),
    ),
    # node-y carries node.kubernetes.io/unschedulable:NoSchedule in these two
    ("NodeTaintsPolicy honored", _incoming({"foo": ""}, 1, "node", FOO, nodeTaintsPolicy="Honor"), FOO_NODES, SPREAD_110, codes(NO, NO, OK, OK), ("node-y",)),
    ("NodeTaintsPolicy ignored", _incoming({"foo": ""}, 1, "node", FOO), FOO_NODES, SPREAD_110, codes(NO, NO, OK, NO), ("node-y",)),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{i}: {c[0]}" for i, c in enumerate(CASES)])
def test_single_constraint_as_kube_decides(case: tuple) -> None:
    name, pod, nodes, existing, expected, *tainted = case
    room = Resources({"cpu": 1000, "memory": 2**30, "pods": 50})
    taints = dict.fromkeys(tainted[0] if tainted else (), (UNSCHEDULABLE_TAINT,))
    infos = {n: NodeInfo(n, "p", "", CapacityType.ON_DEMAND, "", room, labels, taints.get(n, ())) for n, labels in nodes.items()}
    for spec in existing:
        existing_pod = placed(spec)
        infos[existing_pod.node_name].add_pod(existing_pod)
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


# -- TestMultipleConstraints (same file and commit), every case -------------------------------


def _spread(skew: int, key: str, selector: dict, **extra: object) -> dict:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector, **extra}


def _two(labels: dict, *constraints: dict, node_selector: dict | None = None) -> Pod:
    spec: dict = {"containers": [], "topologySpreadConstraints": list(constraints), **({"nodeSelector": node_selector} if node_selector else {})}
    return Pod.from_manifest({"metadata": {"name": "p", "namespace": "default", "labels": labels}, "spec": spec})


ZONE_FOO, NODE_FOO, NODE_BAR = _spread(1, "zone", FOO), _spread(1, "node", FOO), _spread(1, "node", BAR)
FOO_BAR = {"foo": "", "bar": ""}
FOUR_FOO = {n: {**labels, "foo": ""} for n, labels in FOUR.items() if n != "node-y"} | {"node-y": FOUR["node-y"]}
FOO_A_X_Y = {n: {**labels, "foo": ""} if n != "node-b" else labels for n, labels in FOUR.items()}
SPREAD_A_B_Y = ["p-a1@node-a", "p-b1@node-b", "p-y1@node-y"]
MULTI = [
    ("two Constraints on zone and node, spreads = [3/3, 2/1/0/3]", _two({"foo": ""}, ZONE_FOO, NODE_FOO), FOUR, SPREAD_2103, codes(NO, NO, OK, NO)),
    (
        "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
        _two({"foo": ""}, ZONE_FOO, NODE_FOO),
        FOUR,
        [*SPREAD_2103, "p-y4@node-y"],
        codes(NO, NO, NO, NO),
    ),
    (
        "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
        _two(FOO_BAR, ZONE_FOO, NODE_BAR),
        FOUR,
        ["p-a1@node-a", "p-y1@node-y:bar"],
        codes(NO, NO, OK, NO),
    ),
    (
        "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
        _two(FOO_BAR, ZONE_FOO, NODE_BAR),
        FOUR,
        ["p-a1@node-a", "p-x1@node-x:bar", "p-y1@node-y:bar"],
        codes(NO, NO, NO, NO),
    ),
    (
        "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
        _two(FOO_BAR, ZONE_FOO, NODE_BAR),
        FOUR,
        ["p-a1@node-a", "p-a2@node-a:foo,bar", "p-y1@node-y", "p-y2@node-y:foo,bar", "p-y3@node-y"],
        codes(NO, OK, NO, NO),
    ),
    (
        "Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
        _two({"bar": ""}, ZONE_FOO, NODE_BAR),
        FOUR,
        ["p-a1@node-a", "p-x1@node-x:bar", "p-y1@node-y:bar"],
        codes(OK, OK, NO, NO),
    ),
    (
        "two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
        _two({"foo": ""}, ZONE_FOO, NODE_FOO),
        {**FOUR, "node-x": {"zone": "zone2"}},
        ["p-a1@node-a", "p-y3@node-y"],
        codes(NO, OK, NEVER, NO),
    ),
    (
        "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
        _two({"foo": ""}, ZONE_FOO, _spread(1, "node", FOO, nodeAffinityPolicy="Ignore"), node_selector={"foo": ""}),
        FOUR_FOO,
        SPREAD_A_B_Y,
        codes(NO, NO, OK, NO),
    ),
    (
        "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
        _two({"foo": ""}, _spread(1, "zone", FOO, nodeTaintsPolicy="Honor"), NODE_FOO),
        FOUR_FOO,
        SPREAD_A_B_Y,
        codes(NO, NO, OK, NO),
        ("node-y",),
    ),
    (
        "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
        _two({"foo": ""}, ZONE_FOO, NODE_FOO, node_selector={"foo": ""}),
        FOO_A_X_Y,
        SPREAD_A_B_Y,
        codes(NO, OK, OK, NO),
        ("node-y",),
    ),
    (
        "two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
        _two({"foo": ""}, _spread(1, "zone", FOO, nodeTaintsPolicy="Honor"), _spread(1, "node", FOO, nodeAffinityPolicy="Ignore"), node_selector={"foo": ""}),
        FOO_A_X_Y,
        SPREAD_A_B_Y,
        codes(NO, NO, OK, NO),
        ("node-y",),
    ),
]


@pytest.mark.parametrize("case", MULTI, ids=[f"{i}: {c[0]}" for i, c in enumerate(MULTI)])
def test_multiple_constraints_as_kube_decides(case: tuple) -> None:
    test_single_constraint_as_kube_decides(case)
