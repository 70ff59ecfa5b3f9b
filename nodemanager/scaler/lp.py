"""The two-resource covering LP behind cost-aware bin packing.

    minimise  sum(price_t * x_t)  subject to  sum(cpu_t * x_t) >= C,  sum(mem_t * x_t) >= M,  x >= 0

Its optimum is the cheapest *fractional* fleet for a set of pods: a lower bound no real
packing can beat. Its dual prices (lambda_cpu, lambda_mem) value a pod at
``lambda_cpu * cpu + lambda_mem * mem``; a node whose packed pods are worth nearly its
price is as good as the LP allows. With two constraints the dual optimum is a vertex of
at most two types' constraints, so a small exact enumeration solves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Shape:
    name: str
    cpu: int  # allocatable milli-cores
    memory: int  # allocatable bytes
    price: float  # per hour


@dataclass(frozen=True, slots=True)
class Duals:
    cpu: float  # price per milli-core-hour
    memory: float  # price per byte-hour
    bound: float  # the LP optimum for the demand it was solved for

    def value(self, cpu: int, memory: int) -> float:
        return self.cpu * cpu + self.memory * memory


def _frontier(shapes: Sequence[Shape]) -> list[Shape]:
    """Types not dominated on both price per cpu and price per memory."""
    usable = [s for s in shapes if s.cpu > 0 and s.memory > 0 and s.price > 0]
    usable.sort(key=lambda s: (s.price / s.cpu, s.price / s.memory, s.name))
    out: list[Shape] = []
    best_mem = float("inf")
    for s in usable:
        per_mem = s.price / s.memory
        if per_mem < best_mem:
            out.append(s)
            best_mem = per_mem
    return out


class DualSolver:
    """The LP for one set of types, for any demand: the dual feasible region does not depend
    on the demand, so its vertices are found once and each ``solve`` is a scan of them."""

    def __init__(self, shapes: Sequence[Shape]) -> None:
        frontier = _frontier(shapes)

        def feasible(lc: float, lm: float) -> bool:
            return lc >= 0 and lm >= 0 and all(lc * s.cpu + lm * s.memory <= s.price * (1 + 1e-12) for s in frontier)

        candidates = [(min(s.price / s.cpu for s in frontier), 0.0), (0.0, min(s.price / s.memory for s in frontier))] if frontier else []
        for i, a in enumerate(frontier):
            for b in frontier[i + 1 :]:
                det = a.cpu * b.memory - a.memory * b.cpu
                if det:
                    lc = (a.price * b.memory - a.memory * b.price) / det
                    lm = (a.cpu * b.price - a.price * b.cpu) / det
                    candidates.append((lc, lm))
        self.vertices = [(lc, lm) for lc, lm in candidates if feasible(lc, lm)]

    def solve(self, cpu: int, memory: int) -> Duals:
        """Dual prices and the LP lower bound for covering ``cpu`` and ``memory``."""
        if not self.vertices or (cpu <= 0 and memory <= 0):
            return Duals(0.0, 0.0, 0.0)
        best = max((lc * cpu + lm * memory, lc, lm) for lc, lm in self.vertices)
        return Duals(best[1], best[2], best[0])
