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


@dataclass(frozen=True, slots=True)
class Shape3:
    """An offering as the three-resource LP sees it: vCPU, GiB and GPUs (scaled so the
    three are of one order), and its price."""

    cpu: float
    memory: float
    gpus: float
    price: float


class DualSolver3:
    """The covering LP over CPU, memory and GPUs together, for a few types (a component's
    GPU types): its dual optimum is a vertex where three of the planes ``λ·a_t = p_t`` and
    ``λ_i = 0`` meet, so every triple is tried once and each ``solve`` is a scan of the
    feasible ones."""

    def __init__(self, shapes: Sequence[Shape3]) -> None:
        per_dollar = [(s.cpu / s.price, s.memory / s.price, s.gpus / s.price, s) for s in shapes if s.price > 0]
        # A type another gives at least as much of everything per dollar adds no constraint.
        kept = [
            a[3]
            for i, a in enumerate(per_dollar)
            if not any(b[0] >= a[0] and b[1] >= a[1] and b[2] >= a[2] and (b[:3] != a[:3] or j < i) for j, b in enumerate(per_dollar) if j != i)
        ]
        rows = [((s.cpu, s.memory, s.gpus), s.price) for s in kept]
        planes = [*rows, ((1.0, 0.0, 0.0), 0.0), ((0.0, 1.0, 0.0), 0.0), ((0.0, 0.0, 1.0), 0.0)]

        def feasible(lam: tuple[float, float, float]) -> bool:
            return min(lam) >= -1e-12 and all(a[0] * lam[0] + a[1] * lam[1] + a[2] * lam[2] <= p * (1 + 1e-9) + 1e-12 for a, p in rows)

        self.vertices: list[tuple[float, float, float]] = []
        for i, (a, p) in enumerate(planes):
            for j in range(i + 1, len(planes)):
                for k in range(j + 1, len(planes)):
                    lam = _solve3((a, planes[j][0], planes[k][0]), (p, planes[j][1], planes[k][1]))
                    if lam is not None and feasible(lam):
                        self.vertices.append(lam)

    def solve(self, cpu: float, memory: float, gpus: float) -> float:
        """The LP lower bound for covering this much of each (0: no type, or no demand)."""
        return max((lam[0] * cpu + lam[1] * memory + lam[2] * gpus for lam in self.vertices), default=0.0)


def _solve3(a: tuple[tuple[float, float, float], ...], b: tuple[float, float, float]) -> tuple[float, float, float] | None:
    """The solution of ``a · λ = b`` by Cramer's rule; None where ``a`` is singular."""

    def det(m: tuple[tuple[float, float, float], ...]) -> float:
        (a0, a1, a2), (b0, b1, b2), (c0, c1, c2) = m
        return a0 * (b1 * c2 - b2 * c1) - a1 * (b0 * c2 - b2 * c0) + a2 * (b0 * c1 - b1 * c0)

    d = det(a)
    if abs(d) < 1e-12:
        return None
    out = []
    for col in range(3):
        m = tuple(tuple(b[r] if c == col else a[r][c] for c in range(3)) for r in range(3))
        out.append(det(m) / d)  # type: ignore[arg-type]
    return (out[0], out[1], out[2])
