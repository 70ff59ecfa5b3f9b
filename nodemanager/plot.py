"""``simulate --plot``: simulated runs as one picture, drawn with matplotlib (an optional
dependency: ``pip install 'nodemanager[plot]'``).

One run: live nodes by instance type, live nodes by pool against each pool's node limit,
pods waiting, the fleet's cost rate against the LP bound's rate, and where the cost went. Several (``--compare``):
one line per configuration in each panel (all nodes, pods waiting, cost rate), the bound's
rate once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from nodemanager.config.schema import ProviderConfig
from nodemanager.cost_breakdown import LABELS
from nodemanager.timeline import Timeline

TOP_TYPES = 8  # instance types drawn on their own; the rest are "other"


class PlotUnavailable(RuntimeError):
    pass


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'nodemanager[plot]'") from None
    return plt


def plot(timeline: Timeline, config: ProviderConfig, path: Path, title: str, breakdown: dict[str, float]) -> None:
    plt = _pyplot()
    samples = timeline.samples
    hours = [s.at / 3600 for s in samples]
    totals: Counter[str] = Counter()
    for s in samples:
        totals.update(s.nodes)
    top = [t for t, _ in totals.most_common(TOP_TYPES)]
    series = {t: [s.nodes.get(t, 0) for s in samples] for t in top}
    other = [sum(n for t, n in s.nodes.items() if t not in top) for s in samples]
    if any(other):
        series["other"] = other
    figure = plt.figure(figsize=(11, 13), constrained_layout=True)
    grid = figure.add_gridspec(5, 1, height_ratios=[3, 3, 3, 3, 2])
    nodes = figure.add_subplot(grid[0])
    pools, waiting, cost = (figure.add_subplot(grid[i], sharex=nodes) for i in (1, 2, 3))
    figure.suptitle(title)
    if series:
        nodes.stackplot(hours, list(series.values()), labels=list(series), step="post")
        nodes.legend(loc="upper left", fontsize="small", ncol=3)
    nodes.set_ylabel("live nodes by type")
    for pool in config.pools:
        line = pools.step(hours, [s.pools.get(pool.name, 0) for s in samples], where="post", label=pool.name)[0]
        if pool.limits.nodes is not None:
            pools.axhline(pool.limits.nodes, color=line.get_color(), linestyle="--", linewidth=1, label=f"{pool.name} limit")
    pools.set_ylabel("live nodes by pool")
    pools.legend(loc="upper left", fontsize="small", ncol=4)
    waiting.step(hours, [s.waiting for s in samples], where="post", color="tab:red")
    waiting.set_ylabel("pods waiting")
    cost.step(hours, [s.cost_rate for s in samples], where="post", label="fleet $/h")
    cost.step(hours, [s.bound_rate for s in samples], where="post", label="LP bound $/h (pods running)")
    cost.set_ylabel("$ per hour")
    cost.set_xlabel("simulated hours")
    cost.legend(loc="upper left", fontsize="small")
    _where_it_went(figure.add_subplot(grid[4]), breakdown)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _where_it_went(axes: Any, breakdown: dict[str, float]) -> None:
    """The cost's parts as one bar (a refund, below zero, is left out of it and named)."""
    left = 0.0
    for part, usd in breakdown.items():
        if usd > 0:
            axes.barh(0, usd, left=left, label=f"${usd:,.2f} {LABELS[part]}")
            left += usd
    refunded = -breakdown.get("refunded", 0.0)
    axes.set_yticks([])
    axes.set_xlabel("where the cost went, $" + (f" (less ${refunded:,.2f} refunded)" if refunded > 0 else ""))
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.45), fontsize="small", ncol=2)


def plot_compare(runs: list[tuple[str, Timeline]], path: Path, title: str) -> None:
    """Each configuration's run of the same workload, one line each."""
    plt = _pyplot()
    figure, (nodes, waiting, cost) = plt.subplots(3, 1, sharex=True, figsize=(11, 9), constrained_layout=True)
    figure.suptitle(title)
    for label, timeline in runs:
        hours = [s.at / 3600 for s in timeline.samples]
        nodes.step(hours, [sum(s.nodes.values()) for s in timeline.samples], where="post", label=label)
        waiting.step(hours, [s.waiting for s in timeline.samples], where="post", label=label)
        cost.step(hours, [s.cost_rate for s in timeline.samples], where="post", label=f"{label} $/h")
    first = runs[0][1].samples
    cost.step([s.at / 3600 for s in first], [s.bound_rate for s in first], where="post", color="black", linestyle=":", label="LP bound $/h (first run's pods)")
    nodes.set_ylabel("live nodes")
    waiting.set_ylabel("pods waiting")
    cost.set_ylabel("$ per hour")
    cost.set_xlabel("simulated hours")
    for axes in (nodes, waiting, cost):
        axes.legend(loc="upper left", fontsize="small")
    figure.savefig(path, dpi=100)
    plt.close(figure)
