"""Pods grouped by node: the cache keeps them so as pods change, and must give exactly what
grouping its pods from scratch gives; a node's tuple stays the same object while its pods do;
a snapshot never trusts a grouping of other pods; each grouping says truly which nodes'
pods changed since the one before."""

import dataclasses

from builders import pod, since_holds
from hypothesis import given, settings
from hypothesis import strategies as st

from nodemanager.cache import ClusterEventsHandler
from nodemanager.cluster.base import EventType, PodEvent
from nodemanager.model import PodPhase
from nodemanager.model.by_node import PodsByNode
from nodemanager.scaler.snapshot import ClusterSnapshot

NAMES = [f"p{i}" for i in range(6)]
NODES = ["n1", "n2", "n3"]
# (what happens, pod, node): an unbound pod arrives, a pod is bound, our bind is assumed, a pod goes
STEPS = st.lists(st.tuples(st.sampled_from(["wait", "bound", "assume", "delete", "forget"]), st.sampled_from(NAMES), st.sampled_from(NODES)), max_size=40)


def _apply(cache: ClusterEventsHandler, step: tuple[str, str, str]) -> None:
    what, name, node = step
    waiting = pod(name, cpu="100m")
    if what == "wait":
        if cache.pod(waiting.key) is None:
            cache.apply([PodEvent(EventType.ADDED, waiting)])
    elif what == "bound":
        cache.apply([PodEvent(EventType.MODIFIED, pod(name, cpu="100m", node=node, phase=PodPhase.RUNNING))])
    elif what == "assume":
        if cache.pod(waiting.key) is not None and not cache.pod(waiting.key).node_name:
            cache.assume(cache.pod(waiting.key), node)
    elif what == "forget":
        cache.forget(waiting.key)
    else:
        cache.apply([PodEvent(EventType.DELETED, waiting)])


def _same(a: PodsByNode, b: PodsByNode) -> bool:
    return a.waiting == b.waiting and dict(a.placed) == dict(b.placed)


@settings(max_examples=200, deadline=None)
@given(STEPS, st.lists(st.booleans(), min_size=40, max_size=40))
def test_the_caches_grouping_is_its_pods_grouped_afresh(steps: list[tuple[str, str, str]], looks: list[bool]) -> None:
    """Whether a snapshot is taken after every change or after several, and later changes
    leave an earlier snapshot's grouping as it was."""
    cache = ClusterEventsHandler()
    taken = []
    for step, look in zip(steps, looks, strict=False):
        _apply(cache, step)
        if look:
            snapshot = cache.snapshot()
            assert snapshot.grouped is not None
            assert snapshot.grouped.pods is snapshot.pods
            assert _same(snapshot.grouped, PodsByNode.of(snapshot.pods))
            if taken and taken[-1].grouped is not snapshot.grouped:  # what changed since the last grouping is said truly
                since = snapshot.grouped.since
                assert since is not None
                assert since.links(taken[-1].grouped.placed, snapshot.grouped.placed)
                assert since_holds(since, taken[-1].grouped.placed, snapshot.grouped.placed)
            taken.append(snapshot)
    for snapshot in taken:
        assert _same(snapshot.grouped, PodsByNode.of(snapshot.pods))


def test_a_nodes_pods_are_the_same_tuple_until_they_change() -> None:
    cache = ClusterEventsHandler()
    cache.add(pod("a", node="n1", phase=PodPhase.RUNNING))
    cache.add(pod("b", node="n2", phase=PodPhase.RUNNING))
    before = cache.snapshot().grouped
    cache.add(pod("c", node="n2", phase=PodPhase.RUNNING))
    after = cache.snapshot().grouped
    assert after.placed["n1"] is before.placed["n1"]  # untouched: the same object (a picture of it is reused by identity)
    assert [p.name for p in after.placed["n2"]] == ["b", "c"]
    cache.remove(pod("a").key)
    assert "n1" not in cache.snapshot().grouped.placed


def test_a_snapshot_with_other_pods_groups_them_itself() -> None:
    placed = pod("a", node="n1", phase=PodPhase.RUNNING)
    pods = (placed,)
    snapshot = ClusterSnapshot(pods, (), grouped=PodsByNode.of(pods))
    assert snapshot.by_node is snapshot.grouped
    moved = dataclasses.replace(snapshot, pods=(dataclasses.replace(placed, node_name="n2"),))  # grouped is carried over, stale
    assert set(moved.by_node.placed) == {"n2"}


def test_finished_pods_are_neither_waiting_nor_placed() -> None:
    grouped = PodsByNode.of((pod("done", node="n1", phase=PodPhase.SUCCEEDED), pod("w"), pod("x", node="n1", phase=PodPhase.RUNNING)))
    assert [p.name for p in grouped.waiting] == ["w"]
    assert [p.name for p in grouped.on("n1")] == ["x"]


def test_a_nodes_held_pods_are_those_it_is_there_for() -> None:
    """Not its DaemonSet and mirror pods; a node with none of those gives its own tuple."""
    mine = (pod("a", node="n1", phase=PodPhase.RUNNING), pod("b", node="n1", phase=PodPhase.RUNNING))
    daemon = dataclasses.replace(pod("d", node="n2", phase=PodPhase.RUNNING), daemon_set="kube-system/agent")
    grouped = PodsByNode.of((*mine, daemon, pod("c", node="n2", phase=PodPhase.RUNNING)))
    assert grouped.held("n1") is grouped.on("n1")
    assert [p.name for p in grouped.held("n2")] == ["c"]
    assert grouped.held("n3") == ()
