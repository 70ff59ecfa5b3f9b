"""Cases from Karpenter's own topology tests, with their names: kubernetes-sigs/karpenter
pkg/controllers/provisioning/scheduling/topology_test.go (at commit
025b80f7dcb2d9eaa60f730871730570b8c86d2f). A NodePool's requirements become a pool's zones
and capacity types; Karpenter's fake instance types become the small catalogs of these tests
(the skews checked do not depend on their sizes); ``ExpectSkew`` is the number of matching
pods per domain, and the expectations are Karpenter's."""

from __future__ import annotations

import collections

import pytest
from builders import OD, SPOT, binpack_pool, node, scaler
from test_interpod import CATALOG3, HOST, THREE_ZONES, ZONE

from nodemanager.model import Pod
from nodemanager.model.labels import CAPACITY_TYPE
from nodemanager.scaler import ClusterSnapshot

LABELS = {"test": "test"}


def _spread(key: str, *, skew: int = 1, hard: bool = True, min_domains: int | None = None) -> dict:
    c = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway", "labelSelector": {"matchLabels": LABELS}}
    if min_domains is not None:
        c["minDomains"] = min_domains
    return c


def _pods(n: int, *constraints: dict, labels: dict | None = None, cpu: str = "100m", name: str = "p", node_name: str = "") -> list[Pod]:
    spec: dict = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}], "topologySpreadConstraints": list(constraints)}
    if node_name:
        spec["nodeName"] = node_name
    meta = {"namespace": "default", "labels": LABELS if labels is None else labels}
    return [Pod.from_manifest({"metadata": {"name": f"{name}-{i}", **meta}, "spec": spec}) for i in range(n)]


def _skew(decision, pods: list[Pod], key: str, existing: dict[str, str] | None = None) -> list[int]:
    """Matching pods per domain, ascending (``ExpectSkew``); ``existing``: the domain of
    each existing node's name, for pods already bound."""
    domain = {n.name: n.labels[key] for n in decision.start} | (existing or {})
    counts = collections.Counter()
    for p in pods:
        where = p.node_name or decision.bindings.get(p.key)
        if where and LABELS.items() <= p.labels.items():
            counts[domain[where]] += 1
    return sorted(counts.values())


def _zonal(*zones: str):
    return scaler(binpack_pool(instance_types=["*"], zones=list(zones)), catalog=CATALOG3)


@pytest.mark.parametrize(
    ("case", "zones", "min_domains", "n", "skew"),
    [
        ("should respect minDomains constraints", THREE_ZONES[:2], 3, 3, [1, 1]),
        ("satisfied minDomains constraints (equal) should allow expected pod scheduling", THREE_ZONES, 3, 11, [3, 4, 4]),
        ("satisfied minDomains constraints (greater than minimum) should allow expected pod scheduling", THREE_ZONES, 2, 11, [3, 4, 4]),
    ],
)
def test_zonal_min_domains(case: str, zones: tuple[str, ...], min_domains: int, n: int, skew: list[int]) -> None:
    pods = _pods(n, _spread(ZONE, min_domains=min_domains))
    d = _zonal(*zones).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert _skew(d, pods, ZONE) == skew


def test_hostname_should_balance_pods_across_nodes() -> None:
    pods = _pods(4, _spread(HOST))
    d = _zonal(*THREE_ZONES).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert _skew(d, pods, HOST) == [1, 1, 1, 1]


def test_hostname_should_balance_pods_on_the_same_hostname_up_to_maxskew() -> None:
    pods = _pods(4, _spread(HOST, skew=4))
    d = _zonal(*THREE_ZONES).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert _skew(d, pods, HOST) == [4]


def test_hostname_balance_multiple_deployments_with_hostname_topology_spread() -> None:
    """Issue #1425: two Deployments of two replicas each, spread by hostname: two nodes."""
    pods = []
    for app in ("app1", "app2"):
        c = {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": app}}}
        pods += _pods(2, c, labels={"app": app}, name=app)
    d = _zonal(*THREE_ZONES).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert len(d.bindings) == 4
    assert len(d.start) == 2


def test_hostname_should_handle_interdependent_selectors() -> None:
    """The pods do not match their own selector: adding them never raises the skew, so
    they may share one node."""
    pods = _pods(5, _spread(HOST), labels={})
    d = _zonal(*THREE_ZONES).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert len({d.bindings[p.key] for p in pods}) == 1


@pytest.mark.parametrize("case", ["should balance pods across capacity types", "should respect NodePool capacity type constraints"])
def test_capacity_type_balance(case: str) -> None:
    pods = _pods(4, _spread(CAPACITY_TYPE))
    d = scaler(binpack_pool(capacity_types=[OD, SPOT])).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert _skew(d, pods, CAPACITY_TYPE) == [2, 2]


@pytest.mark.parametrize(
    ("case", "hard", "skew"),
    [
        ("should not violate max-skew when unsat = do not schedule (capacity type)", True, [1, 2]),
        ("should violate max-skew when unsat = schedule anyway (capacity type)", False, [1, 5]),
    ],
)
def test_capacity_type_after_the_pool_changes(case: str, hard: bool, skew: list[int]) -> None:
    """One pod on spot while the pool allows only spot; then the pool allows only
    on-demand and five more come."""
    constraint = _spread(CAPACITY_TYPE, hard=hard)
    (first,) = _pods(1, constraint, cpu="1100m", name="first")
    d = scaler(binpack_pool(capacity_types=[SPOT])).compute(ClusterSnapshot((first,), ()), 0.0)
    assert _skew(d, [first], CAPACITY_TYPE) == [1]
    spot = node("spot-1", d.start[0].instance_type, pool="general", capacity=SPOT, zone=d.start[0].zone, bound=("first-0",))
    (placed,) = _pods(1, constraint, cpu="1100m", name="first", node_name="spot-1")
    more = _pods(5, constraint, cpu="1100m", name="more")
    d = scaler(binpack_pool(capacity_types=[OD])).compute(ClusterSnapshot((placed, *more), (spot,)), 0.0)
    assert _skew(d, [placed, *more], CAPACITY_TYPE, {"spot-1": "spot"}) == skew
