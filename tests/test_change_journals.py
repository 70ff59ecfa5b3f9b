"""Readers that catch up through change journals: the nodes the scaler plans with are made
again only for the records, cluster Nodes and marks that changed, and disruption tracks since
when each node held its pods only for the records and nodes whose pods changed. Whatever the
sequence of changes, and however often the journals start again, they are what a pass over
every record gives."""

import dataclasses
import math
from collections import Counter

from builders import CATALOG, TYPES, binpack_pool, node, pod, since_holds
from harness import Harness
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nodemanager.cluster.base import ClusterNode, EventType, Heartbeats, NodeEvent, PodEvent
from nodemanager.controller.fleet_tally import FleetTally
from nodemanager.controller.node_controller import NodeController
from nodemanager.controller.records import NodeRecords
from nodemanager.controller.tenure import Held
from nodemanager.model import LIVE_STATES, NodeState, PodPhase, Taint, TaintEffect
from nodemanager.model.journal import Journal, changed_since

NAMES = ["n1", "n2", "n3", "n4"]
TAINTS = [(), (Taint("dedicated", TaintEffect.NO_SCHEDULE, "x"),), (Taint("node.kubernetes.io/not-ready", TaintEffect.NO_SCHEDULE),)]
STEP = st.tuples(
    st.sampled_from(["record", "forget", "register", "deregister", "beat", "mark", "unmark", "plan"]),
    st.sampled_from(NAMES[:3]),
    st.sampled_from([NodeState.AVAILABLE, NodeState.CLAIMED, NodeState.CREATING]),
    st.sampled_from(range(len(TAINTS))),
    st.booleans(),
)


def _fresh(controller: NodeController) -> tuple:
    state = controller.state
    return tuple(dataclasses.replace(n, state=NodeState.TERMINATING) if n.name in state.marked else state._planning_view(n) for n in state.nodes.values())


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=40), st.sampled_from([2, 5, 4096]))
@example(  # the records' journal starts again once every record is gone: nothing left to plan with
    [
        (what, name, NodeState.AVAILABLE, 0, False)
        for what, name in [("record", "n1"), ("plan", "n1"), ("forget", "n1"), ("record", "n2"), ("forget", "n2"), ("plan", "n1")]
    ],
    2,
)
def test_the_planning_nodes_are_the_records_viewed_afresh(steps: list, limit: int) -> None:
    h = Harness(binpack_pool("general"))
    c = h.controller
    c.state.nodes.changes.limit = c.state.cache.node_changes.limit = limit  # small: the journals start again often
    beat = 0.0
    for what, name, state, taints, cordoned in steps:
        if what == "record":
            c.state.nodes[name] = dataclasses.replace(node(name, pool="general", state=state), taints=TAINTS[taints][:1])
        elif what == "forget" and name in c.state.nodes:
            del c.state.nodes[name]
        elif what == "register":
            c.state.cache.apply([NodeEvent(EventType.ADDED, ClusterNode(name, ready=True, taints=TAINTS[taints], unschedulable=cordoned))])
        elif what == "deregister" and c.state.cache.node(name) is not None:
            c.state.cache.apply([NodeEvent(EventType.DELETED, c.state.cache.node(name))])
        elif what == "beat" and c.state.cache.node(name) is not None:
            beat += 10
            c.state.cache.apply([NodeEvent(EventType.MODIFIED, c.state.cache.node(name).with_heartbeat(beat))])
        elif what == "mark":
            c.state.marked[name] = ("test", "test")
        elif what == "unmark":
            c.state.marked.pop(name, None)
        else:
            before = c.state._planned
            assert c.state._planning_nodes() == _fresh(c)
            after, since = c.state._planned, c.state.planned_since
            if after is not before and since is not None:  # what changed is said truly (or not at all)
                assert since.links(before, after)
                assert since_holds(since, {n.name: n for n in before}, {n.name: n for n in after})
    assert c.state._planning_nodes() == _fresh(c)


TRACK_STEP = st.tuples(st.sampled_from(["record", "forget", "bind", "unbind", "track"]), st.sampled_from(NAMES[:2]), st.sampled_from(["a", "b"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(TRACK_STEP, max_size=40), st.sampled_from([2, 5, 4096]))
def test_disruption_tracks_since_when_each_node_held_its_pods_as_a_pass_over_every_record_would(steps: list, limit: int) -> None:
    h = Harness(binpack_pool("general"))
    c = h.controller
    c.state.nodes.changes.limit = c.state.cache.held_changes.limit = limit
    expected: dict[str, Held] = {}
    now = 0.0
    for what, name, key in steps:
        now += 1
        if what == "record":
            c.state.nodes[name] = node(name, pool="general")
        elif what == "forget" and name in c.state.nodes:
            del c.state.nodes[name]
        elif what == "bind":  # (a pod bound elsewhere moves: a new pod of that name)
            c.state.cache.apply([PodEvent(EventType.ADDED, pod(key, node=name, phase=PodPhase.RUNNING))])
        elif what == "unbind":
            c.state.cache.apply([PodEvent(EventType.DELETED, pod(key))])
        elif what == "track":
            c.disruption.tenure.track(now)
            for gone in expected.keys() - c.state.nodes.keys():
                del expected[gone]
            for n in c.state.nodes:
                held = c.state.cache.held(n)
                if n not in expected or expected[n].started.keys() != held:
                    was = expected[n].started if n in expected else {}
                    started = {k: was.get(k, now) for k in held}
                    expected[n] = Held(now, started, sum(started.values()))
            assert c.disruption.tenure.pods_since == expected


def test_a_journal_tells_what_changed_since_a_mark_until_it_starts_again() -> None:
    a, b = Journal(limit=3), Journal()
    assert changed_since((a, b), None)[0] is None  # a reader that never looked looks at everything
    marks = changed_since((a, b), None)[1]
    a.add("n1")
    b.add("n2")
    b.add("n2")
    changed, marks = changed_since((a, b), marks)
    assert changed == {"n1", "n2"}
    assert changed_since((a, b), marks)[0] == set()
    a.add("n3")
    a.add("n4")
    assert changed_since((a, b), marks)[0] == {"n3", "n4"}
    a.add("n5")  # past its limit of three names: the journal starts again, and the reader must look at everything
    assert changed_since((a, b), marks)[0] is None
    assert a.since(a.mark()) == set()


# The same types at other prices (a price refresh makes a new catalog).
REPRICED = CATALOG.with_prices({t.name: t.on_demand_price / 3 for t in TYPES}, {}, "a price refresh")
FLEET_STEP = st.tuples(
    st.sampled_from(["record", "record", "forget", "tally"]),
    st.sampled_from(NAMES),
    st.sampled_from(["general", "cells"]),
    st.sampled_from(list(NodeState)),
    st.sampled_from(["a.large", "m.xlarge", "m.4xlarge"]),
    st.sampled_from([CATALOG, REPRICED]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(FLEET_STEP, max_size=40), st.sampled_from([2, 4096]))
def test_the_fleet_tally_counts_and_prices_the_records_as_a_pass_over_them_would(steps: list, limit: int) -> None:
    records = NodeRecords()
    records.changes.limit = limit
    tally = FleetTally(records)
    for what, name, pool, state, itype, catalog in steps:
        if what == "record":
            records[name] = node(name, itype, pool=pool, state=state)
        elif what == "forget" and name in records:
            del records[name]
        elif what == "tally":
            tally.update(catalog)
            assert tally.counts == Counter((n.pool, n.state) for n in records.values())
            live = [catalog.hourly(n.instance_type, n.capacity_type, n.zone) for n in records.values() if n.state in LIVE_STATES]
            assert tally.cost_per_hour() == math.fsum(live)


LABEL_STEP = st.tuples(
    st.sampled_from(["record", "forget", "register", "relabel", "deregister", "beat", "look", "look"]),
    st.sampled_from(NAMES[:2]),
    st.sampled_from([NodeState.AVAILABLE, NodeState.CREATING]),
    st.sampled_from([{}, {"team": "ml"}, {"team": "ml", "tier": "gpu"}]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(LABEL_STEP, max_size=40), st.sampled_from([2, 4096, 4096]))
@example(  # a record alone changes: its pool's labels now ask for one its Node lacks
    [
        ("register", "n1", NodeState.AVAILABLE, {}),
        ("look", "n1", NodeState.AVAILABLE, {}),
        ("record", "n1", NodeState.AVAILABLE, {"team": "ml"}),
        ("look", "n1", NodeState.AVAILABLE, {}),
    ],
    4096,
)
def test_the_nodes_to_label_again_are_those_a_pass_over_every_record_finds(steps: list, limit: int) -> None:
    h = Harness(binpack_pool("general"))
    c = h.controller
    c.state.nodes.changes.limit = c.state.cache.node_changes.limit = limit
    beat = 0.0
    for what, name, state, labels in steps:
        if what == "record":
            c.state.nodes[name] = dataclasses.replace(node(name, pool="general", state=state), labels=labels)
        elif what == "forget" and name in c.state.nodes:
            del c.state.nodes[name]
        elif what in ("register", "relabel"):
            c.state.cache.apply([NodeEvent(EventType.ADDED if what == "register" else EventType.MODIFIED, ClusterNode(name, ready=True, labels=labels))])
        elif what == "deregister" and c.state.cache.node(name) is not None:
            c.state.cache.apply([NodeEvent(EventType.DELETED, c.state.cache.node(name))])
        elif what == "beat" and c.state.cache.node(name) is not None:
            beat += 10
            c.state.cache.apply([Heartbeats(beat, (name,))])
        elif what == "look":
            expected = {
                n
                for n, record in c.state.nodes.items()
                if record.labels
                and record.state is NodeState.AVAILABLE
                and (registered := c.state.cache.node(n)) is not None
                and not registered.labels.keys() >= record.labels.keys()
            }
            assert c.lifecycle.unlabelled_now() == expected
