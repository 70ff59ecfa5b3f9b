"""Resource plugins: NodeResourcesFit (filter) and the three allocation scores.

The scores use the scheduler's integer formulas over cpu and memory (weights 1:1), with
"non-zero" requests: a pod asking for no cpu counts 100m, for no memory 200 MiB.
"""

from __future__ import annotations

from nodemanager.model import Pod, Resources
from nodemanager.model.resources import PODS
from nodemanager.scheduling.cycle_state import CycleState
from nodemanager.scheduling.interfaces import FilterPlugin, PreFilterPlugin, ScorePlugin
from nodemanager.scheduling.nodeinfo import NodeInfo, nonzero_request
from nodemanager.scheduling.status import Status, unschedulable

_STATE_KEY = "PreFilterNodeResourcesFit"


class NodeResourcesFit(PreFilterPlugin, FilterPlugin):
    name = "NodeResourcesFit"

    def pre_filter(self, state: CycleState, pod: Pod) -> Status | None:
        state.write(_STATE_KEY, pod.requests)
        return None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        requests: Resources = node.fit_request(pod) if node.batch_estimate else (state.get(_STATE_KEY) or pod.requests)
        if len(node.pods) + 1 > node.allocatable.pods:
            return unschedulable("Too many pods", self.name)
        if requests.fits_within(node.allocatable, node.requested):
            return None
        missing = [n for n in requests.shortfall(node.free) if n != PODS]
        return unschedulable(", ".join(f"Insufficient {n}" for n in missing), self.name)


def _requested_after(pod: Pod, node: NodeInfo) -> tuple[tuple[int, int], tuple[int, int]]:
    cpu, memory = nonzero_request(pod)
    return (node.nonzero_cpu + cpu, node.nonzero_memory + memory), (node.allocatable.cpu, node.allocatable.memory)


class LeastAllocated(ScorePlugin):
    """Prefers emptier nodes: ``((alloc - req) * 100) // alloc`` averaged over cpu and memory."""

    name = "LeastAllocated"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        requested, allocatable = _requested_after(pod, node)
        parts = [0 if alloc == 0 or req > alloc else ((alloc - req) * 100) // alloc for req, alloc in zip(requested, allocatable, strict=True)]
        return sum(parts) // len(parts), None


class MostAllocated(ScorePlugin):
    """Prefers fuller nodes: ``(req * 100) // alloc`` averaged over cpu and memory."""

    name = "MostAllocated"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        requested, allocatable = _requested_after(pod, node)
        parts = [0 if alloc == 0 or req > alloc else (req * 100) // alloc for req, alloc in zip(requested, allocatable, strict=True)]
        return sum(parts) // len(parts), None


class BalancedAllocation(ScorePlugin):
    """Prefers nodes whose cpu and memory fill evenly: ``int((1 - |f_cpu - f_mem|) * 100)``."""

    name = "BalancedAllocation"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        (req_cpu, req_mem), (alloc_cpu, alloc_mem) = _requested_after(pod, node)
        f_cpu = req_cpu / alloc_cpu if alloc_cpu else 1.0
        f_mem = req_mem / alloc_mem if alloc_mem else 1.0
        if f_cpu >= 1 or f_mem >= 1:
            return 0, None
        return int((1 - abs(f_cpu - f_mem)) * 100), None
