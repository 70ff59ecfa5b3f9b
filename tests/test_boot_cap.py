"""The boot cap's deferred nodes (scaler/deferred.py) and the existing-node room index
(scaler/room.py): later computations take what a capped plan left for them instead of
planning everything again, and every decision stays valid."""

from __future__ import annotations

import dataclasses
import random

import pytest
from builders import ZONES, binpack_pool, cell_pool, node, pod, scaler
from hypothesis import given
from hypothesis import strategies as st
from test_scaler_properties import NOW, SETTINGS, apply, final_node_infos, scenarios

from nodemanager.model import NodeState, PodPhase, Resources
from nodemanager.model.daemonset import daemon_overhead
from nodemanager.scaler import ClusterSnapshot, binpack
from nodemanager.scaler.room import RoomIndex
from nodemanager.scheduling import NodeInfo
from nodemanager.scheduling.plugins import CellIsolation
from nodemanager.scheduling.sampling import feasible_nodes_to_find


def _distinct(n: int, seed: int = 3) -> tuple:
    rng = random.Random(seed)
    return tuple(pod(f"p{i:03d}", cpu=f"{rng.randint(100, 1500)}m", memory=f"{rng.randint(64, 2048)}Mi") for i in range(n))


@pytest.fixture
def calls(monkeypatch) -> list[int]:
    """One entry per call of the packer."""
    made: list[int] = []
    original = binpack.pack
    monkeypatch.setattr(binpack, "pack", lambda *a, **kw: made.append(1) or original(*a, **kw))
    return made


def test_later_computations_start_what_the_capped_plan_left_without_packing_again(calls: list[int]) -> None:
    s = scaler(binpack_pool(), max_boots=2)
    snap = ClusterSnapshot(_distinct(60), ())
    first = s.compute(snap, NOW)
    assert len(first.start) == 2
    assert s.memory.deferred is not None
    planned = sorted((n.candidate.itype.name, len(n.pods)) for n in s.memory.deferred.nodes)
    assert any("boot slot" in why for why in first.waiting.values())
    packed = len(calls)
    snap, started = apply(snap, first), []
    while True:
        d = s.compute(snap, NOW)
        if not d.start:
            break
        started += [(spec.instance_type, len(spec.pods)) for spec in d.start]
        snap = apply(snap, d)
    assert len(calls) == packed  # nothing was packed again
    assert sorted(started) == planned  # the deferred nodes, as planned
    assert not any(p.key not in d.bindings and not p.node_name for p in snap.pods)  # every pod has its node


def test_a_later_computation_makes_again_only_the_nodes_it_may_boot(monkeypatch) -> None:
    """A snapshot needing 5,000 nodes with ``maxBootsPerLoop: 10``: every loop made all the
    deferred nodes again and placed their pods, to start ten of them."""
    from nodemanager.scaler.run import Run

    s = scaler(binpack_pool(), max_boots=2)
    snap = ClusterSnapshot(_distinct(200), ())
    first = s.compute(snap, NOW)
    assert s.memory.deferred is not None
    deferred = len(s.memory.deferred.nodes)
    assert deferred > 4
    made: list[int] = []
    original = Run.new_node
    monkeypatch.setattr(Run, "new_node", lambda self, *a, **kw: made.append(1) or original(self, *a, **kw))
    snap = apply(snap, first)
    second = s.compute(snap, NOW)
    assert len(second.start) == 2
    assert len(made) == 2
    assert s.memory.deferred is not None
    assert len(s.memory.deferred.nodes) == deferred - 2
    waiting = [p.key for p in snap.pods if not p.node_name and p.key not in second.bindings]
    assert waiting
    assert all("boot slot" in second.waiting[k] for k in waiting)


def test_a_change_since_the_capped_plan_means_planning_again(calls: list[int]) -> None:
    s = scaler(binpack_pool(), max_boots=2)
    snap = ClusterSnapshot(_distinct(60), ())
    first = s.compute(snap, NOW)
    packed = len(calls)
    later = apply(snap, first)
    arrived = ClusterSnapshot((*later.pods, pod("new", cpu="700m")), later.nodes, later.unavailable, later.unneeded_since)
    s.compute(arrived, NOW)
    assert len(calls) > packed  # a pod the plan did not know: planned again


@SETTINGS
@given(scenarios())
def test_decisions_taken_from_deferred_nodes_stay_valid(scenario) -> None:
    """With a cap of 2, each decision of a chain (applied one after another) binds only pods
    that fit their node; the chain ends with the pods a fresh scaler would also place."""
    the_pools, snap = scenario
    s = scaler(*the_pools, max_boots=2)
    for _ in range(40):
        d = s.compute(snap, NOW)
        infos = final_node_infos(the_pools, snap, d)
        for name, info in infos.items():
            if any(k in d.bindings for k in info.pods):
                running = frozenset(p.daemon_set for p in info.pods.values() if p.daemon_set)
                daemons = daemon_overhead(snap.daemon_sets, info.labels, info.taints, running)
                assert (info.requested + daemons + Resources({"pods": len(info.pods)})).fits(info.allocatable), name
        if not d.start:
            break
        snap = apply(snap, d)
    assert not d.start
    fresh = scaler(*the_pools, max_boots=2).compute(snap, NOW)
    assert set(fresh.bindings) == set(d.bindings)
    assert not fresh.start


@given(st.lists(st.tuples(st.integers(0, 8000), st.integers(0, 8000)), min_size=1, max_size=30), st.integers(0, 9000))
def test_the_room_index_offers_every_node_with_the_cpu_free(nodes: list[tuple[int, int]], cpu: int) -> None:
    """... most free CPU first, nodes with as much in the order given (the search for a pod
    class walks them in that order)."""
    infos = []
    for i, (alloc, used) in enumerate(nodes):
        info = NodeInfo(f"n{i}", "p", "m.large", None, "z", Resources({"cpu": alloc, "memory": 1 << 30, "pods": 110}), {})  # type: ignore[arg-type]
        info.add_pod(pod(f"used{i}", cpu=f"{min(used, alloc)}m", memory="1Mi"))
        infos.append(info)
    wanted = pod("w", cpu=f"{cpu}m", memory="1Mi")
    offered = RoomIndex(infos).with_room_for(wanted)
    assert {i.name for i in offered} == {i.name for i in infos if i.allocatable.cpu - i.requested.cpu >= wanted.requests.cpu or cpu == 0}
    if cpu > 0:
        by_room = sorted(range(len(infos)), key=lambda k: -(infos[k].allocatable.cpu - infos[k].requested.cpu))
        assert [i.name for i in offered] == [infos[k].name for k in by_room][: len(offered)]


def test_a_cell_node_holding_its_pod_is_not_searched_for_a_waiting_pod(monkeypatch) -> None:
    """A taken cell node takes no other pod: a fill offers only the free one to the filters
    (each decision of a cell-pool day filtered every taken node for every pod class)."""
    taken = [node(f"c{i:03d}") for i in range(300)]
    running = tuple(pod(f"run{i}", "500m", node=n.name, phase=PodPhase.RUNNING) for i, n in enumerate(taken))
    looked: list[str] = []
    filter_nodes = CellIsolation.filter_nodes

    def seen(self: CellIsolation, state: object, p: object, nodes: list) -> list:
        looked.extend(n.name for n in nodes)
        return filter_nodes(self, state, p, nodes)

    monkeypatch.setattr(CellIsolation, "filter_nodes", seen)
    d = scaler(cell_pool()).compute(ClusterSnapshot((*running, pod("w", "500m")), (*taken, node("free"))), NOW)
    assert dict(d.bindings) == {"default/w": "free"}
    assert d.start == ()
    assert set(looked) == {"free"}


@pytest.mark.parametrize(("nodes", "want"), [(10, 10), (99, 99), (100, 100), (1000, 420), (6000, 300)])
def test_feasible_nodes_to_find_as_kube_scheduler(nodes: int, want: int) -> None:
    """kube-scheduler's TestNumFeasibleNodesToFind, with percentageOfNodesToScore unset."""
    assert feasible_nodes_to_find(nodes) == want


def test_a_large_cluster_is_searched_in_samples_yet_every_ready_node_with_room_is_used() -> None:
    """250 Ready nodes with room for one more pod each: a search stops at 120 feasible nodes,
    as kube-scheduler's does, and goes on from there while pods are left, so no node boots
    while an existing one has room; nodes still booting take nothing while Ready ones can."""
    ready = [node(f"r{i:03d}", pool="general", zone=ZONES[i % len(ZONES)]) for i in range(250)]
    booting = [node(f"b{i}", pool="general", state=NodeState.CREATED) for i in range(5)]
    # a.large: 2 CPU; 1.5 CPU running on each Ready node leaves room for one 400m pod
    running = tuple(pod(f"run-{n.name}", cpu="1500m", node=n.name, phase=PodPhase.RUNNING) for n in ready)
    waiting = tuple(pod(f"w{i:03d}", cpu="400m") for i in range(250))
    s = scaler(binpack_pool())
    d = s.compute(ClusterSnapshot(running + waiting, tuple(ready + booting)), NOW)
    assert d.start == ()
    assert sorted(d.bindings.values()) == sorted(n.name for n in ready)  # one each, every Ready node


@pytest.mark.parametrize("tolerates", [True, False])
def test_an_unconstrained_pod_is_probed_on_one_offering_with_the_same_answer_as_on_all(monkeypatch, tolerates: bool) -> None:
    """A pod that tells no offering apart (no selector, affinity, pins, volumes, claims or
    ports) gets from one offering the answer every offering of its pool would give."""
    from nodemanager.config.schema import Taint as PoolTaint
    from nodemanager.model import Toleration
    from nodemanager.scaler import new_nodes

    pool = binpack_pool(instance_types=["*"], taints=[PoolTaint(key="team", value="a", effect="NoSchedule")], labels={"team": "a"})
    incoming = pod("plain", cpu="300m")
    if tolerates:
        incoming = dataclasses.replace(incoming, tolerations=(Toleration(key="team", operator="Equal", value="a", effect="NoSchedule"),))

    def answer() -> tuple:
        s = scaler(pool)
        s.compute(ClusterSnapshot((incoming,), ()), NOW)
        [(accepted, why, transient)] = s.memory.probe_memo.values()
        return tuple(c.offering for c in accepted), why, transient

    fast = answer()
    monkeypatch.setattr(new_nodes, "offering_blind", lambda pod: False)
    slow = answer()
    assert fast[0] == slow[0]
    assert bool(fast[0]) is tolerates
    assert (fast[1] == slow[1]) or tolerates  # refused: the same reason


def test_deferred_nodes_never_take_a_pool_past_its_limit() -> None:
    """A node booted outside the plan meanwhile (an interruption's replacement) uses the
    pool's limit: the deferred nodes that no longer fit it are planned again, not started."""
    from nodemanager.config.schema import Limits

    s = scaler(binpack_pool(limits=Limits(nodes=4)), max_boots=1)
    snap = ClusterSnapshot(_distinct(60), ())
    first = s.compute(snap, NOW)
    assert len(first.start) == 1
    assert s.memory.deferred is not None
    later = apply(snap, first)
    replacement = node("replacement", "m.xlarge", pool="general")
    later = ClusterSnapshot(later.pods, (*later.nodes, replacement), later.unavailable, later.unneeded_since)
    for _ in range(6):
        d = s.compute(later, NOW)
        later = apply(later, d)
    live = [n for n in later.nodes if n.pool == "general"]
    assert len(live) <= 4


def test_classes_no_filled_node_has_room_for_skip_the_search_and_decide_the_same(monkeypatch) -> None:
    """A burst onto Ready nodes that fill up: once a search finds none passing and no node
    has a class's CPU, memory or a pod slot left, that class skips the search (on a busy
    cluster most classes came after the nodes filled), yet every pod goes where it went when
    every class searched, and later searches start where they did."""
    from nodemanager.scaler import existing
    from nodemanager.scheduling.framework import Framework

    ready = [node(f"r{i:03d}", pool="general", zone=ZONES[i % len(ZONES)]) for i in range(150)]
    running = tuple(pod(f"run-{n.name}", cpu="1200m", node=n.name, phase=PodPhase.RUNNING) for n in ready)
    rng = random.Random(7)
    waiting = tuple(pod(f"w{i:03d}", cpu=f"{rng.randrange(300, 900, 10)}m", memory=f"{rng.choice([64, 128, 512])}Mi") for i in range(400))
    snap = ClusterSnapshot(running + waiting, tuple(ready))
    searched: list[int] = []
    feasible = Framework.feasible
    monkeypatch.setattr(Framework, "feasible", lambda self, *a: searched.append(1) or feasible(self, *a))
    starts: list[dict] = []
    fill = existing._fill
    monkeypatch.setattr(existing, "_fill", lambda run, *a, **kw: (fill(run, *a, **kw), starts.append(dict(run.next_start)))[0])

    skipping = scaler(binpack_pool()).compute(snap, NOW)
    skipped_searches, skipped_starts = len(searched), list(starts)
    searched.clear()
    starts.clear()
    monkeypatch.setattr(RoomIndex, "may_take", lambda self, p: True)
    every = scaler(binpack_pool()).compute(snap, NOW)

    assert dict(skipping.bindings) == dict(every.bindings)
    assert [(s.instance_type, s.pods) for s in skipping.start] == [(s.instance_type, s.pods) for s in every.start]
    assert skipped_starts == starts
    assert sum(1 for n in every.bindings.values() if n.startswith("r")) > 100  # the Ready nodes took pods until full
    assert skipped_searches < len(searched) * 2 / 3


@pytest.mark.parametrize("zone", ["zone-1a", "zone-1b", "nowhere"])
def test_a_pod_pinned_to_a_zone_is_probed_from_the_unpinned_answer_with_the_same_answer_as_on_all(monkeypatch, zone: str) -> None:
    """A zone plan pins pods by a node selector on the zone alone: their offerings are the
    unpinned pod's in that zone, the same as filtering every offering gives (and a zone no
    offering is in says why, as the filters do)."""
    from nodemanager.model.labels import ZONE
    from nodemanager.scaler import new_nodes

    pool = binpack_pool(instance_types=["*"])
    pinned = dataclasses.replace(pod("pinned", cpu="300m"), node_selector={ZONE: zone})

    def answer() -> tuple:
        s = scaler(pool)
        s.compute(ClusterSnapshot((pinned,), ()), NOW)
        found = [v for k, v in s.memory.probe_memo.items() if dict(k[1][4]) == {ZONE: zone}]
        (accepted, why, transient) = found[0]
        return tuple(c.offering for c in accepted), why, transient

    fast = answer()
    monkeypatch.setattr(new_nodes, "offering_blind", lambda pod: False)
    slow = answer()
    assert (fast[0], fast[2]) == (slow[0], slow[2])
    assert fast[1] == (slow[1] if not slow[0] else "")  # (why none: asked only when none)
    assert bool(fast[0]) is (zone != "nowhere")
    assert {o.zone for o in fast[0]} <= {zone}


def test_classes_alike_but_for_their_labels_share_one_search_of_the_running_nodes(monkeypatch) -> None:
    """Pods of seven label values and one request, nothing reading their labels: one search
    of the running nodes for all of them, not one per label value; the same pods placed."""
    from nodemanager.scaler import alike
    from nodemanager.scheduling.framework import Framework

    ready = [node(f"r{i:03d}", pool="general", zone=ZONES[i % len(ZONES)]) for i in range(120)]
    running = tuple(pod(f"run-{n.name}", cpu="1200m", node=n.name, phase=PodPhase.RUNNING) for n in ready)
    waiting = tuple(dataclasses.replace(pod(f"w{i:03d}", cpu="300m"), labels={"my-label": "abcdefg"[i % 7]}) for i in range(140))
    snap = ClusterSnapshot(running + waiting, tuple(ready))
    searched: list[int] = []
    feasible = Framework.feasible
    monkeypatch.setattr(Framework, "feasible", lambda self, *a: searched.append(1) or feasible(self, *a))
    together = scaler(binpack_pool()).compute(snap, NOW)
    together_searches = len(searched)
    searched.clear()
    monkeypatch.setattr(alike, "merged_classes", lambda run, classes, respect: classes)
    apart = scaler(binpack_pool()).compute(snap, NOW)
    assert set(together.bindings) == set(apart.bindings) == {p.key for p in waiting}
    assert together.start == apart.start == ()
    assert together_searches * 3 < len(searched)
