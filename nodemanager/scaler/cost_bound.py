"""A lower bound on what any fleet must pay to run a workload (the simulation's yardstick).

Each pod may run only on the offerings whose nodes its node selector, required node
affinity, tolerations and placement annotations (type, capacity type, zone) accept; its
inter-pod constraints, ports and volumes only narrow that further, so leaving them out
keeps the bound a bound. Pools that one kind of pod may use are joined into a component;
components share no node and no pod, so the bound is the sum of theirs:

* **cell pools only**: a pod holds a node of its own while it runs, so it costs at least
  the cheapest offering it may use that holds it, for as long as it runs;
* **otherwise**: the LP bound of the component's total CPU- and memory-seconds over its
  offerings (at every instant the fleet holds the running pods, and the LP bound is convex
  and positively homogeneous in the demand, so the bound of the integral is at most the
  integral of the bounds); and the three-resource LP of the GPU pods' CPU-, memory- and
  GPU-seconds over the component's GPU offerings (a GPU pod runs only where GPUs are, and
  an instance's CPU and memory come with its GPUs); the larger.

Each offering counts in the LPs only for what the component's pods could use of it: none
of it if no pod of theirs fits it, and no more CPU than its memory brings at the most CPU
per byte any of them that fit asks (nor more memory than its CPU brings), nor more than
its pod slots times the most any of them asks. A fleet's node never holds more of the
pods' requests than that, so the bound stays a bound; without it a t3.nano, which holds
none of them, sold its two vCPU at a tenth of any usable price.

Pricing every pod at the cheapest offering of any pool (spot prices of a batch pool for
pods that may run only on-demand) made the bound a fraction of what any fleet could pay.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from nodemanager.model import Pod, PodKey, Resources
from nodemanager.model.resources import GPU_RESOURCES
from nodemanager.scaler.binpack import cheapest_per_type
from nodemanager.scaler.lp import DualSolver, DualSolver3, Shape, Shape3
from nodemanager.scaler.pools import Candidate, PoolView
from nodemanager.scaler.usable import UsableOfferings, placement_key


def _gpus(requests: Resources) -> int:
    return sum(requests.get(name) for name in GPU_RESOURCES)


GIB = float(2**30)
HOLDERS_KEPT = 100_000  # node prices kept for the pods a node holds (each a few hundred bytes); past it they are found again


@dataclass(frozen=True)
class Reserved:
    """Reserved instances a fleet had at no cost: of one type, for ``seconds`` instance-seconds
    in all, usable by ``pools``; ``price`` is the type's on-demand price."""

    pools: tuple[str, ...]
    instance_type: str
    seconds: float
    price: float


@dataclass
class _Component:
    cell: bool
    solver: DualSolver
    gpu_solver: DualSolver3  # its GPU offerings, for its GPU pods


class CostBound:
    def __init__(self, views: Sequence[PoolView], pods: Iterable[Pod] = (), keyed: Iterable[tuple[PodKey, Pod]] = ()) -> None:
        """The bound for ``pods``, and for the pods of ``keyed`` (each key with a pod alike but
        for its name: a workload's copies, never made)."""
        # The workload's pods: each one's requests and placement (a pair shared by the pods
        # alike in both: millions of pods hold a few pairs, not their Pods)
        self._pods: dict[PodKey, tuple[Resources, tuple]] = {}
        shapes: dict[tuple[Resources, tuple], tuple[Resources, tuple]] = {}
        self._usable = UsableOfferings(views)
        parent = {v.name: v.name for v in views}

        def root(pool: str) -> str:
            while parent[pool] != pool:
                parent[pool] = parent[parent[pool]]
                pool = parent[pool]
            return pool

        last: Pod | None = None
        for name, pod in itertools.chain(((p.key, p) for p in pods), keyed):
            if pod is not last:  # (copies come one after another: each pod once)
                last, key = pod, placement_key(pod)
                shape = shapes.setdefault((pod.requests, key), (pod.requests, key))
                if key not in self._usable.found:
                    pools = sorted({pool for pool, _ in self._usable.of(pod)})
                    for pool in pools[1:]:
                        parent[root(pool)] = root(pools[0])
            self._pods[name] = shape
        cells = {v.name: v.cell for v in views}
        members: dict[str, list[Candidate]] = {}
        for view in views:
            members.setdefault(root(view.name), []).extend(view.candidates)
        kinds: dict[str, set[Resources]] = {}  # component -> the requests of its pods
        for requests, key in shapes:
            if found := self._usable.found.get(key):
                kinds.setdefault(root(found[0][0]), set()).add(requests)
        self._components = {
            name: _Component(all(cells[p] for p in parent if root(p) == name), *_solvers(cands, kinds.get(name, set()))) for name, cands in members.items()
        }
        self._component_of = {key: root(found[0][0]) for key, found in self._usable.found.items() if found}
        self._pool_component = {v.name: root(v.name) for v in views}
        self._kinds = kinds
        self._views = {v.name: v for v in views}
        self._cheapest: dict[tuple[tuple, Resources], float] = {}
        self._holders: dict[tuple[frozenset[tuple], Resources, int], float | None] = {}
        self._shared: dict[frozenset[tuple], list[Candidate]] = {}  # placements -> the offerings all may use, cheapest first

    def _node_price(self, requests: Resources, placement: tuple) -> float:
        """The cheapest hourly price of an offering a pod of this placement may use that holds it (0: none)."""
        key = (placement, requests)
        price = self._cheapest.get(key)
        if price is None:
            price = self._cheapest[key] = min((c.price for _, c in self._usable.found[placement] if requests.fits(c.allocatable)), default=0.0)
        return price

    def holder_price(self, pods: Sequence[Pod]) -> float | None:
        """The cheapest hourly price of an offering every one of ``pods`` may use whose node
        would hold them all together (None: none would, or one is not of the workload)."""
        placements = []
        for pod in pods:
            found = self._pods.get(pod.key)
            if found is None:
                return None
            placements.append(found[1])
        total, count, together = Resources.total(p.requests for p in pods), len(pods), frozenset(placements)
        key = (together, total, count)
        if key not in self._holders:
            if len(self._holders) >= HOLDERS_KEPT:
                self._holders.clear()  # (a long run meets ever new totals: the memory stays bounded)
            shared = self._shared.get(together)
            if shared is None:
                shared = self._shared[together] = sorted((c for _, c in self._usable.shared(pods)), key=lambda c: c.price)
            self._holders[key] = next((c.price for c in shared if total.fits(c.allocatable) and not 0 < c.allocatable.pods < count), None)
        return self._holders[key]

    def usd(self, ran: Mapping[PodKey, float], reserved: Sequence[Reserved] = ()) -> float:
        """The bound for pods that ran this many seconds each (pods of the workload only),
        given ``reserved`` capacity at no cost (see ``_take_reserved``)."""
        cell_usd: dict[str, float] = {}
        totals: dict[str, list[float]] = {}  # component -> CPU-, memory-, GPU-seconds
        for key, seconds in ran.items():
            requests, placement = self._pods[key]
            component = self._component_of.get(placement)
            if component is None or seconds <= 0:
                continue  # no offering would take it: it never ran
            if self._components[component].cell:
                cell_usd[component] = cell_usd.get(component, 0.0) + self._node_price(requests, placement) * seconds / 3600.0
                continue
            total = totals.setdefault(component, [0.0, 0.0, 0.0, 0.0, 0.0])
            total[0] += requests.cpu * seconds
            total[1] += requests.memory * seconds
            if gpus := _gpus(requests):  # what must be on GPU offerings
                total[2] += gpus * seconds
                total[3] += requests.cpu * seconds
                total[4] += requests.memory * seconds
        for r in reserved:
            self._take_reserved(r, cell_usd, totals)
        return sum(cell_usd.values()) + sum(self._lp(self._components[c], total) for c, total in totals.items()) / 3600.0

    def _take_reserved(self, r: Reserved, cell_usd: dict[str, float], totals: dict[str, list[float]]) -> None:
        """Reserved instances, free, taken off what their pool's component must buy: in a
        bin-pack component, what its pods could use of them (``usable_shape``) off its CPU-,
        memory- and GPU-seconds (the LP of the rest bounds any fleet's cost for what they did
        not hold); in a cell component, their price off its cost (a pod on one saves its own
        node, which costs no more than the reserved type). Time is summed as the demand's is:
        a relaxation, so the bound stays a bound (a reservation several components may use
        is taken off each)."""
        for pool in r.pools:
            view, component = self._views.get(pool), self._pool_component.get(pool)
            if view is None or component is None:
                continue
            if self._components[component].cell:
                if component in cell_usd:
                    cell_usd[component] = max(0.0, cell_usd[component] - r.price * r.seconds / 3600.0)
                continue
            total = totals.get(component)
            found = next((c for c in view.candidates if c.itype.name == r.instance_type), None)
            shape = usable_shape(found, self._kinds.get(component, set())) if found is not None else None
            if total is None or shape is None:
                continue
            total[0] = max(0.0, total[0] - shape.cpu * r.seconds)
            total[1] = max(0.0, total[1] - shape.memory * r.seconds)
            if gpus := found.itype.gpu_count:  # (found: a shape was made of it)
                total[2] = max(0.0, total[2] - gpus * r.seconds)
                total[3] = max(0.0, total[3] - shape.cpu * r.seconds)
                total[4] = max(0.0, total[4] - shape.memory * r.seconds)

    def rate(self, running: Iterable[Pod]) -> float:
        """Per hour: the bound for these pods running now."""
        return self.usd({p.key: 3600.0 for p in running if p.key in self._pods})

    @staticmethod
    def _lp(component: _Component, total: list[float]) -> float:
        """The bound for a component's CPU-, memory- and GPU-seconds, and its GPU pods' CPU- and memory-seconds."""
        cpu, memory, gpu, gpu_cpu, gpu_memory = total
        bound = component.solver.solve(round(cpu), round(memory)).bound
        return max(bound, component.gpu_solver.solve(gpu_cpu / 1000.0, gpu_memory / GIB, gpu)) if gpu else bound


def _solvers(candidates: list[Candidate], kinds: set[Resources]) -> tuple[DualSolver, DualSolver3]:
    """The LPs over the component's types, each at its cheapest offering in the component and
    counted for what the pods could use of it: all its pods on every type, its GPU pods on
    its GPU types."""
    cheapest = cheapest_per_type(candidates)
    gpu_kinds = [k for k in kinds if _gpus(k)]
    shapes = [shape for c in cheapest if (shape := usable_shape(c, kinds)) is not None]
    gpu_shapes = [
        Shape3(shape.cpu / 1000.0, shape.memory / GIB, float(c.itype.gpu_count), shape.price)
        for c in cheapest
        if c.itype.gpu_count and (shape := usable_shape(c, gpu_kinds)) is not None
    ]
    return DualSolver(shapes), DualSolver3(gpu_shapes)


def usable_shape(candidate: Candidate, kinds: Iterable[Resources]) -> Shape | None:
    """What pods of these requests could use of the offering at most (None: none fits it)."""
    alloc = candidate.allocatable
    fit = [k for k in kinds if k.fits(alloc)]
    if not fit:
        return None
    cpu, memory = alloc.cpu, alloc.memory
    if all(k.memory > 0 for k in fit):
        cpu = min(cpu, math.ceil(memory * max(k.cpu / k.memory for k in fit)))
    if all(k.cpu > 0 for k in fit):
        memory = min(memory, math.ceil(alloc.cpu * max(k.memory / k.cpu for k in fit)))
    if (slots := alloc.pods) > 0:
        cpu, memory = min(cpu, slots * max(k.cpu for k in fit)), min(memory, slots * max(k.memory for k in fit))
    return Shape(candidate.offering.instance_type, cpu, memory, candidate.price)
