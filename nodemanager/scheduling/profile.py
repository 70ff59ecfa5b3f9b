"""A scheduling profile: which plugins run at each extension point, with score weights."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class Profile:
    queue_sort: tuple[str, ...] = ("PrioritySort",)
    # kube-scheduler's order; the rest of this project's own placement plugins after them.
    pre_filter: tuple[str, ...] = (
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "InstanceTypeMatch",
        "CapacityType",
        "Zone",
    )
    # kube-scheduler's order where the plugins are the same ones (its default_plugins.go:
    # NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, ...,
    # NodeVolumeLimits, VolumeBinding, ...): a node that fails several is reported by the
    # first, and the cheap label and taint checks leave the rest fewer nodes to look at.
    filter: tuple[str, ...] = (
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "InstanceTypeMatch",
        "CapacityType",
        "Zone",
        "CellIsolation",
        "DynamicResources",
    )
    post_filter: tuple[str, ...] = ()
    # (name, weight): MostAllocated packs nodes tight so fewer are booted (the cluster
    # autoscaler's profile); BalancedAllocation keeps cpu and memory in step.
    score: tuple[tuple[str, int], ...] = (
        ("MostAllocated", 1),
        ("BalancedAllocation", 1),
        ("TaintToleration", 3),  # kube-scheduler's default weights (default_plugins.go), these four
        ("NodeAffinity", 2),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
    )
    reserve: tuple[str, ...] = ("DynamicResources", "PodGroup")
    unreserve: tuple[str, ...] = ("PodGroup", "DynamicResources")
    permit: tuple[str, ...] = ("PodGroup",)
    pre_bind: tuple[str, ...] = ()
    bind: tuple[str, ...] = ()
    post_bind: tuple[str, ...] = ()
    plugin_args: Mapping[str, Mapping[str, object]] = field(default_factory=lambda: MappingProxyType({}))

    def points(self) -> dict[str, tuple[str, ...]]:
        """Extension point (provider.yaml spelling) -> plugin names, in order."""
        return {
            "queueSort": self.queue_sort,
            "preFilter": self.pre_filter,
            "filter": self.filter,
            "postFilter": self.post_filter,
            "score": tuple(name for name, _ in self.score),
            "reserve": self.reserve,
            "unreserve": self.unreserve,
            "permit": self.permit,
            "preBind": self.pre_bind,
            "bind": self.bind,
            "postBind": self.post_bind,
        }


DEFAULT_PROFILE = Profile()
