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
  in the demand, so one dual price for the whole run is a bound for the integral), and at
  least the cheapest GPU-hour on sale in the component for each GPU-hour asked; the larger.

Pricing every pod at the cheapest offering of any pool (spot prices of a batch pool for
pods that may run only on-demand) made the bound a fraction of what any fleet could pay.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from nodemanager.model import Pod, PodKey, Resources
from nodemanager.model.resources import GPU_RESOURCES
from nodemanager.scaler.binpack import cheapest_per_type, shape_of
from nodemanager.scaler.lp import DualSolver
from nodemanager.scaler.pools import Candidate, PoolView
from nodemanager.scaler.usable import UsableOfferings, placement_key


def _gpus(requests: Resources) -> int:
    return sum(requests.get(name) for name in GPU_RESOURCES)


@dataclass
class _Component:
    cell: bool
    solver: DualSolver
    gpu_price: float  # the cheapest GPU-hour on sale in it (0: none)


class CostBound:
    def __init__(self, views: Sequence[PoolView], pods: Iterable[Pod]) -> None:
        self._pods: dict[PodKey, tuple[Pod, tuple]] = {}  # the workload's pods and their placements
        self._usable = UsableOfferings(views)
        parent = {v.name: v.name for v in views}

        def root(pool: str) -> str:
            while parent[pool] != pool:
                parent[pool] = parent[parent[pool]]
                pool = parent[pool]
            return pool

        for pod in pods:
            key = placement_key(pod)
            self._pods[pod.key] = (pod, key)
            if key in self._usable.found:
                continue
            pools = sorted({pool for pool, _ in self._usable.of(pod)})
            for pool in pools[1:]:
                parent[root(pool)] = root(pools[0])
        cells = {v.name: v.cell for v in views}
        members: dict[str, list[Candidate]] = {}
        for view in views:
            members.setdefault(root(view.name), []).extend(view.candidates)
        self._components = {
            name: _Component(all(cells[p] for p in parent if root(p) == name), _solver(cands), _gpu_price(cands)) for name, cands in members.items()
        }
        self._component_of = {key: root(found[0][0]) for key, found in self._usable.found.items() if found}
        self._cheapest: dict[tuple[tuple, Resources], float] = {}

    def _node_price(self, pod: Pod, placement: tuple) -> float:
        """The cheapest hourly price of an offering the pod may use that holds it (0: none)."""
        key = (placement, pod.requests)
        price = self._cheapest.get(key)
        if price is None:
            price = self._cheapest[key] = min((c.price for _, c in self._usable.found[placement] if pod.requests.fits(c.allocatable)), default=0.0)
        return price

    def usd(self, ran: Mapping[PodKey, float]) -> float:
        """The bound for pods that ran this many seconds each (pods of the workload only)."""
        cell_usd = 0.0
        totals: dict[str, list[float]] = {}  # component -> CPU-, memory-, GPU-seconds
        for key, seconds in ran.items():
            pod, placement = self._pods[key]
            component = self._component_of.get(placement)
            if component is None or seconds <= 0:
                continue  # no offering would take it: it never ran
            if self._components[component].cell:
                cell_usd += self._node_price(pod, placement) * seconds / 3600.0
                continue
            total = totals.setdefault(component, [0.0, 0.0, 0.0])
            total[0] += pod.requests.cpu * seconds
            total[1] += pod.requests.memory * seconds
            total[2] += _gpus(pod.requests) * seconds
        return cell_usd + sum(self._lp(self._components[c], *total) for c, total in totals.items()) / 3600.0

    def rate(self, running: Iterable[Pod]) -> float:
        """Per hour: the bound for these pods running now."""
        return self.usd({p.key: 3600.0 for p in running if p.key in self._pods})

    @staticmethod
    def _lp(component: _Component, cpu: float, memory: float, gpu: float) -> float:
        return max(component.solver.solve(round(cpu), round(memory)).bound, component.gpu_price * gpu)


def _solver(candidates: list[Candidate]) -> DualSolver:
    """The LP over the component's types, each at its cheapest offering in the component."""
    return DualSolver([shape_of(c) for c in cheapest_per_type(candidates)])


def _gpu_price(candidates: list[Candidate]) -> float:
    return min((c.price / c.itype.gpu_count for c in candidates if c.itype.gpu_count), default=0.0)
