"""Reading big workload files: YAML built from libyaml's events gives what PyYAML's safe
loader gives, JSON Lines workloads, and limits checked before pods are made."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from nodemanager.cluster import workload as workload_module
from nodemanager.cluster.workload import WorkloadError, load_workload_file, parse_workload
from nodemanager.documents import DocumentProblem, parse
from nodemanager.model import Pod
from nodemanager.model.quantity import InvalidQuantity, resource_amount

GPU_REQUEST = {"name": "g", "exactly": {"deviceClassName": "gpu.example.com"}}
APART = {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": "kubernetes.io/hostname"}
POD = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}]}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["yes", "no", "on", "~", "0x1f", "017", "1_000", "1:30", ".5", "2001-12-14", "<<", "-", "'q'", "null"]),
)
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(doc=documents, flow=st.booleans())
def test_a_yaml_document_reads_as_pyyamls_safe_loader_reads_it(doc: object, flow: bool) -> None:
    text = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True)
    if text.lstrip().startswith("{"):
        return  # (read as JSON)
    assert parse(text) == yaml.safe_load(text)


def test_anchors_aliases_and_merge_keys_read_as_pyyaml_reads_them() -> None:
    text = "base: &b {cpu: 1, m: 2}\nother: &o {cpu: 3, z: 4}\nlist: &l [1, 2]\nagain: *l\n"
    text += "pools: [{name: a, <<: *b}, {name: b, <<: [*b, *o], m: 9}, {<<: *o, <<: *b}]\n"
    assert parse(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("--- 1\n--- 2\n", "line 2: more than one document"),
        ("a: &r [1, *r]\n", "line 1: the alias *r refers to a value that contains it"),
        ("a: *nowhere\n", "the alias *nowhere is not defined"),
        ("a: !!set {x}\n", "the tag 'tag:yaml.org,2002:set' is not supported"),
        ("a: !custom 1\n", "the tag '!custom' is not supported"),
        ("? [1]\n: 2\n", "line 1: a mapping or a list used as a key"),
        ("a: {b: [1, " + "7" * 150 + "]}\n", "line 1: a.b[1]: a number of 150 digits"),
        ("a: 1\nb: {c: 1}\n1: x\n1.0: y\n", "line 4: key '1.0' is given twice in one mapping (first on line 3)"),
        ("a: {<<: [1, 2]}\n", "'<<' merges a mapping or a list of mappings"),
    ],
)
def test_what_the_reader_refuses_it_names_with_its_line(text: str, needle: str) -> None:
    with pytest.raises(DocumentProblem, match=None) as refused:
        parse(text)
    assert needle in str(refused.value)


def test_the_counts_are_added_up_before_any_pod_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    made = []
    real = Pod.from_manifest
    monkeypatch.setattr(workload_module.Pod, "from_manifest", lambda doc, where="pod": made.append(1) or real(doc, where))
    doc = {"pods": [{"name": "a", "count": 6, "pod": POD}, {"name": "b", "count": 6, "pod": POD}]}
    with pytest.raises(WorkloadError, match=r"pods\[1\]\.count: 6 more pods make more than 10 in the workload"):
        parse_workload(json.dumps(doc), max_pods=10)
    assert made == []


def test_the_pods_of_one_entry_are_those_read_one_by_one() -> None:
    pod = {
        "metadata": {"labels": {"app": "w"}, "annotations": {"nodemanager.io/capacity-type": "spot"}},
        "spec": {
            **POD,
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": "kubernetes.io/hostname"}
                    ]
                }
            },
        },
    }
    arrivals = parse_workload(json.dumps({"pods": [{"name": "w", "count": 3, "at": 5, "pod": pod}]}))
    for n, arrival in enumerate(arrivals):
        alone = parse_workload(json.dumps({"pods": [{"name": f"w-{n}", "at": 5, "pod": pod}]}))[0].pod
        assert arrival.pod.owner is not None
        assert arrival.pod.owner.name == "w"
        assert arrival.pod == replace(alone, owner=arrival.pod.owner)  # (an entry of one pod is its own group)
        assert (arrival.pod.key, arrival.pod.uid) == (f"default/w-{n}", f"default/w-{n}")


def test_pods_whose_claims_are_named_after_them_are_each_read(tmp_path: Path) -> None:
    doc = {
        "resourceClaimTemplates": [
            {"metadata": {"name": "gpu"}, "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}
        ],
        "pods": [{"name": "t", "count": 2, "pod": {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "gpu"}], **POD}}],
    }
    arrivals = parse_workload(json.dumps(doc))
    assert [a.pod.claims for a in arrivals] == [("default/t-0-g",), ("default/t-1-g",)]


def test_a_json_lines_workload_holds_one_entry_per_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    lines = [json.dumps({"name": f"j{i}", "at": i * 60, "duration": "10m", "pod": POD}) for i in range(3)]
    path.write_text(lines[0] + "\n\n" + "\n".join(lines[1:]) + "\n")
    arrivals = load_workload_file(path).arrivals
    assert [(a.pod.name, a.at, a.duration) for a in arrivals] == [("j0", 0, 600), ("j1", 60, 600), ("j2", 120, 600)]


def _line(name: str, **extra: object) -> str:
    return json.dumps({"name": name, "pod": POD, **extra})


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        (
            ['{"name": "a", "pod": ' + json.dumps(POD) + "}", '{"name": "a", "pod": ' + json.dumps(POD) + "}"],
            "[line 2].name: duplicate name 'a' (also [line 1])",
        ),
        (['{"name": "a", "pod": ' + json.dumps(POD) + "}", "", '{"name": "b", "count": 0, "pod": {}}'], "[line 3].count: must be an integer >= 1"),
        (['{"name": "a", "pod": ' + json.dumps(POD) + "}", "{not json"], "line 2, column 2: not valid JSON"),
        (
            ['{"name": "a", "count": 2, "pod": ' + json.dumps(POD) + "}", '{"name": "b", "count": 2, "pod": ' + json.dumps(POD) + "}", "{broken"],
            "[line 2].count: 2 more pods make more than 3",
        ),
    ],
)
def test_a_json_lines_problem_names_its_line(tmp_path: Path, lines: list[str], needle: str) -> None:
    """The last case stops at the line past the limit: the broken line after it is never read."""
    path = tmp_path / "w.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(WorkloadError) as refused:
        load_workload_file(path, max_pods=3)
    assert needle in str(refused.value)


def test_a_json_lines_file_of_stray_bytes_names_their_offset(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_bytes(b'{"name": "a"}\n{"name": "\xff"}\n')
    with pytest.raises(WorkloadError, match=r"byte 0xff at offset 24"):
        load_workload_file(path)


def test_a_remembered_amount_is_refused_under_another_type_and_names_each_field() -> None:
    assert resource_amount("cpu", 1) == 1000
    with pytest.raises(InvalidQuantity, match="first"):
        resource_amount("cpu", True, "first")
    with pytest.raises(InvalidQuantity, match="second"):
        resource_amount("cpu", "lots", "second")
    with pytest.raises(InvalidQuantity, match="third"):
        resource_amount("cpu", "lots", "third")
    assert (resource_amount("cpu", 1.5), resource_amount("memory", "1Ki")) == (1500, 1024)
