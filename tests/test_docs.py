"""The docs a user reads: the configuration reference generated from the schema, and the
README's quick start, followed word for word."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_cli_service import wait_for

from nodemanager.config.reference import blocks, markdown

REPO = Path(__file__).resolve().parent.parent


def test_every_setting_of_the_schema_is_described():
    """The configuration page is written from the fields' docstrings: one without is a
    setting no user can look up."""
    missing = [f"{path or '(top level)'}.{info.alias or name}" for path, model in blocks() for name, info in model.model_fields.items() if not info.description]
    assert missing == []


def test_the_reference_has_a_row_for_every_key_of_every_block():
    text = markdown()
    sections = dict(re.findall(r"^## `?([^`\n]+)`?\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S))
    for path, model in blocks():
        table = sections[path or "Top level"]
        for name, info in model.model_fields.items():
            assert f"`{info.alias or name}`" in table, (path, name)
    assert "| `bootTimeout` | duration | `5m` |" in text
    assert "| `volumeSize` | byte quantity | `20Gi` |" in text
    assert "| `region` | string | required |" in text
    assert "| `imageFamily` | `AL2023` \\| `AL2` \\| `Bottlerocket` \\| `Custom` | none |" in text  # unset: the image's
    assert '| [`budgets`](#poolsdisruptionbudgets) | list of block | `[{"nodes": "10%", "reasons": []}]` |' in text


def test_the_docs_hook_refuses_a_configuration_page_without_its_marker():
    import importlib.util

    spec = importlib.util.spec_from_file_location("hook", REPO / "docs" / "hooks" / "configuration_reference.py")
    assert spec is not None
    assert spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = type("Page", (), {"file": type("File", (), {"src_uri": "configuration.md"})()})()
    assert "## `pools[]`" in hook.on_page_markdown("# Configuration\n\n<!-- reference -->\n", page)
    with pytest.raises(ValueError, match="marker"):
        hook.on_page_markdown("# Configuration\n", page)


def quick_start() -> list[list[str]]:
    """The shell blocks of the README's "Quick start" section, as lists of commands."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return [[line for line in block.splitlines() if line.strip()] for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S)]


def test_the_readme_stays_short():
    assert len((REPO / "README.md").read_text().splitlines()) <= 300


@pytest.mark.heavy
def test_the_readme_quick_start_word_for_word():
    """`make run`, then each command the README shows while it runs, from the repository
    as a user runs them: every one exits 0 and prints something."""
    first, then = quick_start()
    assert first == ["make run"]
    assert len(then) >= 4
    proc = subprocess.Popen(["make", "run"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        try:
            wait_for("http://127.0.0.1:8080/readyz", time.monotonic() + 120)
        except AssertionError:
            proc.terminate()
            raise AssertionError(f"make run did not get ready: {proc.communicate(timeout=10)[1][-2000:]}") from None
        for command in then:
            done = subprocess.run(
                ["bash", "-c", command], check=False, cwd=REPO, capture_output=True, text=True, timeout=120, env=os.environ | {"NO_COLOR": "1"}
            )
            assert done.returncode == 0, (command, done.stderr[-2000:])
            assert done.stdout.strip(), command
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def test_the_readme_example_configuration_is_valid(tmp_path):
    from nodemanager.config import parse_config

    (example,) = re.findall(r"```yaml\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    config, _ = parse_config(example, "README.md", tmp_path)
    assert config.cloud.aws is not None
    assert config.cloud.aws.eks is not None
    assert config.cloud.aws.eks.name == "prod"


def test_the_architecture_page_names_modules_that_exist_and_a_pod_s_path_in_at_most_eight_steps():
    """A newcomer opens the files the page names: each must exist, and the path of a pod from
    its arrival to its bind is a numbered list of at most eight steps."""
    import re

    page = (REPO / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`((?:nodemanager|cloud)/[\w/]+\.py)`", page))
    assert len(named) >= 8
    assert [p for p in sorted(named) if not (REPO / p).is_file()] == []
    path = page.split("## A pod arrives", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^(\d+)\. ", path, re.M)
    assert 1 <= len(steps) <= 8
    assert all(re.search(r"`(?:nodemanager|cloud)/[\w/]+\.py`", step) for step in re.split(r"^\d+\. ", path, flags=re.M)[1:])
