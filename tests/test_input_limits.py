"""Damaged and hostile input files: each refused with exit 2, the file and field named, no
traceback, nothing run, in bounded time and memory (provider.yaml and workload files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nodemanager.cli import main
from nodemanager.documents import MAX_DEPTH, DocumentProblem, parse

REPO = Path(__file__).resolve().parent.parent
PROVIDER = REPO / "config" / "provider.yaml"
POD = "{containers: [{name: c, resources: {requests: {cpu: 100m}}}]}"
# 800 bytes that expand to 9^9 (387 million) strings if anything walks them.
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))


def simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str], workload: str | bytes, *extra: str) -> tuple[int, str]:
    path = tmp_path / "workload.yaml"
    path.write_bytes(workload if isinstance(workload, bytes) else workload.encode())
    code = main(["simulate", "--config", str(PROVIDER), "--workload", str(path), "--json", *extra])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.err


@pytest.mark.parametrize(
    ("workload", "needle"),
    [
        (f"pods: [{{name: a, at: .nan, pod: {POD}}}]", "pods[0].at: must be a finite duration"),
        (f"pods: [{{name: a, duration: .inf, pod: {POD}}}]", "pods[0].duration: must be a finite duration"),
        (f"pods: [{{name: a, at: 1.0e+12, pod: {POD}}}]", "pods[0].at: must be at most ten years"),
        (f"pods: [{{name: a, count: 10000000, pod: {POD}}}]", "pods[0].count: 10,000,000 more pods make more than 1,000,000"),
        ("pods: [{name: a, pod: {containers: []}}]", "pods[0].pod.spec.containers: at least one container is required"),
        ("pods: [{name: a, pod: {}}]", "pods[0].pod.spec.containers: at least one container is required"),
        (f"pods: [{{name: Bad_Name!!, pod: {POD}}}]", "pods[0].name: 'Bad_Name!!' is not a valid pod name"),
        (BOMB + f"pods: [{{name: a, pod: {POD}}}]", "expands to more than"),
        ("[" * (MAX_DEPTH + 50) + "]" * (MAX_DEPTH + 50), "nested too deeply"),
        ("kind: List\nitems: 5\n", "items: expected a list of Pods"),
        ("pods: [{name: a, pod: {metadata: true, spec: {containers: [{name: c}]}}}]", "pods[0].pod.metadata: expected a mapping, got bool"),  # found by fuzzing
        (f"pods: [{{name: a, count: 3, pod: {POD}}}, {{name: a-1, pod: {POD}}}]", "pods[1].name: makes pod default/a-1, which pods[0] makes too"),
        (f"pods: [{{name: a, pod: {POD}}}]\npods: []\n", "line 2: key 'pods' is given twice in one mapping (first on line 1)"),
    ],
)
def test_a_damaged_workload_is_refused_naming_the_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str], workload: str, needle: str) -> None:
    code, err = simulate(tmp_path, capsys, workload)
    assert code == 2
    assert str(tmp_path / "workload.yaml") in err
    assert needle in err


def test_bytes_that_are_not_utf8_are_reported_with_the_file_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = simulate(tmp_path, capsys, b"pods: [{name: caf\xe9, pod: {}}]\n")
    assert code == 2
    assert "workload.yaml" in err
    assert "not UTF-8 text (byte 0xe9 at offset 17)" in err


def test_the_pod_limit_can_be_raised_and_lowered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workload = f"pods: [{{name: a, count: 6, duration: 1m, pod: {POD}}}]"
    code, err = simulate(tmp_path, capsys, workload, "--max-pods", "5")
    assert code == 2
    assert "more than 5 in the workload (simulate --max-pods raises the limit)" in err
    code, _ = simulate(tmp_path, capsys, workload, "--max-pods", "6")
    assert code == 0


def test_pods_arriving_after_until_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = simulate(tmp_path, capsys, f"pods: [{{name: a, at: 2h, pod: {POD}}}]", "--until", "1h")
    assert code == 2
    assert "1 pod(s) arrive after --until 1h, e.g. default/a at 7200s" in err


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (BOMB + "pools: [{name: a}]\n", "expands to more than"),
        ("pools: [{name: a}]\nnodes: {bootTimeout: .nan}\n", "nodes.bootTimeout"),
        ("pools: [{name: a}]\nloops: {pool: .inf}\n", "loops.pool"),
        ("pools: [{name: a}]\nstatus: {listen: '127.0.0.1:99999'}\n", "status.listen: port must be 1-65535, got 99999"),
        ("pools: [{name: a, standby: [{count: 1000000000}]}]\n", "pools[0].standby[0].count: must be <= 10000"),
        ("pools: [{name: a}]\ncloud: {provider: simulated, simulated: {capacity: {'*': -1}}}\n", "cloud.simulated.capacity.*: must be >= 0"),
        ("pools: [{name: a}]\nnodes: {}\npools: [{name: b}]\n", "line 3: key 'pools' is given twice"),
        ("pools: [{name: a}]\ncolocation: {plugins: ['-BatchResource', Typo]}\n", "colocation.plugins[1]: unknown plugin 'Typo'"),
    ],
)
def test_a_damaged_provider_yaml_is_refused_by_check_config(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str) -> None:
    path = tmp_path / "provider.yaml"
    path.write_text(text)
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert str(path) in err
    assert needle in err


def test_a_file_over_the_size_limit_is_refused_without_reading_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "provider.yaml"
    with path.open("wb") as f:
        f.truncate(5 * 2**20)  # sparse: 5 MiB of nothing
    assert main(["check-config", str(path)]) == 2
    assert "5,242,880 bytes is more than the 4,194,304 allowed" in capsys.readouterr().err


def test_a_fifo_is_not_read_as_a_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Opening a FIFO for reading blocks until a writer comes: it must never be opened."""
    fifo = tmp_path / "provider.yaml"
    os.mkfifo(fifo)
    assert main(["check-config", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err


def test_aliases_within_the_limit_still_work() -> None:
    doc = parse("base: &b {cpu: 1}\npools: [{name: a, <<: *b}, {name: b, <<: *b}]\n")
    assert doc["pools"][1] == {"name": "b", "cpu": 1}
    with pytest.raises(DocumentProblem, match="expands to more than"):
        parse(BOMB)


def test_schema_and_scheduling_problems_come_in_one_round(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README promises every problem at once: a bad profile used to show only after
    every schema error was fixed."""
    path = tmp_path / "provider.yaml"
    path.write_text("pools: [{name: a, limits: {nodes: -1}}]\nscheduling: {filter: [NoSuchPlugin]}\n")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "pools[0].limits.nodes: must be >= 0" in err
    assert "scheduling.filter[0]: unknown plugin 'NoSuchPlugin'" in err


def test_schema_and_catalog_problems_come_in_one_round(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catalog problems (unknown types and zones) used to show only once every schema error
    was fixed: two rounds. What lies inside an object that had a key refused waits (it may
    come from the default put in its place)."""
    path = tmp_path / "provider.yaml"
    path.write_text(
        "loops: {pool: -1}\n"
        "nodes: {defaultInstanceType: m5.large}\n"
        "pools:\n"
        "  - {name: a, instanceTypes: [m5.large], standby: [{count: -1}]}\n"
        "  - {name: b, instanceTypes: [nope.*], zones: [mars-1a]}\n"
    )
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "loops.pool: must not be negative" in err
    assert "pools[0].standby[0].count: must be >= 0, got -1" in err
    assert "pools[1].instanceTypes[0]: 'nope.*' matches no instance type" in err
    assert "pools[1].zones[0]: unknown zone 'mars-1a'" in err
    assert "4 error(s)" in err
    path.write_text("pools: [{name: a, instanceTypes: [m5.large], standby: [{count: -1, instanceType: nope.large}]}]\n")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "1 error(s)" in err  # the standby list was refused: its type is checked once the count is right
