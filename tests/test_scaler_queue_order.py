"""The scaler takes pods in kube's queue order and sees what it placed earlier in the same
computation (#47 groups 2 and 3): an earlier pod keeps the domain it needs from a later one,
and a pod may follow a pod placed a moment before it."""

from __future__ import annotations

import datetime

from builders import binpack_pool, scaler
from test_interpod import CATALOG3, HOST, ZONE, pod_affinity

from nodemanager.model import Pod
from nodemanager.scaler import ClusterSnapshot


def _pod(name: str, labels: dict, created: int, *, priority: int = 0, cpu: str = "100m", **spec: object) -> Pod:
    stamp = datetime.datetime.fromtimestamp(created, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}], "priority": priority, **spec}
    return Pod.from_manifest({"metadata": {"name": name, "namespace": "default", "labels": labels, "creationTimestamp": stamp}, "spec": body})


def _plan(*pods: Pod):
    return scaler(binpack_pool(instance_types=["*"]), catalog=CATALOG3).compute(ClusterSnapshot(pods, ()), 0.0)


def _zone(decision, pod: Pod) -> str:
    return {n.name: n.zone for n in decision.start}[decision.bindings[pod.key]]


def test_an_earlier_pod_pinned_to_a_zone_keeps_it_from_a_later_pod_with_zone_anti_affinity() -> None:
    """kube-scheduler takes the pinned pod first (it came first) and the later one goes to
    another zone; taken the other way round the later pod takes z-a, whose anti-affinity
    then repels the pinned pod (symmetry) and it could run nowhere."""
    pinned = _pod("pinned", {"app": "web"}, 100, nodeSelector={ZONE: "z-a"})
    later = _pod("later", {"app": "web"}, 200, **pod_affinity("podAntiAffinity", ZONE, {"app": "web"}))
    d = _plan(later, pinned)
    assert d.unschedulable == {}
    assert (_zone(d, pinned), _zone(d, later)) != ("z-a", "z-a")
    assert _zone(d, pinned) == "z-a"


def test_priority_comes_before_age() -> None:
    """PrioritySort: a higher priority goes first whatever its age, so here the younger,
    higher-priority pod with anti-affinity takes z-a and the older pinned pod cannot run."""
    pinned = _pod("pinned", {"app": "web"}, 100, nodeSelector={ZONE: "z-a"})
    urgent = _pod("urgent", {"app": "web"}, 200, priority=10, nodeSelector={ZONE: "z-a"}, **pod_affinity("podAntiAffinity", ZONE, {"app": "web"}))
    d = _plan(pinned, urgent)
    assert _zone(d, urgent) == "z-a"
    assert pinned.key in d.unschedulable


def test_a_pod_follows_a_pod_placed_earlier_in_the_same_computation() -> None:
    """Required affinity to a pod that is itself waiting: kube schedules the follower once
    the leader is placed; Karpenter retries it in the same Solve. Either way both run."""
    leader = _pod("leader", {"app": "db"}, 200, cpu="1500m")
    follower = _pod("follower", {"app": "agent"}, 100, **pod_affinity("podAffinity", HOST, {"app": "db"}))
    d = _plan(follower, leader)
    assert d.unschedulable == {}
    assert d.bindings[follower.key] == d.bindings[leader.key]


def test_a_zone_affinity_chain_is_placed_in_one_computation() -> None:
    """Three pods, each needing the zone of the next one's label: placed back to front."""
    a = _pod("a", {"tier": "a"}, 100, **pod_affinity("podAffinity", ZONE, {"tier": "b"}))
    b = _pod("b", {"tier": "b"}, 200, **pod_affinity("podAffinity", ZONE, {"tier": "c"}))
    c = _pod("c", {"tier": "c"}, 300, nodeSelector={ZONE: "z-b"})
    d = _plan(a, b, c)
    assert d.unschedulable == {}
    assert {_zone(d, p) for p in (a, b, c)} == {"z-b"}


def test_groups_keep_the_packers_order_but_where_a_later_one_contends_with_an_earlier() -> None:
    """``packing_order``: every group once; the packer's order (rank) among groups that
    cannot take a zone from each other; queue order where one can, whatever the selector's
    form (``In``, which the label index narrows, or ``Exists``/``NotIn``, which it does not)."""
    from nodemanager.scaler.group_order import packing_order

    def anti(selector: dict) -> dict:
        body = {"topologyKey": ZONE, "labelSelector": selector}
        return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [body]}}}

    queue = [
        _pod("plain-a", {"app": "a"}, 1),  # rank 2: the packer would place it last
        _pod("anti-in", {"app": "x"}, 2, **anti({"matchLabels": {"app": "a"}})),  # repels plain-a: must wait for it
        _pod("plain-b", {"app": "b"}, 3),
        _pod("anti-exists", {"app": "y"}, 4, **anti({"matchExpressions": [{"key": "tier", "operator": "Exists"}]})),  # repels nothing
        _pod(
            "anti-notin", {"app": "z"}, 5, **anti({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a", "x", "y", "z"]}]})
        ),  # repels plain-b
    ]
    rank = {"plain-a": 2, "plain-b": 2, "anti-in": 1, "anti-exists": 1, "anti-notin": 1}
    order = [p.name for p in packing_order(queue, lambda p: [p], lambda p: rank[p.name], {})]
    assert sorted(order) == sorted(p.name for p in queue)
    assert order.index("plain-a") < order.index("anti-in")
    assert order.index("plain-b") < order.index("anti-notin")
    assert order.index("anti-exists") < order.index("plain-a")  # no contention: the packer's order
