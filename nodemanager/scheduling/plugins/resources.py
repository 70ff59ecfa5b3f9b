"""Resource plugins: NodeResourcesFit (filter) and the three allocation scores.

The scores use the scheduler's integer formulas over cpu and memory (weights 1:1), with
"non-zero" requests: a pod asking for no cpu counts 100m, for no memory 200 MiB.
"""

from __future__ import annotations

from collections.abc import Sequence

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

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
        requests: Resources = state.get(_STATE_KEY) or pod.requests
        fits = requests.fits_within
        return [
            n
            for n in nodes
            if (self.filter(state, pod, n) is None if n.batch_estimate else len(n.pods) < n.allocatable.pods and fits(n.allocatable, n.requested))
        ]


class _AllocationScore(ScorePlugin):
    """A score of the node's cpu and memory requested (non-zero, this pod included) against
    its allocatable."""

    @staticmethod
    def formula(req_cpu: int, req_mem: int, allocatable: tuple[int, int]) -> int:
        raise NotImplementedError

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        scores, status = self.score_nodes(state, pod, (node,))
        return scores[node.name], status

    def score_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> tuple[dict[str, int], Status | None]:
        cpu, memory = nonzero_request(pod)
        f = self.formula
        return {n.name: f(n.nonzero_cpu + cpu, n.nonzero_memory + memory, n.allocatable.cpu_memory()) for n in nodes}, None


def _share(req: int, alloc: int) -> int:
    """``(req * 100) // alloc``, 0 past the allocatable or with none."""
    return 0 if alloc == 0 or req > alloc else (req * 100) // alloc


class LeastAllocated(_AllocationScore):
    """Prefers emptier nodes: ``((alloc - req) * 100) // alloc`` averaged over cpu and memory."""

    name = "LeastAllocated"

    @staticmethod
    def formula(req_cpu: int, req_mem: int, allocatable: tuple[int, int]) -> int:
        alloc_cpu, alloc_mem = allocatable
        free_cpu = 0 if alloc_cpu == 0 or req_cpu > alloc_cpu else ((alloc_cpu - req_cpu) * 100) // alloc_cpu
        free_mem = 0 if alloc_mem == 0 or req_mem > alloc_mem else ((alloc_mem - req_mem) * 100) // alloc_mem
        return (free_cpu + free_mem) // 2


class MostAllocated(_AllocationScore):
    """Prefers fuller nodes: ``(req * 100) // alloc`` averaged over cpu and memory."""

    name = "MostAllocated"

    @staticmethod
    def formula(req_cpu: int, req_mem: int, allocatable: tuple[int, int]) -> int:
        return (_share(req_cpu, allocatable[0]) + _share(req_mem, allocatable[1])) // 2


class BalancedAllocation(_AllocationScore):
    """Prefers nodes whose cpu and memory fill evenly: ``int((1 - |f_cpu - f_mem|) * 100)``."""

    name = "BalancedAllocation"

    @staticmethod
    def formula(req_cpu: int, req_mem: int, allocatable: tuple[int, int]) -> int:
        alloc_cpu, alloc_mem = allocatable
        f_cpu = req_cpu / alloc_cpu if alloc_cpu else 1.0
        f_mem = req_mem / alloc_mem if alloc_mem else 1.0
        if f_cpu >= 1 or f_mem >= 1:
            return 0
        return int((1 - abs(f_cpu - f_mem)) * 100)
