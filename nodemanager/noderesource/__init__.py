"""Node-resource overcommit: the calculation framework and the BatchResource plugin."""

from nodemanager.model.resources import BATCH_CPU, BATCH_MEMORY
from nodemanager.noderesource.batch import BatchResource, priority_class
from nodemanager.noderesource.framework import NodeResourceFramework, ReconcileResult, plugin_enabled
from nodemanager.noderesource.model import NodeMetric, NodeView, PodUsage, ResourceItem
from nodemanager.noderesource.strategy import CalculatePolicy, ColocationStrategy

__all__ = [
    "BATCH_CPU",
    "BATCH_MEMORY",
    "BatchResource",
    "CalculatePolicy",
    "ColocationStrategy",
    "NodeMetric",
    "NodeResourceFramework",
    "NodeView",
    "PodUsage",
    "ReconcileResult",
    "ResourceItem",
    "plugin_enabled",
    "priority_class",
]
