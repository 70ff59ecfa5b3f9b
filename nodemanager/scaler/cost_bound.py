"""A lower bound on what any fleet must pay to run a workload (the simulation's yardstick).

Each pod may run only on the offerings whose nodes its node selector, required node
affinity, tolerations and placement annotations (type, capacity type, zone) accept; its
inter-pod constraints, ports and volumes only narrow that further, so leaving them out
keeps the bound a bound. Pools that one kind of pod may use are joined into a component;
components share no node and no pod, so the bound is the sum of theirs:

* **cell pools only**: a pod holds a node of its own while it runs, so it costs at least
  the cheapest offering it may use that holds it, for as long as it runs;
* **otherwise**: the LP of ``kind_lp.py`` over the component's offerings, each kind of pod
  (its requests and the offerings it may use) covered by offerings that hold it whole, for
  its pod-hours in the run (the LP's optimum is convex and positively homogeneous in the
  demand, so the optimum for the run's total is at most the sum of each instant's).

Pricing every pod at the cheapest offering of any pool (spot prices of a batch pool for
pods that may run only on-demand) made the bound a fraction of what any fleet could pay.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from nodemanager.model import Pod, PodKey, Resources
from nodemanager.scaler import kind_lp
from nodemanager.scaler.kind_lp import Column, Kind
from nodemanager.scaler.pools import Candidate, PoolView
from nodemanager.scaler.usable import UsableOfferings, placement_key

HOLDERS_KEPT = 100_000  # node prices kept for the pods a node holds (each a few hundred bytes); past it they are found again


@dataclass(frozen=True)
class Reserved:
    """Reserved instances a fleet had at no cost: of one type, for ``seconds`` instance-seconds
    in all, usable by ``pools``; ``price`` is the type's on-demand price."""

    pools: tuple[str, ...]
    instance_type: str
    seconds: float
    price: float


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
        self._cell = {root(v.name): all(w.cell for w in views if root(w.name) == root(v.name)) for v in views}
        self._component_of = {key: root(found[0][0]) for key, found in self._usable.found.items() if found}
        self._pool_component = {v.name: root(v.name) for v in views}
        self._views = {v.name: v for v in views}
        self._columns: list[Column] = []  # the bin-pack components' offerings, each (type, price, allocatable) once
        self._column_of: dict[tuple[str, float, Resources], int] = {}
        self._eligible: dict[tuple[Resources, tuple], frozenset[int]] = {}  # a shape -> the columns it may use
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
        given ``reserved`` capacity at no cost: free columns of the LP for the node-hours
        reserved (in a cell component, their price off its cost: a pod on one saves its own
        node, which costs no more than the reserved type)."""
        return self._bound(ran, reserved)[0]

    def prices(self, ran: Mapping[PodKey, float]) -> dict[int, float]:
        """The bound's price of an hour of each pod alike (by ``shape_of``): its LP's dual
        price, or in a cell component its node's. Pods running, priced so, cost no more than
        their own bound at any instant (weak duality), and over the run add up to ``usd``
        (reserved capacity left out: its free hours would make the prices of one demand's)."""
        return self._bound(ran, ())[1]

    def shape_of(self, key: PodKey) -> int | None:
        """An id shared by the workload's pods alike (None: not of the workload)."""
        shape = self._pods.get(key)
        return None if shape is None else id(shape)

    def _bound(self, ran: Mapping[PodKey, float], reserved: Sequence[Reserved]) -> tuple[float, dict[int, float]]:
        cell_usd, demand, cells = self._demand(ran)
        prices = {id(shape): self._node_price(*shape) for shape in cells}
        base = {shape: self._columns_of(shape) for shapes in demand.values() for shape in shapes}  # (before the reserved columns go after them)
        extra: list[Column] = []
        granted: dict[tuple[Resources, tuple], set[int]] = {}
        for r in reserved:
            for pool in r.pools:
                component = self._pool_component.get(pool)
                if component is None:
                    continue
                if self._cell[component]:
                    if component in cell_usd:
                        cell_usd[component] = max(0.0, cell_usd[component] - r.price * r.seconds / 3600.0)
                    continue
                found = next((c for c in self._views[pool].candidates if c.itype.name == r.instance_type), None)
                if found is None or component not in demand:
                    continue
                column = len(self._columns) + len(extra)
                extra.append(Column(found.allocatable, 0.0, r.seconds / 3600.0))
                for shape in demand[component]:
                    requests, placement = shape
                    if requests.fits(found.allocatable) and any(p == pool and c.itype.name == r.instance_type for p, c in self._usable.found[placement]):
                        granted.setdefault(shape, set()).add(column)
        columns = [*self._columns, *extra]
        total = sum(cell_usd.values())
        for shapes in demand.values():
            kinds = {shape: Kind(shape[0], base[shape] | granted.get(shape, frozenset())) for shape in shapes}
            hours: dict[Kind, float] = {}
            for shape, seconds in shapes.items():
                hours[kinds[shape]] = hours.get(kinds[shape], 0.0) + seconds / 3600.0
            usd, duals = _solve(columns, hours)
            total += usd
            prices.update((id(shape), duals.get(kind, 0.0)) for shape, kind in kinds.items())
        return total, prices

    def rate(self, running: Iterable[Pod]) -> float:
        """Per hour: the bound for these pods running now."""
        return self.usd({p.key: 3600.0 for p in running if p.key in self._pods})

    def _demand(self, ran: Mapping[PodKey, float]) -> tuple[dict[str, float], dict[str, dict[tuple[Resources, tuple], float]], list[tuple[Resources, tuple]]]:
        """The cell components' bound, the others' pod-seconds of each shape, and the cell
        components' shapes."""
        cell_usd: dict[str, float] = {}
        seconds_of: dict[int, float] = {}  # by the shape's id: (pods alike share one shape)
        shape_of: dict[int, tuple[Resources, tuple]] = {}
        for key, seconds in ran.items():
            if seconds > 0:
                shape = self._pods[key]
                n = id(shape)
                if n in seconds_of:
                    seconds_of[n] += seconds
                else:
                    seconds_of[n], shape_of[n] = seconds, shape
        demand: dict[str, dict[tuple[Resources, tuple], float]] = {}
        cells = []
        for n, seconds in seconds_of.items():
            requests, placement = shape = shape_of[n]
            component = self._component_of.get(placement)
            if component is None:
                continue  # no offering would take it: it never ran
            if self._cell[component]:
                cell_usd[component] = cell_usd.get(component, 0.0) + self._node_price(requests, placement) * seconds / 3600.0
                cells.append(shape)
            else:
                demand.setdefault(component, {})[shape] = seconds
        return cell_usd, demand, cells

    def _columns_of(self, shape: tuple[Resources, tuple]) -> frozenset[int]:
        """The columns pods of this shape may use, each an offering that holds one."""
        found = self._eligible.get(shape)
        if found is None:
            requests, placement = shape
            out = set()
            for _, c in self._usable.found[placement]:
                if requests.fits(c.allocatable):
                    key = (c.itype.name, c.price, c.allocatable)
                    if (column := self._column_of.get(key)) is None:
                        column = self._column_of[key] = len(self._columns)
                        self._columns.append(Column(c.allocatable, c.price))
                    out.add(column)
            found = self._eligible[shape] = frozenset(out)
        return found


def _solve(columns: Sequence[Column], demand: Mapping[Kind, float]) -> tuple[float, dict[Kind, float]]:
    """The LP's optimum for ``demand``, its kinds merged where they are too many for one LP,
    and each kind's dual price (its merged kind's)."""
    into = kind_lp.merged(demand)
    merged: dict[Kind, float] = {}
    for kind, hours in demand.items():
        merged[into[kind]] = merged.get(into[kind], 0.0) + hours
    solution = kind_lp.solve(columns, merged)
    return solution.usd, {kind: solution.prices.get(into[kind], 0.0) for kind in demand}
