"""The node lifecycle table: every legal edge works, every other edge raises and changes nothing."""

import itertools

import pytest

from nodemanager.errors import IllegalTransition
from nodemanager.model import TRANSITIONS, CapacityType, Node, NodeName, NodeState, can_transition

S = NodeState
LEGAL = {
    (S.CREATING, S.CREATED),
    (S.CREATING, S.AVAILABLE),
    (S.CREATING, S.TERMINATING),
    (S.CREATING, S.TERMINATED),
    (S.CREATED, S.AVAILABLE),
    (S.CREATED, S.CLEANING),
    (S.CREATED, S.TERMINATING),
    (S.CREATED, S.TERMINATED),
    (S.AVAILABLE, S.CLAIMED),
    (S.AVAILABLE, S.TERMINATING),
    (S.AVAILABLE, S.TERMINATED),
    (S.CLAIMED, S.AVAILABLE),  # unlike Kip: an unused claimed node serves again
    (S.CLAIMED, S.CLEANING),
    (S.CLAIMED, S.TERMINATING),
    (S.CLAIMED, S.TERMINATED),
    (S.CLEANING, S.AVAILABLE),
    (S.CLEANING, S.TERMINATING),
    (S.CLEANING, S.TERMINATED),
    (S.TERMINATING, S.TERMINATED),
} | {(s, s) for s in S}


def node(state: NodeState) -> Node:
    base = Node(NodeName("n1"), "pool", "m5.large", CapacityType.ON_DEMAND, "us-east-1a")
    path = {
        S.CREATING: [],
        S.CREATED: [S.CREATED],
        S.AVAILABLE: [S.AVAILABLE],
        S.CLAIMED: [S.AVAILABLE, S.CLAIMED],
        S.CLEANING: [S.AVAILABLE, S.CLAIMED, S.CLEANING],
        S.TERMINATING: [S.TERMINATING],
        S.TERMINATED: [S.TERMINATED],
    }[state]
    for step in path:
        base = base.moved_to(step)
    return base


def test_table_is_exactly_the_expected_graph():
    table = {(a, b) for a, targets in TRANSITIONS.items() for b in targets} | {(s, s) for s in S}
    assert table == LEGAL


def test_every_edge_has_a_reason():
    assert all(reason for targets in TRANSITIONS.values() for reason in targets.values())


@pytest.mark.parametrize(("current", "target"), sorted(LEGAL), ids=lambda s: s.value)
def test_legal_edges_move(current, target):
    n = node(current)
    assert n.state is current
    assert n.moved_to(target).state is target
    assert can_transition(current, target)


ILLEGAL = sorted(set(itertools.product(S, S)) - LEGAL)


@pytest.mark.parametrize(("current", "target"), ILLEGAL, ids=lambda s: s.value)
def test_illegal_edges_raise_and_change_nothing(current, target):
    n = node(current)
    with pytest.raises(IllegalTransition) as err:
        n.moved_to(target)
    assert n.state is current
    assert (err.value.current, err.value.target) == (current, target)
    assert "n1" in str(err.value)
    assert not can_transition(current, target)


def test_terminated_is_final():
    assert TRANSITIONS[S.TERMINATED] == {}


def test_state_only_changes_through_moved_to():
    with pytest.raises(TypeError):
        node(S.CREATING).with_changes(state=S.AVAILABLE)
    assert node(S.CREATING).with_changes(instance_id="i-1").instance_id == "i-1"


def test_illegal_transition_survives_python_O():
    # The check is an explicit raise, not an assert that `python -O` would strip.
    import inspect

    from nodemanager.model import node as node_module

    assert "assert " not in inspect.getsource(node_module.Node.moved_to)
