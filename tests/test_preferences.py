"""Karpenter's first treatment of a pod's preferences on new nodes (``scaler.preferences``):
preferred pod affinity and anti-affinity and the pod's own ScheduleAnyway spread are
requirements of the nodes booted for it, relaxed one at a time in Karpenter's order while it
cannot be placed; profile defaults stay soft; a consolidation's what-if keeps them required;
``scheduling.preferencePolicy: Ignore`` turns it off."""

from __future__ import annotations

import dataclasses
import textwrap
from types import MappingProxyType

import pytest
from builders import binpack_pool, booted, scaler
from test_config import MINIMAL, REPO, problems_of
from test_default_spread import obj, owned
from test_interpod import CATALOG3, HOST, THREE_ZONES, ZONE

from nodemanager.config.load import parse_config
from nodemanager.config.schema import Limits
from nodemanager.model import Pod
from nodemanager.model.interpod import WhenUnsatisfiable
from nodemanager.model.pod_owners import ReplicaSet
from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot
from nodemanager.scaler.preferences import ladder, preferring
from nodemanager.scaler.settings import ScalerSettings
from nodemanager.scheduling.profile import DEFAULT_PROFILE

WEB = {"app": "web"}


def _term(labels: dict, key: str, weight: int) -> dict:
    return {"weight": weight, "podAffinityTerm": {"labelSelector": {"matchLabels": labels}, "topologyKey": key}}


def _soft_spread(key: str, skew: int = 1) -> dict:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": WEB}}


def _pods(n: int, name: str = "web", labels: dict | None = None, cpu: str = "100m", **spec: object) -> list[Pod]:
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}], **spec}
    meta = {"namespace": "default", "labels": WEB if labels is None else labels}
    return [Pod.from_manifest({"metadata": {"name": f"{name}-{i}", **meta}, "spec": body}) for i in range(n)]


def _apart(weight: int = 50, key: str = HOST) -> dict:
    return {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [_term(WEB, key, weight)]}}}


def _scaler(*, respect: bool = True, **pool: object) -> BindingNodeScaler:
    made = scaler(binpack_pool(**{"instance_types": ["*"], "zones": list(THREE_ZONES), **pool}), catalog=CATALOG3)
    return BindingNodeScaler(dataclasses.replace(made.settings, respect_preferences=respect), CATALOG3)


def _solve(pods: list[Pod], s: BindingNodeScaler | None = None, **kw: object):
    return (s or _scaler()).compute(ClusterSnapshot(tuple(pods), (), **kw), 0.0)


# -- the ladder -------------------------------------------------------------------------------


def test_the_ladder_relaxes_in_karpenters_order() -> None:
    """Affinity terms heaviest first, then anti-affinity terms, then the ScheduleAnyway
    constraints (the first left each time, the last taking its place); the pod itself last."""
    affinity = {
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [_term({"a": "light"}, ZONE, 10), _term({"a": "heavy"}, ZONE, 90)]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [_term(WEB, HOST, 5)]},
    }
    hard = {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": WEB}}
    spread = [_soft_spread("s1"), hard, _soft_spread("s2"), _soft_spread("s3")]
    (pod,) = _pods(1, affinity=affinity, topologySpreadConstraints=spread)
    steps = ladder(pod)

    def describe(p: Pod) -> tuple:
        required = tuple(t.selector.requirements[0].values[0] if t.selector.requirements[0].key == "a" else "web" for t in p.pod_affinity.required)
        apart = len(p.pod_affinity.anti_required)
        return required, apart, tuple(c.topology_key + ("!" if c.hard else "?") for c in p.spread)

    assert [(describe(p), keep) for p, keep in steps] == [
        ((("heavy", "light"), 1, ("s1!", "rack!", "s2!", "s3!")), True),
        ((("light",), 1, ("s1!", "rack!", "s2!", "s3!")), True),
        (((), 1, ("s1!", "rack!", "s2!", "s3!")), True),
        (((), 0, ("s1!", "rack!", "s2!", "s3!")), False),
        (((), 0, ("s3!", "rack!", "s2!")), False),  # s1 out, s3 in its place
        (((), 0, ("s2!", "rack!")), False),  # then s3 (now first), s2 in its place
        (((), 0, ("s1?", "rack!", "s2?", "s3?")), False),  # the pod itself
    ]
    assert steps[-1][0] is pod
    assert all(p.key == pod.key and p.labels == pod.labels for p, _ in steps)


def test_a_pod_without_preferences_is_its_own_ladder() -> None:
    (pod,) = _pods(1, topologySpreadConstraints=[{**_soft_spread(HOST), "whenUnsatisfiable": "DoNotSchedule"}])
    assert not preferring(pod)
    assert ladder(pod) == [(pod, False)]


# -- new nodes --------------------------------------------------------------------------------


def test_replicas_that_prefer_to_keep_apart_get_a_new_node_each() -> None:
    pods = _pods(3, **_apart())
    d = _solve(pods)
    assert len({d.bindings[p.key] for p in pods}) == 3
    ignored = _solve(pods, _scaler(respect=False))
    assert len({ignored.bindings[p.key] for p in pods}) == 1  # Ignore: packed, the preference only scores


def test_a_schedule_anyway_zone_spread_spreads_new_nodes_over_the_zones() -> None:
    pods = _pods(6, topologySpreadConstraints=[_soft_spread(ZONE)])
    d = _solve(pods)
    zone = {n.name: n.zone for n in d.start}
    assert sorted(zone[d.bindings[p.key]] for p in pods) == ["z-a", "z-a", "z-b", "z-b", "z-c", "z-c"]


def test_a_preference_a_pool_limit_cannot_meet_is_relaxed_and_no_pod_waits() -> None:
    """Room for two s.large (4 CPUs): the first two replicas get one each, the third joins one."""
    pods = _pods(3, **_apart())
    d = _solve(pods, _scaler(limits=Limits(cpu="4"), instance_types=["s.large"]))
    assert set(d.bindings) == {p.key for p in pods}
    assert not d.waiting
    assert not d.unschedulable
    assert sorted(len(n.pods) for n in d.start) == [1, 2]


def test_preferred_pod_affinity_follows_its_target_to_its_zone() -> None:
    (target,) = _pods(1, "db", labels={"app": "db"}, nodeSelector={ZONE: "z-b"})
    follow = {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [_term({"app": "db"}, ZONE, 100)]}}}
    pods = _pods(4, cpu="1500m", **follow)  # a node each: the zone is the preference's doing
    d = _solve([target, *pods])
    zone = {n.name: n.zone for n in d.start}
    assert {zone[d.bindings[p.key]] for p in pods} == {"z-b"}


def test_the_profiles_default_spread_stays_a_preference() -> None:
    """A ReplicaSet's pods get the system defaults (hostname maxSkew 3, ScheduleAnyway):
    Karpenter does not see them, so six small pods still share one new node."""
    rs = ("apps/v1", "ReplicaSet", "web-6d4")
    pods = tuple(owned(f"web-{i}", WEB, rs) for i in range(6))
    d = _scaler().compute(ClusterSnapshot(pods, (), pod_selecting=(obj(ReplicaSet, "web-6d4", WEB),)), 0.0)
    assert len(d.start) == 1
    assert len(d.bindings) == 6


def test_a_list_default_schedule_anyway_stays_a_preference_too() -> None:
    listed = {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"}]}
    base = _scaler().settings
    profile = dataclasses.replace(DEFAULT_PROFILE, plugin_args=MappingProxyType({"PodTopologySpread": listed}))
    s = BindingNodeScaler(dataclasses.replace(base, profile=profile), CATALOG3)
    assert all(c.defaulted and c.when_unsatisfiable is WhenUnsatisfiable.SCHEDULE_ANYWAY for c in s.settings.spread_defaults)
    rs = ("apps/v1", "ReplicaSet", "web-6d4")
    pods = tuple(owned(f"web-{i}", WEB, rs) for i in range(4))
    d = s.compute(ClusterSnapshot(pods, (), pod_selecting=(obj(ReplicaSet, "web-6d4", WEB),)), 0.0)
    assert len(d.start) == 1


# -- consolidation's what-if ------------------------------------------------------------------


def test_a_what_if_keeps_apart_the_replicas_provisioning_kept_apart() -> None:
    pods = _pods(2, **_apart())
    d = _solve(pods, one_new_node=True)
    assert len({d.bindings[p.key] for p in pods}) == 2
    assert len({_solve(pods, _scaler(respect=False), one_new_node=True).bindings[p.key] for p in pods}) == 1


def test_a_what_if_does_not_move_a_replica_onto_its_siblings_node() -> None:
    """Two nodes, a replica each; the what-if without the second moves its replica: it may
    not join its sibling (it would need a new node), though the node has the room."""
    first = _solve(_pods(2, **_apart()))
    nodes = tuple(booted(spec) for spec in first.start)
    placed = [dataclasses.replace(p, node_name=first.bindings[p.key]) for p in _pods(2, **_apart())]
    moving, staying = placed[1], placed[0]
    kept = next(n for n in nodes if n.name == staying.node_name)
    what_if = ClusterSnapshot((staying, dataclasses.replace(moving, node_name="")), (kept,), one_new_node=True)
    d = _scaler().compute(what_if, 0.0)
    assert d.bindings[moving.key] != kept.name
    assert _scaler(respect=False).compute(what_if, 0.0).bindings[moving.key] == kept.name


# -- configuration ----------------------------------------------------------------------------


def test_preference_policy_is_read_and_validated() -> None:
    config, _ = parse_config(MINIMAL, "t", REPO)
    assert ScalerSettings.from_config(config).respect_preferences
    config, _ = parse_config(MINIMAL + "scheduling: {preferencePolicy: Ignore}\n", "t", REPO)
    assert not ScalerSettings.from_config(config).respect_preferences
    problems = problems_of(MINIMAL + textwrap.dedent("scheduling: {preferencePolicy: Sometimes}\n"))
    assert any("scheduling.preferencePolicy" in p and "Sometimes" in p for p in problems), problems


@pytest.mark.parametrize("policy", ["Respect", "Ignore"])
def test_both_policies_place_every_pod(policy: str) -> None:
    pods = [*_pods(5, **_apart()), *_pods(4, "spread", topologySpreadConstraints=[_soft_spread(ZONE)])]
    d = _solve(pods, _scaler(respect=policy == "Respect", limits=Limits(cpu="6")))
    assert set(d.bindings) == {p.key for p in pods}
