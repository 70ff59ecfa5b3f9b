"""The data every other layer speaks: quantities, resources, pods, nodes, instance types."""

from nodemanager.model.instance_type import Gpu, InstanceType, Offering
from nodemanager.model.node import (
    BINDABLE_STATES,
    LIVE_STATES,
    STABLE_STATES,
    TRANSITIONS,
    CapacityType,
    InstanceId,
    LaunchOption,
    Node,
    NodeName,
    NodeState,
    can_transition,
)
from nodemanager.model.pod import CapacityPolicy, Pod, PodKey, PodPhase
from nodemanager.model.quantity import format_quantity, parse_quantity, resource_amount
from nodemanager.model.resources import ZERO, Resources
from nodemanager.model.selectors import Operator, Requirement, SelectorTerm, Taint, TaintEffect, Toleration

__all__ = [
    "BINDABLE_STATES",
    "LIVE_STATES",
    "STABLE_STATES",
    "TRANSITIONS",
    "ZERO",
    "CapacityPolicy",
    "CapacityType",
    "Gpu",
    "InstanceId",
    "InstanceType",
    "LaunchOption",
    "Node",
    "NodeName",
    "NodeState",
    "Offering",
    "Operator",
    "Pod",
    "PodKey",
    "PodPhase",
    "Requirement",
    "Resources",
    "SelectorTerm",
    "Taint",
    "TaintEffect",
    "Toleration",
    "can_transition",
    "format_quantity",
    "parse_quantity",
    "resource_amount",
]
