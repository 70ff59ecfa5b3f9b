"""benchmarks/corpus.py's two ways of playing a sweep: processes of this machine, and Ray tasks
(the ``sweep`` extra) on a local Ray instance, which must give the same rows."""

from __future__ import annotations

import pytest
from bench_modules import load_benchmark

pytestmark = pytest.mark.heavy


def test_ray_tasks_play_the_corpus_as_the_process_pool_does() -> None:
    pytest.importorskip("ray", reason="the sweep extra (make test installs it)")
    corpus = load_benchmark("corpus")  # (loaded under another name than its own: its code must still reach Ray's workers)
    cases = [("gpu", 1), ("base", 2)]
    timeless = lambda rows: [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]  # noqa: E731
    by_processes = corpus.play_all(cases, jobs=2)
    by_ray = corpus.play_all(cases, jobs=2, engine="ray")
    assert [(r["class"], r["seed"]) for r in by_ray] == cases
    assert timeless(by_ray) == timeless(by_processes)
    assert all(not r["problems"] and r["ended"] == "settled" for r in by_ray)


def test_a_ray_address_needs_the_ray_engine(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = load_benchmark("corpus")
    monkeypatch.setattr("sys.argv", ["corpus.py", "--ray-address", "auto"])
    with pytest.raises(SystemExit) as exited:
        corpus.main()
    assert exited.value.code == 2
    assert "--ray-address needs --engine ray" in capsys.readouterr().err
