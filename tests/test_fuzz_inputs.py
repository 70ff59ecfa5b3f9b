"""Fuzzing the two files users write: whatever provider.yaml or workload file comes in,
``check-config`` and ``simulate`` end with exit 0 or exit 2 and a message naming the file,
never a traceback. Inputs are mutations of valid documents (a key dropped, a value swapped
for another type, a number pushed to an extreme, nesting added), which is where real
mistakes live."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodemanager.cli import main

REPO = Path(__file__).resolve().parent.parent
CONFIG = yaml.safe_load((REPO / "config" / "provider.yaml").read_text())
CONFIG["cluster"]["simulated"]["workload"] = str(REPO / "config" / "demo-workload.yaml")
WORKLOAD = {
    "pods": [
        {"name": "web", "count": 3, "at": "1m", "duration": "10m", "pod": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
        {"name": "job", "pod": {"metadata": {"labels": {"app": "job"}}, "spec": {"containers": [{"name": "c"}]}}},
    ],
    "nodeEvents": [{"at": "5m", "cordon": True}],
}

ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside ``doc``."""
    found = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += paths(v, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: dict) -> Any:
    doc = yaml.safe_load(yaml.safe_dump(base))
    for _ in range(draw(st.integers(1, 3))):
        candidates = paths(doc)
        if not candidates:
            break
        path = draw(st.sampled_from(candidates))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "drop", "nest"]))
        if action == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "nest":
            parent[path[-1]] = [parent[path[-1]]]
        else:
            parent[path[-1]] = draw(ODD_VALUES)
    return doc


def outcome(capsys: pytest.CaptureFixture[str], argv: list[str], path: Path) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code in (0, 2), err
    assert "Traceback" not in err
    if code == 2:
        assert str(path) in err or path.name in err, err


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutated(CONFIG))
def test_check_config_ends_in_exit_0_or_2_whatever_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: Any) -> None:
    path = tmp_path / "provider.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    outcome(capsys, ["check-config", str(path)], path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutated(WORKLOAD))
def test_simulate_ends_in_exit_0_or_2_whatever_the_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: Any) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    outcome(capsys, ["simulate", "--config", str(REPO / "config" / "provider.yaml"), "--workload", str(path), "--json", "--until", "30m"], path)
