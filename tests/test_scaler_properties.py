"""Invariants of compute() over random pods, nodes and pools (hypothesis)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from builders import CATALOG, OD, SPOT, ZONES, pod, scaler
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodemanager.config.catalog_schema import PriceOverride
from nodemanager.config.launch_schema import LaunchMethod
from nodemanager.config.prices import overridden
from nodemanager.config.schema import Limits, Packing, Pool, Standby
from nodemanager.model import LIVE_STATES, CapacityPolicy, CapacityType, Node, NodeName, NodeState, PodPhase, Resources, Taint, TaintEffect, Toleration
from nodemanager.model import labels as wk
from nodemanager.model.daemonset import DaemonSet, daemon_overhead
from nodemanager.model.interpod import parse_pod_affinity, parse_spread
from nodemanager.model.ports import HostPort
from nodemanager.model.reservation import Reservation, ReservationKind
from nodemanager.model.selectors import HARD_EFFECTS, untolerated
from nodemanager.scaler import ClusterSnapshot, Decision
from nodemanager.scaler.pools import capacity_of
from nodemanager.scheduling import CycleState, Framework, NodeInfo

TYPES = [t.name for t in CATALOG if t.name != "g.xlarge"]
OPERATOR_TAINTS = (
    Taint("dedicated", TaintEffect.NO_SCHEDULE, "db"),
    Taint("maintenance", TaintEffect.NO_EXECUTE),
    Taint("slow", TaintEffect.PREFER_NO_SCHEDULE),
)
TOLERATIONS = (Toleration("team", "Exists"), Toleration("dedicated", "Equal", "db"), Toleration("node.kubernetes.io/unschedulable", "Exists"))


def _preferred(kind: str, app: str, key: str) -> dict:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": term}]}}


# Preferences new nodes treat as requirements at first and relax (scaler.preferences): soft
# anti-affinity to a pod's own kind, soft affinity to the other kind, a ScheduleAnyway spread.
PREFERENCES = (None, _preferred("podAntiAffinity", "a", wk.HOSTNAME), _preferred("podAffinity", "b", wk.ZONE))
SOFT_SPREAD = ((), ({"maxSkew": 1, "topologyKey": wk.ZONE, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "a"}}},))


def _daemon_set(name: str, cpu: str, memory: str, **spec: object) -> DaemonSet:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **spec}}
    return DaemonSet.from_manifest({"metadata": {"name": name, "namespace": "kube-system"}, "spec": {"template": template}})


DAEMON_SETS = (
    _daemon_set("proxy", "100m", "64Mi"),
    _daemon_set("logs", "300m", "256Mi", tolerations=[{"operator": "Exists"}]),
    _daemon_set("p1-agent", "500m", "1Gi", nodeSelector={"pool": "p1"}),
)
POOL_NAMES = ("p1", "p2")
NOW = 1000.0
RESERVED = CapacityType.RESERVED
# Capacity reservations some pools select (``pools[].capacityReservations``): an ODCR and a Capacity Block.
RESERVATIONS = (
    Reservation("cr-0aaaaaaaaaaaaaaa1", "m.xlarge", ZONES[0], total=3, available=3),
    Reservation("cr-0bbbbbbbbbbbbbbb1", "a.large", ZONES[1], total=2, available=2, kind=ReservationKind.CAPACITY_BLOCK, ends_at=NOW + 7200),
)


@st.composite
def pools(draw):
    out = []
    for name in POOL_NAMES[: draw(st.integers(1, 2))]:
        types = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=4, unique=True))
        caps = draw(st.lists(st.sampled_from([OD, SPOT]), min_size=1, max_size=2, unique=True))
        standby = []
        if draw(st.booleans()):
            spot = draw(st.sampled_from([c is SPOT for c in caps]))
            standby = [Standby(instance_type=draw(st.sampled_from(types)), count=draw(st.integers(0, 2)), spot=spot)]
        limits = Limits(nodes=draw(st.none() | st.integers(0, 8)), cpu=draw(st.none() | st.sampled_from(["8", "24", "64"])))
        taints = [{"key": "team", "value": name, "effect": "NoSchedule"}] if draw(st.booleans()) else []
        terms = []
        if draw(st.integers(0, 2)) == 0:  # reserved capacity first, then what the pool buys
            caps = [RESERVED, *caps]
            terms = [{"id": r.id} for r in draw(st.lists(st.sampled_from(RESERVATIONS), min_size=1, max_size=2, unique_by=lambda r: r.id))]
        launch = draw(LAUNCHES)
        if standby and "minValues" in launch and launch["minValues"].get("policy") != "BestEffort":
            # A Strict minValues the pool's types cannot meet leaves a pod waiting while a
            # standby node boots, which the pod takes at the next decision: two steps, not one.
            launch = {}
        out.append(
            Pool(
                name=name,
                packing=draw(st.sampled_from([Packing.CELL, Packing.BINPACK])),
                instance_types=types,
                capacity_types=caps,
                labels={"pool": name},
                taints=taints,
                standby=standby,
                limits=limits,
                weight=draw(st.integers(0, 2)),
                launch=launch,
                capacity_reservations=terms,
            )
        )
    return out


# How a pool's nodes are launched: the alternatives a fleet may take must hold what their node holds.
LAUNCHES = st.sampled_from(
    [
        {},
        {"method": "runInstances"},
        {"priceTolerance": 0.5, "maxOfferings": 2},
        {"priceTolerance": 0},
        {"minValues": {"instanceTypes": 3}},
        {"minValues": {"instanceTypes": 4, "families": 2, "policy": "BestEffort"}},
    ]
)


@st.composite
def scenarios(draw):
    the_pools = draw(pools())
    nodes = []
    for i in range(draw(st.integers(0, 6))):
        pool = draw(st.sampled_from(the_pools))
        itype = draw(st.sampled_from(pool.instance_types))
        nodes.append(
            Node(
                NodeName(f"n{i}"),
                pool.name,
                itype,
                draw(st.sampled_from(pool.capacity_types)),
                draw(st.sampled_from(ZONES)),
                allocatable=CATALOG[itype].allocatable,
                state=draw(st.sampled_from(list(NodeState))),
                labels={"pool": pool.name},
                # the cluster's word: the pool's taints and what operators added (taint, cordon)
                taints=tuple(Taint(t.key, TaintEffect(t.effect), t.value) for t in pool.taints) + tuple(draw(st.sets(st.sampled_from(OPERATOR_TAINTS)))),
                unschedulable=draw(st.integers(0, 3)) == 0,
            )
        )
    pods = []
    free = {n.name: n.allocatable for n in nodes if n.state in (NodeState.AVAILABLE, NodeState.CLAIMED)}
    for i in range(draw(st.integers(0, 25))):
        p = pod(
            f"q{i}",
            cpu=draw(st.sampled_from(["100m", "500m", "1", "1500m", "1700m", "3", "20"])),
            memory=draw(st.sampled_from(["128Mi", "1Gi", "3Gi", "100Gi"])),
            itype=draw(st.sampled_from(["", "", "a.large", "m.*"])),
            policy=draw(st.sampled_from(list(CapacityPolicy))),
            zone=draw(st.sampled_from(["", "", ZONES[1]])),
            selector=draw(st.sampled_from([None, {"pool": "p1"}, {"pool": "p2"}])),
            priority=draw(st.integers(0, 3)),
            created=float(i),
            group=draw(st.sampled_from(["", "", "", "g1"])),
            min_member=3,
        )
        p = dataclasses.replace(p, tolerations=tuple(draw(st.sets(st.sampled_from(TOLERATIONS)))))
        if draw(st.integers(0, 4)) == 0:
            p = dataclasses.replace(p, host_ports=(HostPort(8080),))
        if draw(st.integers(0, 3)) == 0:
            labels = {"app": draw(st.sampled_from(["a", "b"]))}
            affinity = draw(st.sampled_from(PREFERENCES))
            spread = parse_spread(list(draw(st.sampled_from(SOFT_SPREAD))), "spread", labels)
            leaning = parse_pod_affinity(affinity, "affinity", p.namespace, labels) if affinity else p.pod_affinity
            p = dataclasses.replace(p, labels=labels, spread=spread, pod_affinity=leaning)
        if free and draw(st.integers(0, 4)) == 0:
            target = draw(st.sampled_from(sorted(free)))
            if (p.requests + Resources({"pods": 1})).fits(free[target]):
                free[target] = free[target] - p.requests - Resources({"pods": 1})
                p = dataclasses.replace(p, phase=PodPhase.RUNNING, node_name=target)
        pods.append(p)
    # earlier bindings of waiting pods, on the nodes the scaler may still bind to
    waiting = [p.key for p in pods if not p.node_name]
    nodes = [dataclasses.replace(n, bound_pods=tuple(draw(st.lists(st.sampled_from(waiting), max_size=2, unique=True)))) if waiting else n for n in nodes]
    unavailable = {(t, c, z): NOW + 100 for t in TYPES for c in (OD, SPOT) for z in ZONES if draw(st.integers(0, 9)) == 0}
    daemon_sets = tuple(draw(st.lists(st.sampled_from(DAEMON_SETS), max_size=3, unique_by=lambda d: d.key)))
    left = {r.id: draw(st.integers(0, r.total)) for r in RESERVATIONS if draw(st.booleans())}  # (absent: the catalog's count)
    return the_pools, ClusterSnapshot(tuple(pods), tuple(nodes), unavailable, daemon_sets=daemon_sets, reservations_left=left)


def final_node_infos(the_pools, snap: ClusterSnapshot, d: Decision) -> dict[str, NodeInfo]:
    """Every live node after the decision, with its running and bound pods."""
    cell = {p.name for p in the_pools if p.packing is Packing.CELL}
    infos: dict[str, NodeInfo] = {}
    stopped = {o.name for o in d.stop}
    for n in snap.nodes:
        if n.state in LIVE_STATES and n.name not in stopped:
            known = wk.well_known(
                name=n.name, pool=n.pool, instance_type=n.instance_type, zone=n.zone, capacity_type=n.capacity_type.value, architectures=("x86_64",)
            )
            labels = {**n.labels, **known}
            infos[n.name] = NodeInfo(
                n.name, n.pool, n.instance_type, n.capacity_type, n.zone, n.allocatable, labels, n.taints, cell=n.pool in cell, unschedulable=n.unschedulable
            )
    for spec in d.start:
        infos[spec.name] = NodeInfo(
            spec.name, spec.pool, spec.instance_type, spec.capacity_type, spec.zone, spec.allocatable, spec.labels, spec.taints, cell=spec.pool in cell
        )
    pods = {p.key: p for p in snap.pods}
    for p in snap.pods:
        if p.node_name in infos and not p.is_terminal:
            infos[p.node_name].add_pod(p)
    for key, target in d.bindings.items():
        infos[target].add_pod(pods[key])
    return infos


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# What an account pays instead of the list price changes which types win, never the rules.
PRICE_OVERRIDES = st.sampled_from(
    [
        (),
        (PriceOverride(instance_types=["m.*"], multiplier=0.3),),
        (PriceOverride(instance_types=["a.large"], capacity_types=[SPOT], price=5.0), PriceOverride(instance_types=["*"], multiplier=2)),
        (PriceOverride(instance_types=["*"], zones=[ZONES[0]], multiplier=3),),
    ]
)


@SETTINGS
@given(scenarios(), st.sampled_from([0.0, 60.0]), st.sampled_from([2, 1000]), PRICE_OVERRIDES)
def test_decision_invariants(scenario, grace, cap, overrides):
    the_pools, snap = scenario
    s = scaler(*the_pools, idle_grace=grace, max_boots=cap, catalog=overridden(CATALOG, overrides).with_reservations(RESERVATIONS))
    d = s.compute(snap, NOW)

    # deterministic
    assert s.compute(snap, NOW) == d

    # no pod bound twice; bound, unschedulable and waiting are disjoint
    spec_pods = [k for spec in d.start for k in spec.pods]
    assert len(spec_pods) == len(set(spec_pods))
    assert not set(d.bindings) & set(d.unschedulable)
    assert not set(d.bindings) & set(d.waiting)
    for spec in d.start:
        assert all(d.bindings[k] == spec.name for k in spec.pods)
    started = {spec.name for spec in d.start}
    assert {t for t in d.bindings.values() if t in started} <= {spec.name for spec in d.start if spec.pods}
    assert len(d.start) <= cap

    # only waiting pods are bound, only to live nodes that are not being stopped
    waiting = {p.key for p in snap.pods if not p.node_name and p.phase is PodPhase.PENDING}
    assert set(d.bindings) <= waiting
    live = {n.name for n in snap.nodes if n.state in LIVE_STATES} | started
    assert set(d.bindings.values()) <= live - {o.name for o in d.stop}

    # no node over-committed, and every binding passes every enabled filter
    infos = final_node_infos(the_pools, snap, d)
    fw = Framework()
    for name, info in infos.items():
        if any(k in d.bindings for k in info.pods):
            # room for every pod and for the DaemonSet pods that run there but are not running yet
            running = frozenset(p.daemon_set for p in info.pods.values() if p.daemon_set)
            daemons = daemon_overhead(snap.daemon_sets, info.labels, info.taints, running)
            assert (info.requested + daemons + Resources({"pods": len(info.pods)})).fits(info.allocatable), name
    cordon = Taint("node.kubernetes.io/unschedulable", TaintEffect.NO_SCHEDULE)
    for key, target in d.bindings.items():
        info = infos[target].clone()
        p = info.remove_pod(key)
        # checked here too, apart from the framework: taints and cordons are the cluster's word
        assert not untolerated(info.taints, p.tolerations, HARD_EFFECTS), (key, target)
        assert not info.unschedulable or any(t.tolerates(cordon) for t in p.tolerations), (key, target)
        assert not any(a.conflicts(b) for a in p.host_ports for other in info.pods.values() for b in other.host_ports), (key, target)
        state = CycleState()
        fw.run_pre_filter_plugins(state, p)
        status = fw.run_filter_plugins(state, p, info)
        assert status.is_success(), (key, target, status)

    # whichever offering a fleet launch takes, the node holds what it was planned for
    by_pool = {p.name: p for p in the_pools}
    for spec in d.start:
        if spec.alternatives:
            assert by_pool[spec.pool].launch.method is not LaunchMethod.RUN_INSTANCES
        for option in spec.alternatives:
            assert (option.instance_type, option.zone) != (spec.instance_type, spec.zone)
            assert CATALOG[option.instance_type].architectures == CATALOG[spec.instance_type].architectures
            taken = NodeInfo(
                spec.name, spec.pool, option.instance_type, spec.capacity_type, option.zone, option.allocatable,
                {**option.labels, "kubernetes.io/hostname": spec.name}, spec.taints, cell=by_pool[spec.pool].packing is Packing.CELL,
            )  # fmt: skip
            for placed in infos[spec.name].pods.values():
                taken.add_pod(placed)
            daemons = daemon_overhead(snap.daemon_sets, taken.labels, taken.taints, frozenset())
            assert (taken.requested + daemons + Resources({"pods": len(taken.pods)})).fits(taken.allocatable), (spec.name, option)
            for key in list(taken.pods):
                alone = taken.clone()
                p = alone.remove_pod(key)
                state = CycleState()
                fw.run_pre_filter_plugins(state, p)
                assert fw.run_filter_plugins(state, p, alone).is_success(), (key, option)
            if by_pool[spec.pool].limits != Limits():  # limits were counted with the planned machine
                planned, other = capacity_of(CATALOG[spec.instance_type]), capacity_of(CATALOG[option.instance_type])
                assert all(a <= b for a, b in zip(other, planned, strict=True)), (spec.name, option)

    # pool limits hold for what the decision starts (nodes it stops no longer count)
    stopping = {o.name for o in d.stop}
    for pool in the_pools:
        new = [spec for spec in d.start if spec.pool == pool.name]
        if not new:
            continue
        nodes = [n for n in snap.nodes if n.pool == pool.name and n.state in LIVE_STATES and n.name not in stopping] + new
        if pool.limits.nodes is not None:
            assert len(nodes) <= pool.limits.nodes
        if pool.limits.cpu is not None:
            assert sum(capacity_of(CATALOG[n.instance_type])[0] for n in nodes) <= pool.limits.cpu

    # no reservation past what it has left; a reserved node is of its reservation's type and zone, launched as planned
    for r in RESERVATIONS:
        into = [spec for spec in d.start if spec.labels.get(wk.RESERVATION_ID) == r.id]
        assert len(into) <= snap.reservations_left.get(r.id, r.available), (r.id, len(into))
        assert all((spec.capacity_type, spec.instance_type, spec.zone) == (RESERVED, r.instance_type, r.zone) for spec in into)
        assert all(not spec.alternatives for spec in into)
        assert all(any(t.id == r.id for t in by_pool[spec.pool].capacity_reservations) for spec in into)

    # gangs: whole or nothing
    placed = defaultdict(int)
    for p in snap.pods:
        if p.pod_group and (p.node_name or p.key in d.bindings):
            placed[p.pod_group] += 1
    for group, count in placed.items():
        newly = [k for k in d.bindings if k.startswith("default/") and next(p for p in snap.pods if p.key == k).pod_group == group]
        if newly:
            assert count >= 3


def apply(snap: ClusterSnapshot, d: Decision) -> ClusterSnapshot:
    """What the controller does with a decision, without anything else changing."""
    bound = defaultdict(list)
    for key, target in d.bindings.items():
        bound[target].append(key)
    stopped = {o.name for o in d.stop}
    nodes = []
    for old in snap.nodes:
        new = dataclasses.replace(old, bound_pods=tuple(sorted(bound.get(old.name, ()))))
        nodes.append(new.moved_to(NodeState.TERMINATING) if old.name in stopped else new)
    for spec in d.start:
        created = Node(spec.name, spec.pool, spec.instance_type, spec.capacity_type, spec.zone, spec.allocatable, labels=spec.labels, taints=spec.taints)
        nodes.append(dataclasses.replace(created, bound_pods=spec.pods))
    left = dict(snap.reservations_left)
    for spec in d.start:  # what the controller counts of a reservation until the cloud is read again
        if (r := spec.labels.get(wk.RESERVATION_ID)) is not None:
            left[r] = left.get(r, next(x.available for x in RESERVATIONS if x.id == r)) - 1
    return ClusterSnapshot(snap.pods, tuple(nodes), snap.unavailable, d.unneeded_since, daemon_sets=snap.daemon_sets, reservations_left=left)


@SETTINGS
@given(scenarios(), st.sampled_from([0.0, 60.0]))
def test_applying_a_decision_then_computing_again_changes_nothing(scenario, grace):
    the_pools, snap = scenario
    s = scaler(*the_pools, idle_grace=grace, max_boots=1000, catalog=CATALOG.with_reservations(RESERVATIONS))
    first = s.compute(snap, NOW)
    second = s.compute(apply(snap, first), NOW)
    # A gang left out waits: what its tries held (an idle node it kept counted against a
    # pool's limit, which this decision stops) is free for the next decision, which may
    # place it and boot for it alone.
    left_out = {k for k, why in first.waiting.items() if "pod group did not reach minMember" in why}
    placed = left_out & second.bindings.keys()  # (a standby node such a gang took is made up)
    assert all(set(spec.pods) <= left_out and (spec.pods or placed) for spec in second.start)
    assert second.stop == ()
    # A pod whose type would leave any new node short of its pool's Strict minValues waits;
    # once a node is launched its type is known, and the pod may join it.
    started = {spec.name for spec in first.start}
    joined = {k for k, why in first.waiting.items() if "minValues not met" in why and second.bindings.get(k) in started}
    assert {k: v for k, v in second.bindings.items() if k not in joined | left_out} == first.bindings
