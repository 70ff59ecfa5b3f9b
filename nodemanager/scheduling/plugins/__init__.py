"""The built-in plugins, listed explicitly (``default_registry`` registers them)."""

from nodemanager.scheduling.plugins.dynamic_resources import DynamicResources
from nodemanager.scheduling.plugins.interpod import InterPodAffinity, PodTopologySpread
from nodemanager.scheduling.plugins.placement import (
    CapacityTypeMatch,
    CellIsolation,
    InstanceTypeMatch,
    NodeAffinity,
    NodeName,
    NodePorts,
    NodeUnschedulable,
    TaintToleration,
    Zone,
)
from nodemanager.scheduling.plugins.pod_group import PodGroup
from nodemanager.scheduling.plugins.queue_sort import PrioritySort
from nodemanager.scheduling.plugins.resources import BalancedAllocation, LeastAllocated, MostAllocated, NodeResourcesFit
from nodemanager.scheduling.plugins.volumes import NodeVolumeLimits, VolumeBinding, VolumeZone

BUILTIN_PLUGINS = (
    PrioritySort,
    NodeResourcesFit,
    NodeUnschedulable,
    NodeName,
    NodeAffinity,
    NodePorts,
    TaintToleration,
    VolumeBinding,
    VolumeZone,
    NodeVolumeLimits,
    PodTopologySpread,
    InterPodAffinity,
    InstanceTypeMatch,
    CapacityTypeMatch,
    Zone,
    CellIsolation,
    LeastAllocated,
    MostAllocated,
    BalancedAllocation,
    PodGroup,
    DynamicResources,
)

__all__ = [p.__name__ for p in BUILTIN_PLUGINS] + ["BUILTIN_PLUGINS"]
