"""Karpenter's cases for preferred pod affinity and anti-affinity and ScheduleAnyway spread,
with their names: kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/
topology_test.go (at commit 025b80f7dcb2d9eaa60f730871730570b8c86d2f). Karpenter makes these
preferences requirements of the nodes it launches at first and relaxes them while a pod cannot
be placed (``nodemanager.scaler.preferences``); its cases check both halves: a preference
that can be met shapes the nodes, one that cannot never leaves a pod out. Karpenter's zones
``test-zone-1..3`` are ``z-a..z-c``; the expectations are Karpenter's."""

from __future__ import annotations

import collections
import dataclasses

import pytest
from builders import OD, SPOT, binpack_pool, booted, scaler
from test_interpod import CATALOG3, HOST, THREE_ZONES, ZONE

from nodemanager.config.schema import Limits
from nodemanager.model import Pod, PodPhase
from nodemanager.model.labels import CAPACITY_TYPE
from nodemanager.scaler import ClusterSnapshot

LABELS = {"test": "test"}
S2 = {"security": "s2"}


def _term(labels: dict, key: str) -> dict:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def _preferred(kind: str, labels: dict, key: str, weight: int = 50) -> dict:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "podAffinityTerm": _term(labels, key)}]}}


def _spread(key: str, *, hard: bool = True, skew: int = 1) -> dict:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway", "labelSelector": {"matchLabels": LABELS}}


def _pods(n: int, name: str, *, labels: dict | None = None, cpu: str = "100m", selector: dict | None = None, **spec: object) -> list[Pod]:
    body: dict = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}], **spec}
    if selector:
        body["nodeSelector"] = selector
    meta = {"namespace": "default", "labels": labels or {}}
    return [Pod.from_manifest({"metadata": {"name": f"{name}-{i}", **meta}, "spec": body}) for i in range(n)]


def _solve(pods: list[Pod], *pools, existing: tuple = ()):
    s = scaler(*(pools or (binpack_pool(instance_types=["*"], zones=list(THREE_ZONES)),)), catalog=CATALOG3)
    return s.compute(ClusterSnapshot(tuple(pods), existing), 0.0)


def _skew(decision, pods: list[Pod], key: str) -> list[int]:
    domain = {n.name: n.labels[key] for n in decision.start}
    return sorted(collections.Counter(domain[decision.bindings[p.key]] for p in pods if p.key in decision.bindings).values())


def test_should_allow_violation_of_preferred_pod_affinity() -> None:
    spread = _pods(10, "spread", labels=LABELS, topologySpreadConstraints=[_spread(HOST)])
    (aff,) = _pods(1, "aff", affinity=_preferred("podAffinity", S2, HOST))
    d = _solve([*spread, aff])
    assert aff.key in d.bindings


def test_should_allow_violation_of_preferred_pod_anti_affinity() -> None:
    spread = _pods(3, "spread", labels=LABELS, topologySpreadConstraints=[_spread(ZONE)])
    aff = _pods(10, "aff", affinity=_preferred("podAntiAffinity", LABELS, ZONE))
    d = _solve([*spread, *aff])
    assert all(p.key in d.bindings for p in aff)


def test_should_violate_preferred_pod_anti_affinity_on_zone_inverse() -> None:
    """Three pods pinned to a zone each prefer to keep pods labelled s2 out of their zone;
    a pod labelled s2 still lands (their preference keeps no other pod away)."""
    zonal = [_pods(1, f"z{i}", cpu="2", selector={ZONE: z}, affinity=_preferred("podAntiAffinity", S2, ZONE, 10))[0] for i, z in enumerate(THREE_ZONES)]
    (aff,) = _pods(1, "aff", labels=S2)
    d = _solve([*zonal, aff])
    assert all(p.key in d.bindings for p in [*zonal, aff])


def test_should_violate_preferred_pod_anti_affinity_on_zone_inverse_with_existing_nodes() -> None:
    zonal = [_pods(1, f"z{i}", cpu="2", selector={ZONE: z}, affinity=_preferred("podAntiAffinity", S2, ZONE, 10))[0] for i, z in enumerate(THREE_ZONES)]
    first = _solve(zonal)
    assert len(first.start) == 3
    nodes = tuple(booted(spec) for spec in first.start)
    placed = [_bound(p, first.bindings[p.key]) for p in zonal]
    (aff,) = _pods(1, "aff", labels=S2)
    d = _solve([*placed, aff], existing=nodes)
    assert aff.key in d.bindings


def test_should_allow_violation_of_a_pod_affinity_preference_with_a_conflicting_required_constraint() -> None:
    (target,) = _pods(1, "target", labels=S2)
    pods = _pods(3, "aff", labels=LABELS, topologySpreadConstraints=[_spread(HOST)], affinity=_preferred("podAffinity", S2, HOST))
    d = _solve([*pods, target])
    assert all(p.key in d.bindings for p in [*pods, target])
    assert _skew(d, pods, HOST) == [1, 1, 1]


def test_combined_capacity_type_should_limit_spread_options_by_node_selector() -> None:
    """ScheduleAnyway over capacity types, five pods selecting spot and five on-demand."""
    c = _spread(CAPACITY_TYPE, hard=False)
    spot = _pods(5, "spot", labels=LABELS, selector={CAPACITY_TYPE: "spot"}, topologySpreadConstraints=[c])
    od = _pods(5, "od", labels=LABELS, selector={CAPACITY_TYPE: "on-demand"}, topologySpreadConstraints=[c])
    d = scaler(binpack_pool(capacity_types=[OD, SPOT])).compute(ClusterSnapshot((*spot, *od), ()), 0.0)  # (a catalog with spot prices)
    assert _skew(d, [*spot, *od], CAPACITY_TYPE) == [5, 5]


@pytest.mark.skip(
    reason="not modelled: Karpenter counts z-c as a domain from the NodePool that may add nothing and so leaves 8 pods pending; nodemanager"
    " places the pods that pool cannot take in z-a and z-b, as kube-scheduler's filter allows there (no node in z-c: no z-c domain)"
)
def test_combined_hostname_and_zonal_should_spread_pods_while_respecting_both_constraints() -> None:
    """Zone DoNotSchedule (skew 1) and hostname ScheduleAnyway (skew 1); a second pool that
    offers the third zone but may add nothing (limit 0): one pod per zone in the first two,
    and one per node."""
    hard, soft = _spread(ZONE), _spread(HOST, hard=False)
    pods = _pods(10, "p", labels=LABELS, topologySpreadConstraints=[hard, soft])
    a = binpack_pool("a", instance_types=["*"], zones=["z-a", "z-b"])
    b = binpack_pool("b", instance_types=["*"], zones=["z-c"], limits=Limits(cpu="0"))
    d = _solve(pods, a, b)
    assert _skew(d, pods, ZONE) == [1, 1]
    assert _skew(d, pods, HOST) == [1, 1]


def _bound(pod: Pod, node: str) -> Pod:
    return dataclasses.replace(pod, node_name=node, phase=PodPhase.RUNNING)
