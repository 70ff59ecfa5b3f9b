"""The controller's node records keep their index (names by state, names with bindings) true
whatever sequence of assignments and deletions made them, in the records' own order."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodemanager.controller.records import NodeRecords
from nodemanager.model import CapacityType, Node, NodeName, NodeState, Resources

NAMES = ["n1", "n2", "n3", "n4"]
PODS = ["default/p", "default/q", "default/r"]
change = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(NAMES), st.sampled_from(list(NodeState)), st.lists(st.sampled_from(PODS), unique=True).map(tuple)),
    st.tuples(st.just("del"), st.sampled_from(NAMES), st.just(NodeState.CREATING), st.just(())),
)


def record(name: str, state: NodeState, bound: bool | tuple[str, ...]) -> Node:
    node = Node(NodeName(name), "pool", "m5.large", CapacityType.ON_DEMAND, "us-east-1a")
    pods = bound if isinstance(bound, tuple) else ("default/p",) if bound else ()
    return dataclasses.replace(node, state=state, bound_pods=pods)


@given(st.lists(change, max_size=30))
def test_the_index_matches_the_records(changes: list[tuple[str, str, NodeState, tuple[str, ...]]]) -> None:
    records, plain = NodeRecords(), {}
    for op, name, state, pods in changes:
        if op == "set":
            records[name] = plain[name] = record(name, state, pods)
        elif name in plain:
            del records[name], plain[name]
    assert list(records) == list(plain)
    for first in NodeState:
        for second in NodeState:
            assert records.in_states(first, second) == [n for n, node in plain.items() if node.state in (first, second)]
    assert records.with_bindings() == sorted(n for n, node in plain.items() if node.bound_pods)
    for pod in PODS:
        assert records.binding_of(pod) == min((n for n, node in plain.items() if pod in node.bound_pods), default=None)


def test_mutators_that_would_bypass_the_index_are_refused() -> None:
    records = NodeRecords()
    records["n1"] = record("n1", NodeState.CREATED, False)
    for call in (lambda: records.pop("n1"), records.clear, lambda: records.update(n2=record("n2", NodeState.CREATED, False))):
        with pytest.raises(TypeError, match="assignment and del only"):
            call()
    assert records.in_states(NodeState.CREATED) == ["n1"]


def test_every_change_gives_the_records_a_stamp_no_records_had() -> None:
    a, b = NodeRecords(), NodeRecords()
    seen = {a.stamp, b.stamp}
    a["n1"] = record("n1", NodeState.CREATED, False)
    b["n1"] = record("n1", NodeState.CREATED, False)
    assert a.stamp not in seen
    assert b.stamp not in seen | {a.stamp}
    seen |= {a.stamp, b.stamp}
    del a["n1"]
    assert a.stamp not in seen


def test_the_census_moves_only_when_what_the_gauges_count_changes() -> None:
    """The node gauges and the cost are made again when a record comes, goes or changes its
    pool, state, type, capacity type, zone or allocatable; a binding moves the stamp but not
    the census."""
    records = NodeRecords()
    records["n1"] = record("n1", NodeState.AVAILABLE, bound=False)
    census, stamp = records.census, records.stamp
    records["n1"] = dataclasses.replace(records["n1"], bound_pods=("default/p",))
    assert records.stamp != stamp
    assert records.census == census
    changes = ({"state": NodeState.CLAIMED}, {"zone": "elsewhere"}, {"instance_type": "other.large"}, {"capacity_type": CapacityType.SPOT})
    changes += ({"allocatable": Resources({"cpu": 1500})},)
    for change in changes:
        records["n1"] = dataclasses.replace(records["n1"], **change)
        assert records.census != census, change
        census = records.census
    del records["n1"]
    assert records.census != census
