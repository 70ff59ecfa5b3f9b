"""The cluster cache: every pod-state edge, every illegal one, and event handling."""

import dataclasses
import itertools

import pytest
from builders import pod
from hypothesis import given, settings
from hypothesis import strategies as st

from nodemanager.cache import POD_TRANSITIONS, ClusterEventsHandler, IllegalPodTransition, PodOp, PodState
from nodemanager.cluster.base import ClusterNode, EventType, Heartbeats, NodeEvent, PodEvent
from nodemanager.model import PodPhase, Resources

S, Op = PodState, PodOp
LEGAL = {
    (S.INITIAL, Op.ASSUME),
    (S.INITIAL, Op.ADD),
    (S.ASSUMED, Op.ADD),
    (S.ASSUMED, Op.FORGET),
    (S.ASSUMED, Op.EXPIRE),
    (S.ASSUMED, Op.REMOVE),
    (S.EXPIRED, Op.ADD),
    (S.EXPIRED, Op.ASSUME),
    (S.ADDED, Op.UPDATE),
    (S.ADDED, Op.REMOVE),
    (S.DELETED, Op.ADD),
    (S.DELETED, Op.ASSUME),
}
P = pod("p", cpu="1", memory="1Gi")
BOUND = pod("p", cpu="1", memory="1Gi", node="n1", phase=PodPhase.RUNNING)


def in_state(state: PodState) -> ClusterEventsHandler:
    cache = ClusterEventsHandler(assume_ttl=30)
    if state is S.ASSUMED:
        cache.assume(P, "n1")
    elif state is S.ADDED:
        cache.add(BOUND)
    elif state is S.EXPIRED:
        cache.assume(P, "n1")
        cache.finish_binding(P.key, 0)
        cache.expire(30)
    elif state is S.DELETED:
        cache.add(BOUND)
        cache.remove(P.key)
    return cache


def do(cache: ClusterEventsHandler, op: PodOp) -> None:
    """Apply ``op``; forget/expire go through the table directly, since their public forms
    deliberately do nothing to a pod that is not assumed."""
    {
        Op.ASSUME: lambda: cache.assume(P, "n1"),
        Op.ADD: lambda: cache.add(BOUND),
        Op.UPDATE: lambda: cache.update(BOUND),
        Op.FORGET: lambda: cache._move(P.key, Op.FORGET),  # the public forget() is a no-op when not assumed
        Op.EXPIRE: lambda: cache._move(P.key, Op.EXPIRE),
        Op.REMOVE: lambda: cache.remove(P.key),
    }[op]()


def test_table_is_the_expected_graph_with_reasons():
    assert set(POD_TRANSITIONS) == LEGAL
    assert all(reason for _, reason in POD_TRANSITIONS.values())


def do_public(cache: ClusterEventsHandler, op: PodOp) -> None:
    if op is Op.FORGET:
        cache.forget(P.key)
    elif op is Op.EXPIRE:
        cache.finish_binding(P.key, 1000)
        assert cache.expire(1030) == [P.key]
    else:
        do(cache, op)


@pytest.mark.parametrize(("state", "op"), sorted(LEGAL), ids=lambda x: x.value)
def test_legal_edges(state, op):
    cache = in_state(state)
    # Expired and Deleted pods are not stored: the cache shows them as Initial
    assert cache.state(P.key) is (state if state in (S.ASSUMED, S.ADDED) else S.INITIAL)
    do_public(cache, op)
    target = POD_TRANSITIONS[(state, op)][0]
    assert cache.state(P.key) is (target if target in (S.ASSUMED, S.ADDED) else S.INITIAL)
    on_node = target in (S.ASSUMED, S.ADDED)
    assert cache.usage("n1").pods == ({P.key} if on_node else set())


# Expired and Deleted are not stored: what is illegal from Initial is illegal from them.
STORED = [S.INITIAL, S.ASSUMED, S.ADDED]
ILLEGAL = [(s, op) for s, op in itertools.product(STORED, Op) if (s, op) not in LEGAL]


@pytest.mark.parametrize(("state", "op"), ILLEGAL, ids=lambda x: x.value)
def test_illegal_edges_raise_and_change_nothing(state, op):
    cache = in_state(state)
    before = (cache.state(P.key), cache.usage("n1"), cache.generation)
    with pytest.raises(IllegalPodTransition) as err:
        do(cache, op)
    assert (err.value.state, err.value.op) == (state, op)
    assert (cache.state(P.key), cache.usage("n1"), cache.generation) == before


def test_assume_counts_on_the_node_and_forget_puts_it_back_to_waiting():
    cache = ClusterEventsHandler()
    cache.apply([PodEvent(EventType.ADDED, P)])
    assert [p.key for p in cache.waiting()] == ["default/p"]
    cache.assume(P, "n1")
    assert cache.usage("n1").requested == Resources.parse({"cpu": "1", "memory": "1Gi"})
    assert cache.waiting() == []
    cache.forget(P.key)
    assert cache.state(P.key) is S.INITIAL
    assert cache.usage("n1").pods == set()
    assert [p.key for p in cache.waiting()] == ["default/p"]
    cache.forget(P.key)  # forgetting a pod that is not assumed is a no-op
    assert [p.key for p in cache.waiting()] == ["default/p"]


def test_assumed_pod_expires_only_after_binding_finished_and_ttl():
    cache = ClusterEventsHandler(assume_ttl=900)
    cache.assume(P, "n1")
    assert cache.expire(10_000) == []  # the bind is still in flight: never expires
    cache.finish_binding(P.key, 100)
    assert cache.expire(999) == []
    assert cache.expire(1000) == [P.key]
    assert cache.usage("n1").pods == set()
    assert [p.key for p in cache.waiting()] == [P.key]


def test_watch_confirms_assumption_on_another_node():
    cache = ClusterEventsHandler()
    cache.assume(P, "n1")
    cache.apply([PodEvent(EventType.MODIFIED, pod("p", cpu="1", memory="1Gi", node="n2", phase=PodPhase.RUNNING))])
    assert cache.state(P.key) is S.ADDED
    assert cache.usage("n1").pods == set()
    assert cache.usage("n2").pods == {P.key}


def test_a_bind_seen_where_it_was_assumed_changes_only_the_pods_copy():
    """The node's totals and the pods it is there for stay as they are (the same set, no
    journal entry); the snapshot holds the bound copy. Bound at another size, its totals
    follow."""
    cache = ClusterEventsHandler()
    cache.apply([PodEvent(EventType.ADDED, P)])
    cache.assume(P, "n1")
    assert [p.phase for p in cache.snapshot().grouped.on("n1")] == [P.phase]
    held, mark = cache.held("n1"), cache.held_changes.mark()
    running = pod("p", cpu="1", memory="1Gi", node="n1", phase=PodPhase.RUNNING)
    cache.apply([PodEvent(EventType.MODIFIED, running)])
    assert cache.state(P.key) is S.ADDED
    assert cache.usage("n1").requested == Resources.parse({"cpu": "1", "memory": "1Gi"})
    assert cache.held("n1") is held
    assert cache.held_changes.since(mark) == set()
    assert [p is running for p in cache.snapshot().grouped.on("n1")] == [True]

    resized = ClusterEventsHandler()
    resized.assume(P, "n1")
    resized.apply([PodEvent(EventType.MODIFIED, pod("p", cpu="2", memory="1Gi", node="n1", phase=PodPhase.RUNNING))])
    assert resized.usage("n1").requested == Resources.parse({"cpu": "2", "memory": "1Gi"})


def test_a_running_pods_new_status_changes_only_its_copy():
    """An added pod seen again (its status changed, same node and requests): the same totals
    and set of pods the node is there for, no journal entry; the snapshot holds the new copy.
    Moved to another node, both nodes follow."""
    cache = ClusterEventsHandler()
    cache.apply([PodEvent(EventType.ADDED, BOUND)])
    assert cache.snapshot().grouped.on("n1") == (BOUND,)
    held, mark = cache.held("n1"), cache.held_changes.mark()
    relabelled = dataclasses.replace(BOUND, labels={"ready": "yes"})
    cache.apply([PodEvent(EventType.MODIFIED, relabelled)])
    assert cache.usage("n1").requested == Resources.parse({"cpu": "1", "memory": "1Gi"})
    assert cache.held("n1") is held
    assert cache.held_changes.since(mark) == set()
    assert [p is relabelled for p in cache.snapshot().grouped.on("n1")] == [True]
    cache.apply([PodEvent(EventType.MODIFIED, dataclasses.replace(relabelled, node_name="n2"))])
    assert (cache.usage("n1").pods, cache.usage("n2").pods) == (set(), {P.key})
    assert cache.held_changes.since(mark) == {"n1", "n2"}


def test_unbound_update_of_an_assumed_pod_is_ignored():
    cache = ClusterEventsHandler()
    cache.assume(P, "n1")
    cache.apply([PodEvent(EventType.MODIFIED, P)])
    assert cache.state(P.key) is S.ASSUMED
    assert cache.usage("n1").pods == {P.key}


def test_bound_pod_seen_without_assume_goes_straight_to_added():
    cache = ClusterEventsHandler()
    cache.apply([PodEvent(EventType.ADDED, BOUND)])
    assert cache.state(P.key) is S.ADDED
    assert cache.snapshot().pods == (BOUND,)


def test_finished_and_deleted_pods_leave_their_node_and_are_reported():
    cache = ClusterEventsHandler()
    cache.apply([PodEvent(EventType.ADDED, BOUND)])
    done = pod("p", cpu="1", memory="1Gi", node="n1", phase=PodPhase.SUCCEEDED)
    cache.apply([PodEvent(EventType.MODIFIED, done), PodEvent(EventType.DELETED, done)])
    assert cache.state(P.key) is S.INITIAL
    assert cache.usage("n1").pods == set()
    assert [p.key for p in cache.take_finished()] == [P.key]
    assert cache.take_finished() == []


def test_pod_that_loses_its_node_waits_again():
    cache = ClusterEventsHandler()
    cache.apply([PodEvent(EventType.ADDED, BOUND), PodEvent(EventType.MODIFIED, P)])
    assert cache.state(P.key) is S.INITIAL
    assert [p.key for p in cache.waiting()] == [P.key]
    assert [p.node_name for p in cache.take_finished()] == ["n1"]


def test_whether_a_pod_uses_a_claim_follows_every_pod_change() -> None:
    cache = ClusterEventsHandler()
    claiming = dataclasses.replace(pod("gpu", cpu="1"), claims=("default/gpu-claim",))
    cache.apply([PodEvent(EventType.ADDED, P)])
    assert (cache.has_claims(), cache.snapshot().claims) == (False, False)
    cache.apply([PodEvent(EventType.ADDED, claiming)])  # waiting
    assert (cache.has_claims(), cache.snapshot().claims) == (True, True)
    cache.assume(claiming, "n1")  # placed
    assert (cache.has_claims(), cache.snapshot().claims) == (True, True)
    cache.forget(claiming.key)
    cache.apply([PodEvent(EventType.DELETED, claiming)])
    assert (cache.has_claims(), cache.snapshot().claims) == (False, False)


def test_the_pods_a_node_holds_follow_every_placement_and_leave_daemon_pods_out() -> None:
    """... and a node's set stays the same object until its pods change; the journal names
    the nodes whose pods changed."""
    cache = ClusterEventsHandler()
    q = pod("q", cpu="1")
    daemon = dataclasses.replace(pod("ds-n1", node="n1", phase=PodPhase.RUNNING), daemon_set="kube-system/ds")
    cache.apply([PodEvent(EventType.ADDED, P), PodEvent(EventType.ADDED, q), PodEvent(EventType.ADDED, daemon)])
    assert cache.held("n1") == frozenset()  # a DaemonSet pod is its node's, not a pod the node is for
    mark = cache.held_changes.mark()
    cache.assume(P, "n1")
    cache.assume(q, "n2")
    assert (cache.held("n1"), cache.held("n2")) == (frozenset({P.key}), frozenset({q.key}))
    assert cache.held_changes.since(mark) == {"n1", "n2"}
    mark = cache.held_changes.mark()
    cache.apply([PodEvent(EventType.MODIFIED, pod("p", cpu="1", memory="1Gi", node="n2", phase=PodPhase.RUNNING))])  # bound elsewhere
    assert (cache.held("n1"), cache.held("n2")) == (frozenset(), frozenset({P.key, q.key}))
    assert cache.held_changes.since(mark) == {"n1", "n2"}
    cache.forget(q.key)
    third = cache.held("n2")
    assert third == frozenset({P.key})
    mark = cache.held_changes.mark()
    cache.apply([PodEvent(EventType.ADDED, pod("r", node="n3", phase=PodPhase.RUNNING))])
    assert cache.held("n2") is third  # a node whose pods did not change keeps the same set (disruption's pass compares by identity first)
    assert cache.held("n3") == frozenset({"default/r"})
    assert cache.held_changes.since(mark) == {"n3"}


def test_nodes_and_snapshot_are_immutable_views():
    cache = ClusterEventsHandler()
    node = ClusterNode("n1", "i-1", ready=True, last_heartbeat=5)
    cache.apply([NodeEvent(EventType.ADDED, node), PodEvent(EventType.ADDED, P)])
    snap = cache.snapshot()
    cache.apply([NodeEvent(EventType.DELETED, node), PodEvent(EventType.DELETED, P)])
    assert snap.nodes["n1"] == node
    assert snap.pods == (P,)
    assert cache.node("n1") is None
    assert cache.snapshot().generation > snap.generation
    with pytest.raises(TypeError):
        snap.nodes["n2"] = node  # type: ignore[index]


def test_a_snapshot_shows_the_objects_and_nodes_as_they_are_made_again_only_when_they_change():
    """Snapshots share what they show of the objects and the Nodes until one changes: then
    the next shows the change (a heartbeat-only node event too), and the earlier keeps its own."""
    from nodemanager.cluster.base import ObjectEvent
    from nodemanager.model.pod_owners import Namespace

    cache = ClusterEventsHandler()
    node = ClusterNode("n1", "i-1", ready=True, last_heartbeat=5)
    cache.apply([NodeEvent(EventType.ADDED, node), ObjectEvent(EventType.ADDED, "shop", Namespace("shop", {"team": "a"}))])
    first = cache.snapshot()
    cache.apply([PodEvent(EventType.ADDED, P)])  # a pod: the same objects and nodes shown
    second = cache.snapshot()
    assert (second.namespaces, second.nodes) == ({"shop": {"team": "a"}}, {"n1": node})
    assert second.namespaces is first.namespaces
    assert second.nodes is first.nodes
    cache.apply([ObjectEvent(EventType.MODIFIED, "shop", Namespace("shop", {"team": "b"}))])
    assert cache.snapshot().namespaces == {"shop": {"team": "b"}}
    assert first.namespaces == {"shop": {"team": "a"}}
    beat = dataclasses.replace(node, last_heartbeat=9)
    cache.apply([NodeEvent(EventType.MODIFIED, beat)])
    assert cache.snapshot().nodes["n1"] is beat
    assert first.nodes["n1"] is node
    with pytest.raises(TypeError):
        first.namespaces["other"] = {}  # type: ignore[index]


_NODE_STEPS = st.lists(
    st.tuples(st.sampled_from(["add", "modify", "delete", "beat"]), st.sampled_from(["n1", "n2", "n3"]), st.integers(0, 50)),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(_NODE_STEPS)
def test_a_nodes_heartbeat_is_the_latest_its_node_events_and_heartbeats_said_since_it_registered(steps: list[tuple[str, str, int]]) -> None:
    """Against a replay: a node's heartbeat is the latest of what its own events (the
    Kubernetes source's Lease and Ready condition) and the Heartbeats naming it said since
    it last registered; none for a node the cache does not know; never moved back."""
    cache = ClusterEventsHandler()
    said: dict[str, list[float]] = {}  # what was said of each registered node since it registered
    for what, name, at in steps:
        node = ClusterNode(name, ready=True, last_heartbeat=float(at), labels={"step": what})
        if what == "add" or (what == "modify" and name in said):
            cache.apply([NodeEvent(EventType.ADDED if name not in said else EventType.MODIFIED, node)])
            said.setdefault(name, []).append(float(at))
        elif what == "delete" and name in said:
            cache.apply([NodeEvent(EventType.DELETED, node)])
            del said[name]
        elif what == "beat":
            cache.apply([Heartbeats(float(at), (name,))])
            if name in said:
                said[name].append(float(at))
        assert dict(cache.heartbeats) == {n: max(times) for n, times in said.items()}
        assert set(cache.heartbeats) == {n for n in ("n1", "n2", "n3") if cache.node(n) is not None}


def test_a_heartbeat_is_the_same_node_and_only_a_heartbeat_is_ignored() -> None:
    node = ClusterNode("n1", "i-1", True, 5.0, labels={"a": "b"}, allocatable=Resources({"cpu": 1000}))
    beat = node.with_heartbeat(15.0)
    assert beat == dataclasses.replace(node, last_heartbeat=15.0)
    assert node.last_heartbeat == 5.0  # a copy: the node itself is unchanged
    assert node.same_but_heartbeat(beat)
    assert node.same_but_heartbeat(dataclasses.replace(beat, labels={"a": "b"}, allocatable=Resources({"cpu": 1000})))  # equal, not the same objects
    for changed in (dataclasses.replace(beat, labels={"a": "c"}), dataclasses.replace(beat, ready=False), dataclasses.replace(beat, unschedulable=True)):
        assert not node.same_but_heartbeat(changed)


def test_heartbeats_move_known_nodes_on_and_nothing_else() -> None:
    cache = ClusterEventsHandler()
    node = ClusterNode("n1", "i-1", ready=True, last_heartbeat=5.0, labels={"a": "b"})
    cache.apply([NodeEvent(EventType.ADDED, node)])
    generation = cache.snapshot().generation
    cache.apply([Heartbeats(15.0, ("n1", "gone"))])
    assert cache.heartbeats["n1"] == 15.0
    assert cache.node("n1") is node  # no node is made for a heartbeat
    assert "gone" not in cache.heartbeats  # a beat of a node the cache does not know makes none
    assert cache.node("gone") is None
    cache.apply([Heartbeats(10.0, ("n1",))])  # late: never backwards
    assert cache.heartbeats["n1"] == 15.0
    cache.apply([NodeEvent(EventType.MODIFIED, node.with_heartbeat(25.0))])  # the node's own word (the Kubernetes source's Lease) counts too
    assert cache.heartbeats["n1"] == 25.0
    assert cache.snapshot().generation == generation  # nothing the scaler looks at changed
    cache.apply([NodeEvent(EventType.DELETED, node)])
    cache.apply([NodeEvent(EventType.ADDED, node)])  # registered again: its old beats are forgotten
    assert cache.heartbeats["n1"] == 5.0
