"""Slot-by-slot copies of frozen dataclasses are what ``dataclasses.replace`` makes."""

import dataclasses

import pytest
from builders import node

from nodemanager.model import NodeState, PodKey
from nodemanager.model.slot_copy import copied


def test_a_node_records_copy_is_what_replace_makes_and_leaves_the_original() -> None:
    record = node("n1", "a.large", state=NodeState.CREATING)
    bound = record.with_changes(bound_pods=(PodKey("default/p"),), ready_at=5.0)
    assert bound == dataclasses.replace(record, bound_pods=(PodKey("default/p"),), ready_at=5.0)
    assert record.bound_pods == ()
    assert record.moved_to(NodeState.CREATED) == dataclasses.replace(record, state=NodeState.CREATED)
    with pytest.raises(TypeError, match="no field 'colour'"):
        copied(record, {"colour": "blue"})
    with pytest.raises(TypeError, match="moved_to"):
        record.with_changes(state=NodeState.CREATED)
