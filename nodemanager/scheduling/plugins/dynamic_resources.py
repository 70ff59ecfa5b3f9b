"""DynamicResources: a pod's resource claims must be satisfiable by the node's devices.

Filter runs the structured allocator for the pod's unallocated claims on the node (devices
held by allocated claims, and by claims reserved earlier in this computation, are taken);
an already allocated claim must be available on the node. Reserve holds the chosen
devices for the rest of the computation; Unreserve gives them back. A fatal allocator
error (bad input, a CEL error) is an Error, which aborts the attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from nodemanager.dra import AllocationError, AllocationResult, Allocator, ResourceSlice, devices_of
from nodemanager.dra.allocator import DeviceId
from nodemanager.dra.context import DeviceContext
from nodemanager.model import Pod
from nodemanager.model.selectors import terms_match
from nodemanager.scheduling.cycle_state import CycleState
from nodemanager.scheduling.interfaces import FilterPlugin, ReservePlugin, SkipsUnasked, UnreservePlugin
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.status import Status, error, unresolvable, unschedulable


@dataclass
class DeviceState:
    """Set by the scaler for one computation."""

    context: DeviceContext
    slices_for: Callable[[NodeInfo], list[ResourceSlice]]
    reserved: dict[str, set[DeviceId]] = field(default_factory=dict)  # node -> devices held
    allocations: dict[str, tuple[str, AllocationResult]] = field(default_factory=dict)  # claim -> (node, result)
    by_pod: dict[str, list[str]] = field(default_factory=dict)  # pod -> claims it reserved


class DynamicResources(SkipsUnasked, FilterPlugin, ReservePlugin, UnreservePlugin):
    name = "DynamicResources"

    def asks(self, pod: Pod) -> bool:
        return bool(pod.claims)

    @property
    def state(self) -> DeviceState | None:
        return getattr(self.handle, "devices", None)

    def _allocate(self, pod: Pod, node: NodeInfo) -> tuple[list[AllocationResult] | None, list[str], Status | None]:
        state = self.state
        if state is None:
            return None, [], unresolvable("no device information", self.name)
        if state.context.unavailable:
            return None, [], unresolvable(state.context.unavailable, self.name)
        claims = []
        for key in pod.claims:
            claim = state.context.claims.get(key)
            if claim is None:
                return None, [], unresolvable(f"resource claim {key} not found", self.name)
            held = state.allocations.get(key)
            if claim.allocation is not None or held is not None:
                selector = claim.allocation.node_selector if claim.allocation is not None else None
                if held is not None and held[0] != node.name:
                    return None, [], unschedulable(f"claim {key} is allocated on node {held[0]}", self.name)
                if selector is not None and not terms_match(selector, node.labels, node.name):
                    return None, [], unschedulable(f"claim {key} is allocated elsewhere", self.name)
                continue
            claims.append(claim)
        if not claims:
            return [], [], None
        allocator = Allocator(claims, state.context.allocated(), state.context.classes, state.slices_for(node), state.reserved.get(node.name, set()))
        try:
            results = allocator.allocate(node.name, node.labels)
        except AllocationError as exc:
            return None, [], error(str(exc), self.name)
        if results is None:
            return None, [], unschedulable(f"cannot allocate devices for {', '.join(c.key for c in claims)}", self.name)
        return results, [c.key for c in claims], None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if not pod.claims:
            return None
        _, _, status = self._allocate(pod, node)
        return status

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        devices = self.state
        if not pod.claims or devices is None:
            return None
        node = self.handle.node_infos.get(node_name)
        if node is None:
            return error(f"node {node_name} unknown", self.name)
        results, keys, status = self._allocate(pod, node)
        if status is not None or results is None:
            return status or unschedulable("devices are gone", self.name)
        devices.reserved.setdefault(node_name, set()).update(devices_of(results))
        for key, result in zip(keys, results, strict=True):
            devices.allocations[key] = (node_name, result)
        devices.by_pod[pod.key] = keys
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        devices = self.state
        if devices is None:
            return
        for key in devices.by_pod.pop(pod.key, []):
            _, result = devices.allocations.pop(key)
            devices.reserved.get(node_name, set()).difference_update(devices_of([result]))


def allocations_of(state: DeviceState | None) -> Mapping[str, tuple[str, AllocationResult]]:
    return dict(state.allocations) if state is not None else {}
