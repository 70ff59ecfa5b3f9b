"""Cases from kube-scheduler's own InterPodAffinity Filter table, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go
(TestRequiredAffinitySingleNode and TestRequiredAffinityMultipleNodes, at commit
072825f9a367e9ca0f73f91830945f1b7f46e0d9), every case of the first (one node, region r1 and
zone z11, and the pods already on it) and eighteen of the second. The expectations are
kube's: the PreFilter's Skip or its refusal of a term whose value is no label value, and
the Filter's code and reason. Two of kube's terms have no ``topologyKey``, which the API
server refuses and nodemanager's parser too: there they name ``region`` (the node's), and
the outcome, no matching pod, is kube's."""

from __future__ import annotations

import pytest

from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scheduling import CycleState, Framework
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.profile import DEFAULT_PROFILE
from nodemanager.scheduling.registry import default_registry
from nodemanager.scheduling.status import Code
from nodemanager.scheduling.topology import PodTopology

NODE1 = {"region": "r1", "zone": "z11"}
SCAN, S1 = {"service": "securityscan"}, {"security": "S1"}
NAMESPACES = {"subteam1.team1": {"team": "team1"}, "subteam2.team1": {"team": "team1"}, "subteam1.team2": {"team": "team2"}}
AFFINITY = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match pod affinity rules")
ANTI = (Code.UNSCHEDULABLE, "node(s) didn't match pod anti-affinity rules")
EXISTING_ANTI = (Code.UNSCHEDULABLE, "node(s) didn't satisfy existing pods anti-affinity rules")


def expr(key: str, op: str, *values: str) -> dict:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


def term(key: str, *exprs: dict, namespaces: list[str] | None = None, namespace_selector: dict | None = None) -> dict:
    out: dict = {"topologyKey": key, "labelSelector": {"matchExpressions": list(exprs)}}
    if namespaces is not None:
        out["namespaces"] = namespaces
    if namespace_selector is not None:
        out["namespaceSelector"] = namespace_selector
    return out


def _pod(labels: dict, affinity: list[dict] = (), anti: list[dict] = (), *, namespace: str = "default", node: str = "", name: str = "p") -> Pod:
    spec: dict = {"containers": []}
    aff: dict = {}
    if affinity:
        aff["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(affinity)}
    if anti:
        aff["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(anti)}
    if aff:
        spec["affinity"] = aff
    if node:
        spec["nodeName"] = node
    return Pod.from_manifest({"metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec})


def _on(labels: dict, node: str = "node1", **kw: object) -> Pod:
    return _pod(labels, node=node, name=f"placed-{len(str(labels))}-{node}", **kw)  # type: ignore[arg-type]


IN_SCAN = expr("service", "In", "securityscan", "value2")
TEAM1 = {"matchExpressions": [expr("team", "In", "team1")]}
CASES = [
    # (kube's name, incoming pod, pods on the node (or elsewhere), kube's PreFilter (None: success, "skip", or a refusal), kube's Filter)
    ("A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods", _pod({}), [], "skip", None),
    (
        "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches the existing pod",
        _pod(S1, [term("region", IN_SCAN)]),
        [_on(SCAN)],
        None,
        None,
    ),
    (
        "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator "
        "in labelSelector that matches the existing pod",
        _pod(S1, [term("region", expr("service", "NotIn", "securityscan3", "value3"))]),
        [_on(SCAN)],
        None,
        None,
    ),
    (
        "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
        _pod(S1, [term("region", IN_SCAN, namespaces=["DiffNameSpace"])]),
        [_on(SCAN, namespace="ns")],
        None,
        AFFINITY,
    ),
    (
        "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
        _pod(SCAN, [term("region", expr("service", "In", "antivirusscan", "value2"))]),
        [_on(SCAN)],
        None,
        AFFINITY,
    ),
    (
        "satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuringExecution ",
        _pod(
            S1,
            [
                term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
                term("region", expr("service", "In", "securityscan"), expr("service", "NotIn", "WrongValue")),
            ],
        ),
        [_on(SCAN)],
        None,
        None,
    ),
    (
        "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node "
        "because one of the matchExpression item don't match.",
        _pod(
            S1,
            [
                term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
                term("region", expr("service", "In", "securityscan2"), expr("service", "NotIn", "WrongValue")),
            ],
        ),
        [_on(SCAN)],
        None,
        AFFINITY,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
        _pod(S1, [term("region", IN_SCAN)], [term("node", expr("service", "In", "antivirusscan", "value2"))]),
        [_on(SCAN)],
        None,
        None,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
        _pod(S1, [term("region", IN_SCAN)], [term("node", expr("service", "In", "antivirusscan", "value2"))]),
        [_on(SCAN, anti=[term("node", expr("service", "In", "antivirusscan", "value2"))])],
        None,
        None,
    ),
    (
        "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
        _pod(S1, [term("region", IN_SCAN)], [term("zone", IN_SCAN)]),
        [_on(SCAN)],
        None,
        ANTI,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",
        _pod(SCAN, [term("region", IN_SCAN)], [term("node", expr("service", "In", "antivirusscan", "value2"))]),
        [_on(SCAN, anti=[term("zone", IN_SCAN)])],
        None,
        EXISTING_ANTI,
    ),
    (
        "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
        _pod(SCAN, [term("region", expr("service", "NotIn", "securityscan", "value2"))]),
        [_on(SCAN, node="node2")],
        None,
        AFFINITY,
    ),
    (
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. "
        "doesn't satisfy PodAntiAffinity symmetry with the existing pod",
        _pod(SCAN),
        [_on(SCAN, anti=[term("zone", IN_SCAN)])],
        None,
        EXISTING_ANTI,
    ),
    (
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. "
        "satisfy PodAntiAffinity symmetry with the existing pod",
        _pod(SCAN),
        [_on(SCAN, anti=[term("zone", expr("service", "NotIn", "securityscan", "value2"))])],
        "skip",
        None,
    ),
    (
        "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod",
        _pod(SCAN, anti=[term("region", expr("service", "Exists")), term("region", expr("security", "Exists"))]),
        [_on(S1, anti=[term("zone", expr("security", "Exists"))])],
        None,
        ANTI,
    ),
    (
        "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
        _pod(SCAN, anti=[term("zone", expr("service", "Exists")), term("zone", expr("security", "Exists"))]),
        [_on(S1, anti=[term("zone", expr("security", "Exists"))])],
        None,
        ANTI,
    ),
    (
        "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
        _pod(S1, anti=[term("zone", expr("security", "Exists"))]),
        [_on(SCAN, anti=[term("zone", expr("service", "Exists")), term("zone", expr("security", "Exists"))])],
        None,
        EXISTING_ANTI,
    ),
    (
        "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
        _pod({"abc": "", "xyz": ""}, anti=[term("zone", expr("abc", "Exists")), term("zone", expr("def", "Exists"))]),
        [_on({"def": "", "xyz": ""}, anti=[term("zone", expr("abc", "Exists")), term("zone", expr("def", "Exists"))])],
        None,
        ANTI,
    ),
    (
        "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms",
        _pod({"def": "", "xyz": ""}, anti=[term("zone", expr("abc", "Exists")), term("zone", expr("def", "Exists"))]),
        [_on({"abc": "", "xyz": ""}, anti=[term("zone", expr("abc", "Exists")), term("zone", expr("def", "Exists"))])],
        None,
        ANTI,
    ),
    (
        "PodAffinity fails PreFilter with an invalid affinity label syntax",
        _pod(SCAN, [term("region", expr("service", "In", "{{.bad-value.}}")), term("node", expr("service", "In", "antivirusscan", "value2"))]),
        [],
        "refused",
        None,
    ),
    (
        "PodAntiAffinity fails PreFilter with an invalid antiaffinity label syntax",
        _pod(SCAN, [term("region", expr("service", "In", "foo")), term("node", expr("service", "In", "{{.bad-value.}}"))]),
        [],
        "refused",
        None,
    ),
    (
        "affinity with NamespaceSelector",
        _pod(S1, [term("region", IN_SCAN, namespace_selector=TEAM1)]),
        [_on(SCAN, namespace="subteam1.team1")],
        None,
        None,
    ),
    (
        "affinity with non-matching NamespaceSelector",
        _pod(S1, [term("region", IN_SCAN, namespace_selector=TEAM1)]),
        [_on(SCAN, namespace="subteam1.team2")],
        None,
        AFFINITY,
    ),
    (
        "anti-affinity with matching NamespaceSelector",
        _pod(S1, anti=[term("zone", IN_SCAN, namespace_selector=TEAM1)], namespace="subteam1.team1"),
        [_on(SCAN, namespace="subteam2.team1")],
        None,
        ANTI,
    ),
    (
        "anti-affinity with matching all NamespaceSelector",
        _pod(S1, anti=[term("zone", IN_SCAN, namespace_selector={})], namespace="subteam1.team1"),
        [_on(SCAN, namespace="subteam2.team1")],
        None,
        ANTI,
    ),
    (
        "anti-affinity with non-matching NamespaceSelector",
        _pod(S1, anti=[term("zone", IN_SCAN, namespace_selector=TEAM1)], namespace="subteam1.team1"),
        [_on(SCAN, namespace="subteam1.team2")],
        None,
        None,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0][:100] for c in CASES])
def test_required_affinity_single_node_as_kube_decides(case: tuple) -> None:
    name, pod, placed, pre_filter, expected = case
    infos = {
        n: NodeInfo(n, "p", "", CapacityType.ON_DEMAND, "", Resources({"cpu": 1000, "memory": 2**30, "pods": 50}), NODE1 if n == "node1" else {})
        for n in ("node1", "node2")
    }
    for other in placed:
        infos[other.node_name].add_pod(other)
    fw = Framework(DEFAULT_PROFILE, default_registry())
    fw.handle.node_infos = infos
    fw.handle.topology = PodTopology(infos, NAMESPACES)
    plugin = fw.plugins["InterPodAffinity"]
    state = CycleState()
    status = plugin.pre_filter(state, pod)
    if pre_filter == "skip":
        assert status is not None, name
        assert status.code is Code.SKIP, name
        return
    if pre_filter == "refused":
        assert status is not None, name
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE, name
        assert "{{.bad-value.}}" in status.message, name
        return
    assert status is None, name
    verdict = plugin.filter(state, pod, infos["node1"])
    if expected is None:
        assert verdict is None, f"{name}: {verdict}"
    else:
        assert verdict is not None, name
        assert (verdict.code, verdict.message) == expected, name


@pytest.mark.parametrize("where", ["affinity", "anti-affinity", "spread"])
def test_a_selector_value_kubes_parser_refuses_boots_nothing_and_says_why(where: str) -> None:
    """The pod is unschedulable with the parser's reason, and no node is booted for it."""
    from builders import binpack_pool, scaler
    from test_interpod import CATALOG3

    from nodemanager.scaler import ClusterSnapshot

    bad = expr("app", "In", "{{.bad-value.}}")
    if where == "spread":
        spread = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchExpressions": [bad]}}
        spec = {"containers": [], "topologySpreadConstraints": [spread]}
        pod = Pod.from_manifest({"metadata": {"name": "p", "namespace": "default"}, "spec": spec})
    else:
        pod = _pod({}, [term("zone", bad)]) if where == "affinity" else _pod({}, anti=[term("zone", bad)])
    d = scaler(binpack_pool(instance_types=["*"]), catalog=CATALOG3).compute(ClusterSnapshot((pod,), ()), 0.0)
    assert d.start == ()
    assert "{{.bad-value.}}" in d.unschedulable[pod.key]


# -- TestRequiredAffinityMultipleNodes ------------------------------------------------------------

CHINA, CHINA_AZ1, INDIA = {"region": "China"}, {"region": "China", "az": "az1"}, {"region": "India"}


def _r1(zone: str, host: str) -> dict:
    return {"region": "r1", "zone": zone, "hostname": host}


def _exists(key: str, topology: str) -> dict:
    return term(topology, expr(key, "Exists"))


FOO_BAR = {"foo": "", "bar": ""}
MULTI = [
    # (kube's name, incoming pod, nodes in order, pods on them as (node, pod), kube's PreFilter ("skip" or None), kube's Filter per node)
    (
        "A pod can be scheduled onto all the nodes that have the same topology key & label value "
        "with one of them has an existing pod that matches the affinity rules",
        _pod({}, [term("region", expr("foo", "In", "bar"))]),
        {"node1": CHINA, "node2": CHINA_AZ1, "node3": INDIA},
        [("node1", {"foo": "bar"}, {})],
        None,
        [None, None, AFFINITY],
    ),
    (
        "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the collection "
        "should not be blocked from being scheduled onto any node, even there's no existing pod that matches the rule anywhere.",
        _pod(
            {"foo": "bar", "service": "securityscan"},
            [term("zone", expr("foo", "In", "bar")), term("zone", expr("service", "In", "securityscan"))],
        ),
        {"nodeA": {"zone": "az1", "hostname": "h1"}, "nodeB": {"zone": "az2", "hostname": "h2"}},
        [("nodeA", {"foo": "bar"}, {})],
        None,
        [None, None],
    ),
    (
        "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
        _pod(
            {"foo": "bar", "service": "securityscan"},
            [term("zone", expr("foo", "In", "bar")), term("zone", expr("service", "In", "securityscan"))],
        ),
        {"nodeA": {"zoneLabel": "az1", "hostname": "h1"}, "nodeB": {"zoneLabel": "az2", "hostname": "h2"}},
        [("nodeA", {"foo": "bar"}, {})],
        None,
        [AFFINITY, AFFINITY],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. "
        "The pod can not be scheduled onto nodeA and nodeB.",
        _pod({}, anti=[term("region", expr("foo", "In", "abc"))]),
        {"nodeA": {"region": "r1", "hostname": "nodeA"}, "nodeB": {"region": "r1", "hostname": "nodeB"}},
        [("nodeA", {"foo": "abc"}, {})],
        None,
        [ANTI, ANTI],
    ),
    (
        "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
        _pod({}, anti=[term("region", expr("foo", "In", "abc")), term("zone", expr("service", "In", "securityscan"))]),
        {"nodeA": _r1("z1", "nodeA"), "nodeB": _r1("z2", "nodeB")},
        [("nodeA", {"foo": "abc", "service": "securityscan"}, {})],
        None,
        [ANTI, ANTI],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. "
        "The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
        _pod({}, anti=[term("region", expr("foo", "In", "abc"))]),
        {"nodeA": CHINA, "nodeB": CHINA_AZ1, "nodeC": INDIA},
        [("nodeA", {"foo": "abc"}, {})],
        None,
        [ANTI, ANTI, None],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. "
        "The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC "
        "(NodeC has an existing pod that match the inter pod affinity rule but in different namespace)",
        _pod({"foo": "123"}, anti=[term("region", expr("foo", "In", "bar"))], namespace="NS1"),
        {"nodeA": CHINA, "nodeB": CHINA_AZ1, "nodeC": INDIA},
        [("nodeA", {"foo": "bar"}, {"namespace": "NS1"}), ("nodeC", {}, {"namespace": "NS2", "anti": [term("region", expr("foo", "In", "123"))]})],
        None,
        [ANTI, ANTI, None],
    ),
    (
        "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of the term is firstly "
        "checked, and then topologyKey of the term is also checked",
        _pod({"foo": ""}),
        {"nodeA": _r1("z1", "nodeA"), "nodeB": _r1("z1", "nodeB")},
        [("nodeA", {}, {"anti": [_exists("foo", "invalid-node-label")]})],
        "skip",
        [None, None],
    ),
    (
        "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
        _pod({}, anti=[_exists("foo", "invalid-node-label")]),
        {"nodeA": _r1("z1", "nodeA"), "nodeB": _r1("z1", "nodeB")},
        [("nodeA", {"foo": ""}, {})],
        None,
        [None, None],
    ),
    (
        "Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each existingPod's terms on all nodes",
        _pod(FOO_BAR),
        {"nodeA": _r1("z1", "nodeA"), "nodeB": _r1("z2", "nodeB")},
        [("nodeA", {}, {"anti": [_exists("foo", "zone")]}), ("nodeA", {}, {"anti": [_exists("bar", "region")]})],
        None,
        [EXISTING_ANTI, EXISTING_ANTI],
    ),
    (
        "Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates one anti-affinity rule of existingPod",
        _pod({}, anti=[_exists("foo", "zone"), _exists("bar", "region")]),
        {"nodeA": _r1("z1", "nodeA"), "nodeB": _r1("z2", "nodeB")},
        [("nodeA", {"foo": ""}, {}), ("nodeB", {"bar": ""}, {})],
        None,
        [ANTI, ANTI],
    ),
    (
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match "
        "- case when one term has invalid topologyKey",
        _pod(FOO_BAR),
        {"nodeA": _r1("z1", "nodeA"), "nodeB": _r1("z2", "nodeB")},
        [("nodeA", {}, {"anti": [_exists("foo", "invalid-node-label"), _exists("bar", "zone")]})],
        None,
        [EXISTING_ANTI, None],
    ),
    (
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match "
        "- case when one term has invalid topologyKey",
        _pod({}, anti=[_exists("foo", "invalid-node-label"), _exists("bar", "zone")]),
        {"nodeA": _r1("z1", "nodeA"), "nodeB": _r1("z2", "nodeB")},
        [("nodeA", FOO_BAR, {})],
        None,
        [ANTI, None],
    ),
    (
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match "
        "- case when all terms have valid topologyKey",
        _pod(FOO_BAR),
        {"nodeA": _r1("z1", "nodeA"), "nodeB": _r1("z2", "nodeB")},
        [("nodeA", {}, {"anti": [_exists("foo", "region"), _exists("bar", "zone")]})],
        None,
        [EXISTING_ANTI, EXISTING_ANTI],
    ),
    (
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match "
        "- case when all terms have valid topologyKey",
        _pod({}, anti=[_exists("foo", "region"), _exists("bar", "zone")]),
        {"nodeA": _r1("z1", "nodeA"), "nodeB": _r1("z2", "nodeB")},
        [("nodeA", FOO_BAR, {})],
        None,
        [ANTI, ANTI],
    ),
    (
        "Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity term matches incoming pod, "
        "so incoming pod can only be scheduled to nodeC",
        _pod(FOO_BAR),
        {"nodeA": _r1("z1", "nodeA"), "nodeB": _r1("z2", "nodeB"), "nodeC": _r1("z3", "nodeC")},
        [
            ("nodeA", {}, {"anti": [_exists("foo", "zone"), _exists("labelA", "zone")]}),
            ("nodeB", {}, {"anti": [_exists("bar", "zone"), _exists("labelB", "zone")]}),
        ],
        None,
        [EXISTING_ANTI, EXISTING_ANTI, None],
    ),
    (
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match",
        _pod({}, [_exists("foo", "region"), _exists("bar", "zone")]),
        {"nodeA": _r1("z1", "nodeA"), "nodeB": _r1("z1", "nodeB")},
        [("nodeA", FOO_BAR, {})],
        None,
        [None, None],
    ),
    (
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match, "
        "and the match logic should be satisfied on the same pod",
        _pod({}, [_exists("foo", "region"), _exists("bar", "zone")]),
        {"nodeA": _r1("z1", "nodeA"), "nodeB": _r1("z2", "nodeB")},
        [("nodeA", {"foo": ""}, {}), ("nodeB", {"bar": ""}, {})],
        None,
        [AFFINITY, AFFINITY],
    ),
]


@pytest.mark.parametrize("case", MULTI, ids=[c[0][:100] for c in MULTI])
def test_required_affinity_multiple_nodes_as_kube_decides(case: tuple) -> None:
    name, pod, nodes, placed, pre_filter, expected = case
    room = Resources({"cpu": 1000, "memory": 2**30, "pods": 50})
    infos = {n: NodeInfo(n, "p", "", CapacityType.ON_DEMAND, "", room, labels) for n, labels in nodes.items()}
    for i, (where, labels, extra) in enumerate(placed):
        infos[where].add_pod(_pod(labels, node=where, name=f"placed-{i}", **extra))
    fw = Framework(DEFAULT_PROFILE, default_registry())
    fw.handle.node_infos = infos
    fw.handle.topology = PodTopology(infos, {})
    plugin = fw.plugins["InterPodAffinity"]
    state = CycleState()
    status = plugin.pre_filter(state, pod)
    if pre_filter == "skip":
        assert status is not None, name
        assert status.code is Code.SKIP, name
        return
    assert status is None, name
    for info, want in zip(infos.values(), expected, strict=True):
        verdict = plugin.filter(state, pod, info)
        got = None if verdict is None else (verdict.code, verdict.message)
        assert got == want, f"{name}: {info.name}"
