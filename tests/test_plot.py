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


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--compare", str(PROVIDER), str(PROVIDER), "--plot", "x.png"], "--plot draws one run"),
        (["--config", str(PROVIDER), "--plot", "/no/such/dir/x.png"], "--plot: no such directory"),
    ],
)
def test_plot_refuses_what_it_cannot_draw(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], needle: str) -> None:
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    assert main(["simulate", "--workload", str(tmp_path / "w.yaml"), *extra]) == 2
    assert needle in capsys.readouterr().err


def test_the_timeline_stays_bounded_however_long_the_run() -> None:
    timeline = Timeline(interval=60)
    at = 0.0
    for _ in range(10 * MAX_SAMPLES):
        if timeline.due(at):
            timeline.add(Sample(at, Counter({"m5.large": 1}), 0, 0.1, 0.05))
        at += 60
    assert len(timeline.samples) <= MAX_SAMPLES
    assert timeline.interval > 60
    assert timeline.samples[0].at == 0
    assert timeline.samples[-1].at > 0.9 * at - timeline.interval  # still covers the whole run
