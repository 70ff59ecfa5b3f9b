"""``simulate --plot``: the picture is drawn from a bounded timeline of the run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from nodemanager.cli import main
from nodemanager.timeline import MAX_SAMPLES, Sample, Timeline

REPO = Path(__file__).resolve().parent.parent
PROVIDER = REPO / "config" / "provider.yaml"
WORKLOAD = "pods: [{name: job, count: 3, duration: 20m, pod: {containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}}]\n"


def test_a_run_is_drawn_to_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    picture = tmp_path / "day.png"
    code = main(["simulate", "--config", str(PROVIDER), "--workload", str(tmp_path / "w.yaml"), "--plot", str(picture), "--quiet"])
    assert code == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ended:       settled" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "needle"), [(["--config", str(PROVIDER), "--plot", "/no/such/dir/x.png"], "--plot: no such directory")])
def test_plot_refuses_what_it_cannot_draw(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], needle: str) -> None:
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    assert main(["simulate", "--workload", str(tmp_path / "w.yaml"), *extra]) == 2
    assert needle in capsys.readouterr().err


def test_the_timeline_stays_bounded_however_long_the_run() -> None:
    timeline = Timeline(interval=60)
    at = 0.0
    for _ in range(10 * MAX_SAMPLES):
        if timeline.due(at):
            timeline.add(Sample(at, Counter({"m5.large": 1}), Counter({"general": 1}), 0, 0.1, 0.05))
        at += 60
    assert len(timeline.samples) <= MAX_SAMPLES
    assert timeline.interval > 60
    assert timeline.samples[0].at == 0
    assert timeline.samples[-1].at > 0.9 * at - timeline.interval  # still covers the whole run


def test_compared_runs_are_drawn_in_one_picture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--plot with --compare was refused: one figure now, a line per configuration."""
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    picture = tmp_path / "both.png"
    assert main(["simulate", "--compare", str(PROVIDER), str(PROVIDER), "--workload", str(tmp_path / "w.yaml"), "--plot", str(picture), "--quiet"]) == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert capsys.readouterr().out.count("provider.yaml") == 2


def test_the_timeline_follows_each_decision_and_each_pool() -> None:
    """Sampled once a minute, waits shorter than a minute did not show, nor the pools."""
    from nodemanager.cluster.workload import parse_workload
    from nodemanager.config import load_config
    from nodemanager.simulator import Simulation

    config, catalog = load_config(str(PROVIDER))
    simulation = Simulation(config, catalog, parse_workload(WORKLOAD, "w.yaml"), timeline=True)
    simulation.run()
    timeline = simulation.timeline
    assert timeline is not None
    assert timeline.interval == config.loops.pool
    steps = {round(b.at - a.at, 3) for a, b in zip(timeline.samples, timeline.samples[1:], strict=False)}
    assert min(steps) <= config.loops.pool
    assert max(s.pools["general"] for s in timeline.samples) >= 1
    assert all(sum(s.pools.values()) == sum(s.nodes.values()) for s in timeline.samples)


def test_the_bound_line_never_exceeds_the_running_pods_bound_and_adds_up_to_the_reports() -> None:
    """The plot's bound rate is the pods running at the dual prices of the run's bound: at
    each sample no more than an LP of those pods alone, and over the run (each sample held
    until the next) the report's bound. Solved for every sample, the LP took longer than the
    run (a 10,000-pod day: 20 s, and 25 s more with --plot)."""
    import itertools
    import json

    from nodemanager.cluster.workload import parse_workload
    from nodemanager.config import load_config
    from nodemanager.simulator import Simulation

    shapes = [("250m", "512Mi"), ("2", "1Gi"), ("500m", "6Gi")]
    pods = [
        {
            "name": f"g{i}",
            "count": 4 + i,
            "at": f"{i * 300}s",
            "duration": f"{1800 + 600 * (i % 3)}s",
            "pod": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        }
        for i, (cpu, memory) in enumerate(shapes * 3)
    ]
    config, catalog = load_config(str(PROVIDER))
    simulation = Simulation(config, catalog, parse_workload(json.dumps({"pods": pods}), "w.json"), timeline=True)
    report = simulation.run()
    samples = simulation.timeline.samples
    by_shape = {simulation.bound.shape_of(key): key for key in simulation.cluster.ran()}
    for sample in samples[::7]:  # (an LP each)
        running = {by_shape[shape]: 3600.0 * n for shape, n in sample.running.items()}
        own = simulation.bound.usd(running) if running else 0.0
        assert sample.bound_rate <= own * (1 + 1e-6) + 1e-9
    held = sum(a.bound_rate * (b.at - a.at) for a, b in itertools.pairwise(samples)) / 3600
    assert held == pytest.approx(report["cost"]["lower_bound_usd"], rel=0.05)
