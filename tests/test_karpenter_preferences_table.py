"""Karpenter's preferential fallback for new nodes, with its cases' names:
kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/suite_test.go, Describe
"Preferential Fallback" (at commit 1a1d5cc82dd2e7c8e181669bf4815eb457f91cf6), every case.
Karpenter's test zones 1-3 are ``z-a``..``z-c``, its default instance type ``s.large``; the
expectations are Karpenter's (the zone of the node the pod lands on, or no node). Then cases
of our own for what the relaxation must never cost: a pod left waiting while another pool or
offering could take it."""

from __future__ import annotations

from builders import OD, binpack_pool, scaler
from test_interpod import CATALOG3, THREE_ZONES, ZONE

from nodemanager.config.schema import Limits
from nodemanager.model import Pod
from nodemanager.model.labels import INSTANCE_TYPE
from nodemanager.scaler import ClusterSnapshot


def _expr(key: str, op: str, *values: str) -> dict:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


def _pod(required: list[list[dict]] = (), preferred: list[tuple[int, list[dict]]] = (), cpu: str = "100m", name: str = "p") -> Pod:
    affinity: dict = {}
    if required:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [{"matchExpressions": t} for t in required]}
    if preferred:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [{"weight": w, "preference": {"matchExpressions": t}} for w, t in preferred]
    spec: dict = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]}
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    return Pod.from_manifest({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def _zones_of(pool_zones: tuple[str, ...], *pods: Pod, types: tuple[str, ...] = ("*",), **pool: object) -> list[str | None]:
    """The zone of the new node each pod is bound to (None: not placed)."""
    s = scaler(binpack_pool(instance_types=list(types), zones=list(pool_zones), **pool), catalog=CATALOG3)
    d = s.compute(ClusterSnapshot(pods, ()), 0.0)
    zone = {n.name: n.zone for n in d.start}
    return [zone.get(d.bindings.get(p.key, "")) for p in pods]


def test_required_should_not_relax_the_final_term() -> None:
    pod = _pod([[_expr(ZONE, "In", "invalid")]])
    assert _zones_of(("z-a",), pod, types=("s.large",)) == [None]


def test_required_should_relax_multiple_terms() -> None:
    terms = [[_expr(ZONE, "In", "invalid")], [_expr(ZONE, "In", "invalid")], [_expr(ZONE, "In", "z-a")], [_expr(ZONE, "In", "z-b")]]
    assert _zones_of(THREE_ZONES, _pod(terms)) == ["z-a"]


def test_preferred_should_relax_all_terms() -> None:
    pod = _pod(preferred=[(1, [_expr(ZONE, "In", "invalid")]), (1, [_expr(INSTANCE_TYPE, "In", "invalid")])])
    assert _zones_of(THREE_ZONES, pod) != [None]


def test_preferred_should_relax_to_use_lighter_weights() -> None:
    pod = _pod(preferred=[(100, [_expr(INSTANCE_TYPE, "In", "test-zone-3")]), (50, [_expr(ZONE, "In", "z-b")]), (1, [_expr(ZONE, "In", "z-a")])])
    assert _zones_of(("z-a", "z-b"), pod) == ["z-b"]


def test_preferred_should_schedule_even_if_preference_is_conflicting_with_requirement() -> None:
    pod = _pod([[_expr(ZONE, "In", "z-c")]], [(1, [_expr(ZONE, "NotIn", "z-c")])])
    assert _zones_of(THREE_ZONES, pod) == ["z-c"]


def test_preferred_should_schedule_even_if_preference_requirements_are_conflicting() -> None:
    pod = _pod(preferred=[(1, [_expr(ZONE, "In", "invalid"), _expr(ZONE, "NotIn", "invalid")])])
    assert _zones_of(THREE_ZONES, pod) != [None]


# -- our own ------------------------------------------------------------------------------------


def test_the_first_required_term_an_offering_meets_decides_the_zone_not_the_order_of_zones() -> None:
    """Karpenter launches into the first term it can meet: z-c here, though z-a sorts first."""
    assert _zones_of(THREE_ZONES, _pod([[_expr(ZONE, "In", "z-c")], [_expr(ZONE, "In", "z-a")]])) == ["z-c"]


def test_a_preferred_instance_type_is_booted_though_a_cheaper_one_holds_the_pod() -> None:
    s = scaler(binpack_pool(instance_types=["*"], zones=list(THREE_ZONES)), catalog=CATALOG3)
    pod = _pod(preferred=[(10, [_expr(INSTANCE_TYPE, "In", "s.2xlarge")])])
    d = s.compute(ClusterSnapshot((pod,), ()), 0.0)
    assert [n.instance_type for n in d.start] == ["s.2xlarge"]


def test_pods_that_prefer_a_zone_do_not_fill_a_node_booted_in_another() -> None:
    """A pod without preferences gets a node in z-a; the one preferring z-b gets its own node
    there rather than the room left on the first (Karpenter's requirement on a NodeClaim)."""
    plain = _pod(name="plain")
    prefers = _pod(preferred=[(10, [_expr(ZONE, "In", "z-b")])], name="prefers")
    assert _zones_of(THREE_ZONES, plain, prefers) == ["z-a", "z-b"]


def test_a_pool_limit_on_the_preferred_zone_relaxes_the_preference_rather_than_leave_pods_waiting() -> None:
    """Two pods of 1.5 CPU prefer z-b, whose only pool may hold one 2-CPU node: the second
    goes to z-a, as Karpenter relaxes a preference no NodePool can launch."""
    pods = [_pod(preferred=[(10, [_expr(ZONE, "In", "z-b")])], cpu="1500m", name=f"p{i}") for i in range(2)]
    b = binpack_pool("b", instance_types=["s.large"], zones=["z-b"], capacity_types=[OD], limits=Limits(cpu="2"), weight=10)
    a = binpack_pool("a", instance_types=["s.large"], zones=["z-a"], capacity_types=[OD])
    d = scaler(b, a, catalog=CATALOG3).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    zone = {n.name: n.zone for n in d.start}
    assert sorted(zone[d.bindings[p.key]] for p in pods) == ["z-a", "z-b"]
    assert not d.unschedulable
    assert not d.waiting


def test_a_class_too_big_for_the_preferred_type_is_placed_on_another_one() -> None:
    """Two sizes in one group: the small pods get the preferred s.large, the 4-CPU pod (which
    no s.large holds) a relaxed s.2xlarge; none waits."""
    prefer_small = [(10, [_expr(INSTANCE_TYPE, "In", "s.large")])]
    pods = [_pod(preferred=prefer_small, name="small"), _pod(preferred=prefer_small, cpu="4", name="big")]
    s = scaler(binpack_pool(instance_types=["*"], zones=["z-a"]), catalog=CATALOG3)
    d = s.compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    itype = {n.name: n.instance_type for n in d.start}
    assert [itype[d.bindings[p.key]] for p in pods] == ["s.large", "s.2xlarge"]


def test_the_order_of_relaxation_is_karpenters() -> None:
    """The required terms one by one with the heaviest preference, the last kept; then the
    preferences by weight (equal weights in the pod's order); then none."""
    from nodemanager.scaler.steering import first_met, tries

    zone = {z: [_expr(ZONE, "In", z)] for z in THREE_ZONES}
    pod = _pod([zone["z-a"], zone["z-b"]], [(10, zone["z-c"]), (50, zone["z-a"]), (10, zone["z-b"])])
    r0, r1 = pod.affinity
    by_weight = [term for _, term in sorted(pod.preferred_affinity, key=lambda wt: -wt[0])]
    assert list(tries(pod)) == [(r0, by_weight[0]), (r1, by_weight[0]), (r1, by_weight[1]), (r1, by_weight[2]), (r1, None)]
    assert first_met(pod, [{ZONE: "z-b"}]) == (r1, by_weight[2])  # z-b: the second required term and the third preference
    assert first_met(_pod(preferred=[(1, zone["z-a"])]), [{ZONE: "z-b"}]) is None  # no more than the filters ask
