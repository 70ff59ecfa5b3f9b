"""``Node``: nodemanager's record of one cloud instance, and its lifecycle as data.

The lifecycle is one enum and one transition table (``TRANSITIONS``); every helper is
derived from the table, and ``Node.moved_to`` is the only way to change a state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import NewType

from nodemanager.errors import IllegalTransition
from nodemanager.model.pod import PodKey
from nodemanager.model.resources import ZERO, Resources
from nodemanager.model.selectors import Taint
from nodemanager.model.slot_copy import copied

NodeName = NewType("NodeName", str)
InstanceId = NewType("InstanceId", str)


class CapacityType(StrEnum):
    ON_DEMAND = "on-demand"
    SPOT = "spot"
    RESERVED = "reserved"  # launched into a capacity reservation (an ODCR or a Capacity Block)


class NodeState(StrEnum):
    CREATING = "Creating"  # record written, cloud call not (yet) answered
    CREATED = "Created"  # instance exists, not yet a Ready node
    AVAILABLE = "Available"  # Ready and free to be claimed
    CLAIMED = "Claimed"  # handed to its pod(s) by the dispenser
    CLEANING = "Cleaning"  # returned after use; being cleaned
    TERMINATING = "Terminating"  # termination requested
    TERMINATED = "Terminated"  # instance gone; the record is kept briefly


S = NodeState
# Every legal edge, with why it exists. Staying in a state is always allowed (an
# idempotent update); everything not listed raises IllegalTransition.
TRANSITIONS: Mapping[NodeState, Mapping[NodeState, str]] = MappingProxyType(
    {
        S.CREATING: MappingProxyType(
            {
                S.CREATED: "the cloud accepted the boot and returned an instance id",
                S.AVAILABLE: "adopted after a restart: the instance was already a Ready node",
                S.TERMINATING: "surplus or timed out before the boot call returned",
                S.TERMINATED: "the boot failed; no instance exists",
            }
        ),
        S.CREATED: MappingProxyType(
            {
                S.AVAILABLE: "the node registered and became Ready",
                S.CLEANING: "pods were bound at birth and finished before the node was claimed",
                S.TERMINATING: "boot timeout, failed health check or no longer needed",
                S.TERMINATED: "the instance vanished (spot interruption, external termination)",
            }
        ),
        S.AVAILABLE: MappingProxyType(
            {
                S.CLAIMED: "the dispenser handed the node to its bound pod",
                S.TERMINATING: "idle past the grace period, or unhealthy",
                S.TERMINATED: "the instance vanished",
            }
        ),
        S.CLAIMED: MappingProxyType(
            {
                S.AVAILABLE: "returned unused: nothing touched it, so it can serve again",
                S.CLEANING: "returned after use",
                S.TERMINATING: "unhealthy, or its pods were evicted",
                S.TERMINATED: "the instance vanished",
            }
        ),
        S.CLEANING: MappingProxyType(
            {
                S.AVAILABLE: "bin-pack pools keep a cleaned node for the next pods",
                S.TERMINATING: "cell pools never reuse a node",
                S.TERMINATED: "the instance vanished",
            }
        ),
        S.TERMINATING: MappingProxyType({S.TERMINATED: "the cloud confirmed the instance is gone"}),
        S.TERMINATED: MappingProxyType({}),
    }
)


def can_transition(current: NodeState, target: NodeState) -> bool:
    return current == target or target in TRANSITIONS[current]


#: States in which a node is still on its way to serving pods, or serving them.
LIVE_STATES = frozenset(s for s in NodeState if s not in (S.TERMINATING, S.TERMINATED))
#: States with nothing under way: serving pods, or gone.
STABLE_STATES = frozenset({S.AVAILABLE, S.CLAIMED, S.TERMINATED})
#: States whose node the scaler may still match waiting pods to.
BINDABLE_STATES = frozenset({S.CREATING, S.CREATED, S.AVAILABLE})


@dataclass(frozen=True, slots=True)
class LaunchOption:
    """Another offering a node's launch may take (a fleet launch picks one of several): what
    the node's record says once its instance turns out to be this one. The capacity type is
    the node's own."""

    instance_type: str
    zone: str
    price: float
    allocatable: Resources
    labels: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Node:
    name: NodeName
    pool: str
    instance_type: str
    capacity_type: CapacityType
    zone: str
    allocatable: Resources = ZERO
    state: NodeState = NodeState.CREATING
    instance_id: InstanceId | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False  # cordoned (what the cluster says)
    bound_pods: tuple[PodKey, ...] = ()
    created_at: float = 0.0
    ready_at: float | None = None
    image_id: str = ""  # the machine image its instance was launched from ("" when unknown)
    alternatives: tuple[LaunchOption, ...] = ()  # other offerings its launch may take (fleet launches)

    @property
    def is_spot(self) -> bool:
        return self.capacity_type is CapacityType.SPOT

    def moved_to(self, target: NodeState) -> Node:
        """A copy in ``target``; raises ``IllegalTransition`` (and changes nothing) otherwise."""
        if not can_transition(self.state, target):
            raise IllegalTransition(self.name, self.state, target)
        return copied(self, {"state": target})

    def with_changes(self, **changes: object) -> Node:
        """A copy with other fields changed; the state only changes through ``moved_to``.
        (Copied slot by slot, see ``slot_copy``: nothing of a record is derived.)"""
        if "state" in changes:
            raise TypeError("change a node's state with moved_to()")
        return copied(self, changes)
