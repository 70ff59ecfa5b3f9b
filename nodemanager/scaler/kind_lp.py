"""The covering LP of kinds of pods over the offerings each kind may use, solved by HiGHS'
interior point method (scipy; its dual simplex took ten times as long on 100,000 pairs): the
simulation's lower bound on cost (``cost_bound.py``).

    minimise    sum_o price_o * x_o
    subject to  sum_o y_ko = demand_k                  each kind k (pod-hours)
                sum_k (r_kj / cap_oj) * y_ko <= x_o    each offering o and resource j (pod slots among them)
                0 <= x_o <= hours_o (reserved capacity: free, so many node-hours), y >= 0,
                y_ko only where kind k may use offering o and fits one of its nodes.

Any fleet is a solution: at every instant its nodes of each offering (x) and the pods each
holds (y) meet the constraints for the pods running then, and the constraints are linear,
so their integral over a run meets them for the run's pod-hours. No fleet pays less than
the optimum.

A pod is never split over offerings that could not hold it whole: an 8-GPU pod is priced at
an 8-GPU instance, not at eight of the cheapest one-GPU instances, and its CPU and memory
come with the node that holds its GPUs. One LP over the pods' total CPU and memory (what
the packer's ``lp.py`` solves in microseconds) has no such tie and was half the cost of any
fleet on GPU workloads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from nodemanager.model import Resources
from nodemanager.model.resources import PODS

METHODS = ("highs-ipm", "highs-ds")  # the interior point method first; should it stop short (numerical trouble), the dual simplex
PAIRS_MAX = 100_000  # (kind, offering) pairs an LP holds at most (about 4 s): past it, kinds are merged (see ``merged``)


@dataclass(frozen=True, slots=True)
class Column:
    """An offering as the LP sees it."""

    capacity: Resources  # what one node of it holds (pod slots as "pods"; none listed: no limit)
    price: float  # per hour
    hours: float | None = None  # node-hours there are at most (None: as many as bought)


@dataclass(frozen=True, slots=True)
class Kind:
    """Pods alike for the LP: their requests and the columns they may use (each holds one)."""

    requests: Resources
    columns: frozenset[int]


def merged(kinds: Iterable[Kind], pairs_max: int = PAIRS_MAX) -> dict[Kind, Kind]:
    """Each kind, and the kind it is merged into so that the (kind, column) pairs are at most
    ``pairs_max`` (itself when they are already): requests rounded down to fewer significant
    bits, and the columns of the kinds that then meet taken together; at the last, one kind
    of the least of each request and every column. A smaller pod that may use more offerings
    costs no fleet more, so the optimum of the merged LP is still a bound."""
    kinds = list(kinds)
    into = {kind: kind for kind in kinds}
    for bits in (6, 4, 2, 1):
        if _pairs(into) <= pairs_max:
            return into
        rounded = {kind: Resources({name: _top_bits(amount, bits) for name, amount in kind.requests.items()}) for kind in kinds}
        columns: dict[Resources, set[int]] = {}
        for kind, requests in rounded.items():
            columns.setdefault(requests, set()).update(kind.columns)
        made = {requests: Kind(requests, frozenset(union)) for requests, union in columns.items()}
        into = {kind: made[requests] for kind, requests in rounded.items()}
    if _pairs(into) > pairs_max:
        names = set().union(*(k.requests.names() for k in kinds))
        one = Kind(Resources({name: min(k.requests.get(name) for k in kinds) for name in names}), frozenset().union(*(k.columns for k in kinds)))
        into = dict.fromkeys(kinds, one)
    return into


def _pairs(into: Mapping[Kind, Kind]) -> int:
    return sum(len(k.columns) for k in set(into.values()))


def _top_bits(amount: int, bits: int) -> int:
    """``amount`` rounded down to its ``bits`` most significant bits."""
    drop = max(amount.bit_length() - bits, 0)
    return (amount >> drop) << drop


@dataclass(frozen=True)
class Solution:
    usd: float  # the optimum
    prices: Mapping[Kind, float]  # each kind's dual, $ a pod-hour: any demand priced so costs no more than its optimum (weak duality)


def solve(columns: Sequence[Column], demand: Mapping[Kind, float]) -> Solution:
    """The LP's optimum for ``demand`` (pod-hours of each kind; kinds that may use no column
    are left out: no fleet ran them), and its dual prices."""
    kinds = [k for k, hours in demand.items() if hours > 0 and k.columns]
    if not kinds:
        return Solution(0.0, {})
    # (imported here: scipy adds 0.4 s and about 50 MB to a process, which only a bound needs)
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    used = _undominated(columns, kinds)
    pairs = [(i, o) for i, kind in enumerate(kinds) for o in sorted(kind.columns) if o in used]
    x_of = {o: len(pairs) + n for n, o in enumerate(sorted(used))}
    variables = len(pairs) + len(x_of)
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    ub_rows = 0
    rows_of: dict[tuple[int, str], int] = {}  # (column, resource) -> its capacity row
    for v, (i, o) in enumerate(pairs):
        capacity = columns[o].capacity
        for name, amount in (*kinds[i].requests.items(), (PODS, 1)):
            cap = capacity.get(name)
            if amount <= 0 or cap <= 0:
                continue  # (a kind that fits a column needs nothing the column lacks; no pod slots listed: no limit)
            row = rows_of.get((o, name))
            if row is None:
                row = rows_of[(o, name)] = ub_rows
                ub_rows += 1
                rows.append(row)
                cols.append(x_of[o])
                values.append(-1.0)
            rows.append(row)
            cols.append(v)
            values.append(amount / cap)
    a_ub = coo_matrix((values, (rows, cols)), shape=(ub_rows, variables)).tocsr()
    a_eq = coo_matrix(([1.0] * len(pairs), ([i for i, _ in pairs], range(len(pairs)))), shape=(len(kinds), variables)).tocsr()
    price = np.zeros(variables)
    bounds = [(0.0, None)] * variables
    for o, x in x_of.items():
        price[x] = columns[o].price
        bounds[x] = (0.0, columns[o].hours)
    b_eq = [demand[k] for k in kinds]
    for method in METHODS:
        result = linprog(price, A_ub=a_ub, b_ub=np.zeros(ub_rows), A_eq=a_eq, b_eq=b_eq, bounds=bounds, method=method)
        if result.status == 0:
            return Solution(max(float(result.fun), 0.0), {k: max(float(u), 0.0) for k, u in zip(kinds, result.eqlin.marginals, strict=True)})
    # (feasible and bounded by construction: every kind has a column with no limit on its hours)
    raise ArithmeticError(f"the cost bound's LP did not solve: {result.message}")


def _undominated(columns: Sequence[Column], kinds: Sequence[Kind]) -> set[int]:
    """The columns worth a variable: of those with the same capacity, unlimited hours and the
    same kinds that may use them, the cheapest (an offering's zones and capacity types)."""
    users: dict[int, list[int]] = {}
    for i, kind in enumerate(kinds):
        for o in kind.columns:
            users.setdefault(o, []).append(i)
    best: dict[tuple, int] = {}
    kept = set()
    for o, who in users.items():
        column = columns[o]
        if column.hours is not None:
            kept.add(o)
            continue
        key = (column.capacity, tuple(who))
        if key not in best or column.price < columns[best[key]].price:
            best[key] = o
    return kept | set(best.values())
