"""Resource plugins: NodeResourcesFit (filter) and the three allocation scores.

The scores use the scheduler's integer formulas over cpu and memory (weights 1:1 unless the
plugin's ``resources`` say otherwise, as kube's ``scoringStrategy.resources``), with "non-zero"
requests: a container asking for no cpu counts 100m, for no memory 200 MiB.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from nodemanager.errors import InvalidManifest
from nodemanager.model import Pod, Resources
from nodemanager.model.manifest import as_list, as_mapping
from nodemanager.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, IgnoredResources, is_extended_resource
from nodemanager.scheduling.cycle_state import CycleState
from nodemanager.scheduling.interfaces import FilterPlugin, FrameworkHandle, PreFilterPlugin, ScorePlugin
from nodemanager.scheduling.nodeinfo import NodeInfo, nonzero_request
from nodemanager.scheduling.status import SKIP, Status, unschedulable

_STATE_KEY = "PreFilterNodeResourcesFit"
_CPU_MEMORY = frozenset({CPU, MEMORY})
_ANY = -(2**63)  # below any free amount
MAX_NODE_SCORE = MAX_WEIGHT = 100  # kube's MaxNodeScore: the highest score, and the most a resource may weigh


class NodeResourcesFit(PreFilterPlugin, FilterPlugin):
    """The pod's requests against the node's allocatable less what its pods request. Its
    arguments are kube's ``NodeResourcesFitArgs`` filter options: ``ignoredResources`` and
    ``ignoredResourceGroups`` (extended resources left unchecked; the scaler leaves them out
    of the requests it plans new nodes for too). Scoring is configured on the scores."""

    sifts_first = True

    name = "NodeResourcesFit"
    keeps_nothing = True

    def __init__(self, handle: FrameworkHandle, args: Mapping[str, object] | None = None) -> None:
        super().__init__(handle, args)
        self.ignored = parse_ignored_resources(self.args)

    def _requests(self, state: CycleState, pod: Pod) -> Resources:
        found = state.get(_STATE_KEY)
        return found if found is not None else self.ignored.strip(pod.requests)

    def pre_filter(self, state: CycleState, pod: Pod) -> Status | None:
        state.write(_STATE_KEY, self.ignored.strip(pod.requests))
        return None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        requests = self.ignored.strip(node.fit_request(pod)) if node.batch_estimate else self._requests(state, pod)
        if len(node.pods) + 1 > node.allocatable.pods:
            return unschedulable("Too many pods", self.name)
        if requests.fits_within(node.allocatable, node.requested):
            return None
        missing = [n for n in requests.shortfall(node.free) if n != PODS]
        return unschedulable(", ".join(f"Insufficient {n}" for n in missing), self.name)

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
        requests = self._requests(state, pod)
        if requests.names() <= _CPU_MEMORY:  # most pods: compared with the node's free counts, no call per node
            cpu, memory = requests.cpu_memory()
            least_cpu, least_memory = cpu or _ANY, memory or _ANY  # what a request does not name is not checked
            return [
                n
                for n in nodes
                if (self.filter(state, pod, n) is None if n.batch_estimate else n.free_pods > 0 and n.free_cpu >= least_cpu and n.free_memory >= least_memory)
            ]
        fits = requests.fits_within
        return [n for n in nodes if (self.filter(state, pod, n) is None if n.batch_estimate else n.free_pods > 0 and fits(n.allocatable, n.requested))]


# One row per node: (cpu, memory) requested with the pod, non-zero, and (cpu, memory) allocatable.
Rows = Iterable[tuple[int, int, int, int]]
_ROWS_KEY = "AllocationRows"


class _AllocationScore(ScorePlugin):
    """A score of the node's cpu and memory requested (non-zero, this pod included) against
    its allocatable. ``formula`` scores a batch of rows in one comprehension: a busy
    cluster scores hundreds of nodes for every pod class."""

    def formula(self, rows: Rows) -> list[int]:
        raise NotImplementedError

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        scores, status = self.score_nodes(state, pod, (node,))
        return scores[node.name], status

    def score_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> tuple[dict[str, int], Status | None]:
        batch = state.score_batch
        shared = batch.get(_ROWS_KEY) if batch is not None else None
        if shared is None:  # the first allocation score of this batch: the others read the same rows
            cpu, memory = nonzero_request(pod)
            rows = [(n.nonzero_cpu + cpu, n.nonzero_memory + memory, n.alloc_cpu, n.alloc_memory) for n in nodes]
            shared = ([n.name for n in nodes], rows)
            if batch is not None:
                batch[_ROWS_KEY] = shared
        return dict(zip(shared[0], self.formula(shared[1]), strict=True)), None


def parse_ignored_resources(args: Mapping[str, object]) -> IgnoredResources:
    """NodeResourcesFit's arguments: ``ignoredResources`` (names) and ``ignoredResourceGroups``
    (domains, without a ``/``), lists of strings as kube's ``NodeResourcesFitArgs`` has them."""
    known = ("ignoredResources", "ignoredResourceGroups")
    unknown = sorted(set(args) - set(known))
    if unknown:
        hint = " (scoring is set with pluginArgs.MostAllocated.resources or LeastAllocated's)" if "scoringStrategy" in unknown else ""
        raise InvalidManifest(unknown[0], f"unknown key ({', '.join(known)}){hint}")
    lists: dict[str, frozenset[str]] = {}
    for key in known:
        names = as_list(args.get(key), key)
        for i, name in enumerate(names):
            if not isinstance(name, str) or not name:
                raise InvalidManifest(f"{key}[{i}]", f"expected a resource name, got {name!r}")
            if key == "ignoredResourceGroups" and "/" in name:
                raise InvalidManifest(f"{key}[{i}]", f"a resource group is the domain before the '/' of a name, got {name!r}")
        lists[key] = frozenset(names)
    return IgnoredResources(lists["ignoredResources"], lists["ignoredResourceGroups"])


Weights = tuple[tuple[str, int], ...]  # (resource, weight), in the order given


def _scored_name(name: object) -> bool:
    """A resource a score may weigh: cpu, memory, ephemeral storage, hugepages, or an
    extended resource (``nvidia.com/gpu``)."""
    return isinstance(name, str) and (name in (CPU, MEMORY, EPHEMERAL_STORAGE) or name.startswith("hugepages-") or is_extended_resource(name))


def parse_resource_weights(args: Mapping[str, object]) -> Weights:
    """The weights of an allocation score's arguments: kube's ``scoringStrategy.resources``
    (``[{name, weight}]``, each weight 1-100; a resource left out is not scored), validated as
    kube-scheduler does. Default cpu and memory 1:1."""
    unknown = sorted(set(args) - {"resources"})
    if unknown:
        raise InvalidManifest(unknown[0], "unknown key (resources)")
    if args.get("resources") is None:
        return ((CPU, 1), (MEMORY, 1))
    weights: dict[str, int] = {}
    for i, entry in enumerate(as_list(args["resources"], "resources")):
        where = f"resources[{i}]"
        spec = as_mapping(entry, where)
        name, weight = spec.get("name"), spec.get("weight", 1)
        if not _scored_name(name):
            expected = "cpu, memory, ephemeral-storage, a hugepages size or an extended resource such as nvidia.com/gpu"
            raise InvalidManifest(f"{where}.name", f"expected {expected}, got {name!r}")
        name = str(name)
        if name in weights:
            raise InvalidManifest(f"{where}.name", f"{name} is listed twice")
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= MAX_WEIGHT:
            raise InvalidManifest(f"{where}.weight", f"expected an integer from 1 to {MAX_WEIGHT}, got {weight!r}")
        weights[name] = weight
    if not weights:
        raise InvalidManifest("resources", "list the resources to score (an empty list scores nothing)")
    return tuple(weights.items())


class _WeightedScore(_AllocationScore):
    """A score per resource, averaged with the resources' weights (kube's
    ``resourceAllocationScorer``: ``sum(score * weight) // sum(weight)``). Cpu and memory
    count the pod's scoring defaults; another resource counts only where the pod requests
    it and the node has some (kube leaves it out of the sum otherwise)."""

    def __init__(self, handle: FrameworkHandle, args: Mapping[str, object] | None = None) -> None:
        super().__init__(handle, args)
        weights = parse_resource_weights(self.args)
        named = dict(weights)
        self.weights = (named.get(CPU, 0), named.get(MEMORY, 0))
        self.others = tuple((n, w) for n, w in weights if n not in (CPU, MEMORY))

    @staticmethod
    def one(requested: int, allocatable: int) -> int:
        raise NotImplementedError

    def score_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> tuple[dict[str, int], Status | None]:
        asked = [(n, w, r) for n, w in self.others if (r := pod.requests.get(n))]
        if not asked and any(self.weights):  # (most pods: cpu and memory, in the rows the allocation scores share)
            return super().score_nodes(state, pod, nodes)
        cpu, memory = nonzero_request(pod)
        wc, wm = self.weights
        out = {}
        for node in nodes:
            parts = [(node.nonzero_cpu + cpu, node.alloc_cpu, wc), (node.nonzero_memory + memory, node.alloc_memory, wm)]
            parts += [(node.requested.get(name) + r, node.allocatable.get(name), w) for name, w, r in asked]
            counted = [(req, alloc, w) for req, alloc, w in parts if alloc and w]
            total = sum(w for _, _, w in counted)
            out[node.name] = sum(self.one(req, alloc) * w for req, alloc, w in counted) // total if total else 0
        return out, None


class LeastAllocated(_WeightedScore):
    """Prefers emptier nodes: ``((alloc - req) * 100) // alloc`` per resource, 0 for a
    resource past its allocatable or with none."""

    name = "LeastAllocated"
    keeps_nothing = True

    @staticmethod
    def one(requested: int, allocatable: int) -> int:
        return 0 if requested > allocatable else (allocatable - requested) * 100 // allocatable

    def formula(self, rows: Rows) -> list[int]:
        wc, wm = self.weights
        total = wc + wm
        return [
            ((0 if ac == 0 or rc > ac else (ac - rc) * 100 // ac) * wc + (0 if am == 0 or rm > am else (am - rm) * 100 // am) * wm) // total
            for rc, rm, ac, am in rows
        ]


class MostAllocated(_WeightedScore):
    """Prefers fuller nodes: ``(req * 100) // alloc`` per resource, 0 for a resource with no
    allocatable; a request past the allocatable counts as the allocatable (kube's
    ``mostRequestedScore``: the scoring defaults of pods that ask for nothing can take a
    node's sum past it, and a full node must not score below a half-full one)."""

    name = "MostAllocated"
    keeps_nothing = True

    @staticmethod
    def one(requested: int, allocatable: int) -> int:
        return min(requested, allocatable) * 100 // allocatable

    def formula(self, rows: Rows) -> list[int]:
        wc, wm = self.weights
        total = wc + wm
        return [((0 if ac == 0 else min(rc, ac) * 100 // ac) * wc + (0 if am == 0 else min(rm, am) * 100 // am) * wm) // total for rc, rm, ac, am in rows]


class BalancedAllocation(ScorePlugin):
    """Prefers nodes whose resources fill evenly (kube's ``balancedResourceScorer``): each
    resource's fraction of the allocatable, this pod's actual requests included (not the
    scoring defaults), capped at 1, a resource with no allocatable left out (and another
    than cpu and memory where the pod does not request it); ``int((1 - std) * 100)`` with
    ``std = |f1 - f2| / 2`` for two fractions, their standard deviation for more. A pod that
    requests none is not scored (kube's PreScore skips best-effort pods). Its ``resources``
    argument (kube's ``NodeResourcesBalancedAllocationArgs``) names the resources (default
    cpu and memory; weights are not used)."""

    name = "BalancedAllocation"
    keeps_nothing = True

    def __init__(self, handle: FrameworkHandle, args: Mapping[str, object] | None = None) -> None:
        super().__init__(handle, args)
        names = [n for n, _ in parse_resource_weights(self.args)]
        self.counts = (CPU in names, MEMORY in names)
        self.others = tuple(n for n in names if n not in (CPU, MEMORY))

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        cpu, memory = pod.requests.cpu_memory()
        asks = (cpu and self.counts[0]) or (memory and self.counts[1]) or any(pod.requests.get(n) for n in self.others)
        return None if asks else SKIP

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        scores, status = self.score_nodes(state, pod, (node,))
        return scores[node.name], status

    def score_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> tuple[dict[str, int], Status | None]:
        cpu, memory = pod.requests.cpu_memory()
        with_cpu, with_memory = self.counts
        asked = [(n, r) for n in self.others if (r := pod.requests.get(n))]
        out = {}
        for n in nodes:
            ac, am = n.alloc_cpu if with_cpu else 0, n.alloc_memory if with_memory else 0
            if not asked:  # (most pods: cpu and memory)
                if ac and am:
                    f_cpu, f_memory = min((ac - n.free_cpu + cpu) / ac, 1.0), min((am - n.free_memory + memory) / am, 1.0)
                    out[n.name] = int((1 - abs(f_cpu - f_memory) / 2) * MAX_NODE_SCORE)
                else:
                    out[n.name] = MAX_NODE_SCORE  # one fraction or none: no deviation
                continue
            parts = [(ac - n.free_cpu + cpu, ac), (am - n.free_memory + memory, am)]
            parts += [(n.requested.get(name) + r, n.allocatable.get(name)) for name, r in asked]
            out[n.name] = int((1 - _deviation([min(req / alloc, 1.0) for req, alloc in parts if alloc])) * MAX_NODE_SCORE)
        return out, None


def _deviation(fractions: list[float]) -> float:
    """kube's: half the difference of two fractions, the standard deviation of more, 0 else."""
    if len(fractions) == 2:
        return abs(fractions[0] - fractions[1]) / 2
    if len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        return math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return 0.0
