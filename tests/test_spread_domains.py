"""Topology spread over any label a new node can have, not only zone and hostname (#47
group 1): capacity type, instance type, a pool's own label. The domains a spread is measured
over include the values the pools' offerings give a new node the pod could run on, as
Karpenter counts the domains a NodePool can create."""

from __future__ import annotations

import collections

from builders import OD, SPOT, binpack_pool, scaler

from nodemanager.model import Pod
from nodemanager.model.labels import CAPACITY_TYPE, INSTANCE_TYPE
from nodemanager.scaler import ClusterSnapshot


def _pods(n: int, key: str, *, skew: int = 1, min_domains: int | None = None, cpu: str = "500m") -> list[Pod]:
    constraint = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}
    if min_domains is not None:
        constraint["minDomains"] = min_domains
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}], "topologySpreadConstraints": [constraint]}
    return [Pod.from_manifest({"metadata": {"name": f"web-{i}", "namespace": "default", "labels": {"app": "web"}}, "spec": spec}) for i in range(n)]


def _by_label(decision, pods: list[Pod], key: str) -> collections.Counter:
    labels = {n.name: n.labels for n in decision.start}
    return collections.Counter(labels[decision.bindings[p.key]][key] for p in pods if p.key in decision.bindings)


def test_four_pods_spread_over_capacity_type_get_two_of_each() -> None:
    pods = _pods(4, CAPACITY_TYPE)
    d = scaler(binpack_pool(capacity_types=[OD, SPOT])).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert d.unschedulable == {}
    assert _by_label(d, pods, CAPACITY_TYPE) == {"on-demand": 2, "spot": 2}


def test_spread_over_instance_type_uses_each_type_the_pool_allows() -> None:
    pods = _pods(6, INSTANCE_TYPE)
    d = scaler(binpack_pool(instance_types=["a.large", "b.large"])).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert d.unschedulable == {}
    assert _by_label(d, pods, INSTANCE_TYPE) == {"a.large": 3, "b.large": 3}


def test_spread_over_a_pools_own_label_reaches_every_pool_that_sets_it() -> None:
    pools = (binpack_pool("blue", labels={"team": "blue"}), binpack_pool("green", labels={"team": "green"}))
    pods = _pods(4, "team")
    d = scaler(*pools).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert d.unschedulable == {}
    assert _by_label(d, pods, "team") == {"blue": 2, "green": 2}


def test_min_domains_past_what_the_pools_can_create_holds_each_domain_to_max_skew() -> None:
    """Two capacity types and minDomains 3: the global minimum counts as 0 (kube), so each
    domain takes at most maxSkew pods and the rest are unschedulable."""
    pods = _pods(4, CAPACITY_TYPE, min_domains=3)
    d = scaler(binpack_pool(capacity_types=[OD, SPOT])).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert _by_label(d, pods, CAPACITY_TYPE) == {"on-demand": 1, "spot": 1}
    assert len(d.unschedulable) == 2
    assert all("topology spread" in why for why in d.unschedulable.values())


def test_a_domain_only_an_untolerated_pool_offers_does_not_count() -> None:
    """A pool whose taint the pods do not tolerate makes no domain for them: else its
    empty label value would hold the minimum at 0 and leave pods unplaced."""
    tainted = binpack_pool("tainted", labels={"team": "red"}, taints=[{"key": "dedicated", "value": "red", "effect": "NoSchedule"}])
    pods = _pods(4, "team")
    d = scaler(binpack_pool("blue", labels={"team": "blue"}), tainted).compute(ClusterSnapshot(tuple(pods), ()), 0.0)
    assert d.unschedulable == {}
    assert _by_label(d, pods, "team") == {"blue": 4}
