"""``simulate --plot``: a simulated run as one picture, drawn with matplotlib (an optional
dependency: ``pip install 'nodemanager[plot]'``): live nodes by instance type, pods
waiting, and the fleet's cost rate against the LP bound's rate."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from nodemanager.timeline import Timeline

TOP_TYPES = 8  # instance types drawn on their own; the rest are "other"


class PlotUnavailable(RuntimeError):
    pass


def plot(timeline: Timeline, path: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'nodemanager[plot]'") from None
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
    figure, (nodes, waiting, cost) = plt.subplots(3, 1, sharex=True, figsize=(11, 9), constrained_layout=True)
    figure.suptitle(title)
    if series:
        nodes.stackplot(hours, list(series.values()), labels=list(series), step="post")
        nodes.legend(loc="upper left", fontsize="small", ncol=3)
    nodes.set_ylabel("live nodes")
    waiting.step(hours, [s.waiting for s in samples], where="post", color="tab:red")
    waiting.set_ylabel("pods waiting")
    cost.step(hours, [s.cost_rate for s in samples], where="post", label="fleet $/h")
    cost.step(hours, [s.bound_rate for s in samples], where="post", label="LP bound $/h (pods running)")
    cost.set_ylabel("$ per hour")
    cost.set_xlabel("simulated hours")
    cost.legend(loc="upper left", fontsize="small")
    figure.savefig(path, dpi=100)
    plt.close(figure)
