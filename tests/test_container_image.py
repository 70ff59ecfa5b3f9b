"""deploy/Dockerfile, checked without a Docker engine (none runs here): parsed with
dockerfile-parse and held against the wheel pyproject.toml builds, the Makefile's image
target and the Deployment's security settings (runAsNonRoot, runAsUser, readOnlyRootFilesystem)."""

from __future__ import annotations

import fnmatch
import io
import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from dockerfile_parse import DockerfileParser

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def parsed() -> DockerfileParser:
    return DockerfileParser(fileobj=io.BytesIO(DOCKERFILE.read_bytes()))


def instructions() -> list[dict]:
    return parsed().structure


def stages() -> list[list[dict]]:
    """The instructions of each stage after its FROM (comments left out)."""
    out: list[list[dict]] = []
    for instruction in instructions():
        if instruction["instruction"] == "COMMENT":
            continue
        if instruction["instruction"] == "FROM":
            out.append([])
        elif not out:
            pytest.fail(f"{instruction['instruction']} before the first FROM")
        out[-1].append(instruction)
    return out


def values(stage: list[dict], name: str) -> list[str]:
    return [i["value"] for i in stage if i["instruction"] == name]


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def container() -> tuple[dict, dict]:
    (deployment,) = [d for d in yaml.safe_load_all((ROOT / "deploy/kubernetes/deployment.yaml").read_text()) if d and d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (main,) = pod["containers"]
    return pod, main


def test_both_stages_use_a_python_the_project_supports() -> None:
    images = parsed().parent_images
    assert len(images) == 2
    required = re.fullmatch(r">=(\d+)\.(\d+)", pyproject()["project"]["requires-python"])
    assert required is not None
    for image in images:
        found = re.fullmatch(r"python:(\d+)\.(\d+)-slim-\w+", image)
        assert found is not None, image  # a pinned minor version, not "latest"
        assert (int(found[1]), int(found[2])) >= (int(required[1]), int(required[2]))


def test_the_build_stage_copies_what_the_wheel_is_built_from_and_nothing_ignored() -> None:
    build, _ = stages()
    copied = [part for value in values(build, "COPY") for part in value.split()[:-1]]
    packages = pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    needed = {"pyproject.toml", "README.md", "constraints.txt", *(p.rstrip("*") for p in packages)}
    needed.add((ROOT / "nodemanager" / "shipped").resolve().name)  # the symlink's target ships in the wheel
    assert needed <= set(copied)
    ignored = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")]
    for source in copied:
        assert (ROOT / source).exists(), source
        assert not any(fnmatch.fnmatch(source, pattern) for pattern in ignored), source
    (wheel,) = [v for v in values(build, "RUN") if "pip wheel" in v]
    assert "--no-deps" in wheel  # the project only: dependencies come pinned in the final stage


def test_the_final_stage_installs_the_wheel_with_the_pinned_dependencies_and_no_sources() -> None:
    _, final = stages()
    copies = values(final, "COPY")
    assert copies
    assert all(c.startswith("--from=build ") for c in copies)  # only the build stage's products
    (install,) = [v for v in values(final, "RUN") if "pip install" in v]
    assert re.search(r"-c \S*constraints\.txt", install)
    assert re.search(r"\S*/nodemanager-\*\.whl", install)
    assert "--no-cache-dir" in install
    (entrypoint,) = values(final, "ENTRYPOINT")
    (script,) = json.loads(entrypoint)
    assert script in pyproject()["project"]["scripts"]


def test_the_image_suits_the_deployments_security_settings() -> None:
    pod, main = container()
    _, final = stages()
    (user,) = values(final, "USER")
    uid = user.split(":")[0]
    assert uid.isdigit()  # runAsNonRoot can only verify a numeric user
    assert int(uid) != 0
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(uid)
    assert main["securityContext"]["readOnlyRootFilesystem"] is True
    env = " ".join(values(final, "ENV"))
    assert re.search(r"PYTHONDONTWRITEBYTECODE=1", env)  # nothing written beside the code
    exposed = {int(p.split("/")[0]) for v in values(final, "EXPOSE") for p in v.split()}
    assert {p["containerPort"] for p in main["ports"]} <= exposed
    (cmd,) = values(final, "CMD")
    assert json.loads(cmd) == main["args"]  # the image's default is what the Deployment runs


def test_make_image_builds_the_image_the_deployment_names() -> None:
    _, main = container()
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^image:.*\n\t(.+)$", makefile, re.MULTILINE)
    assert target is not None
    assert "docker build -f deploy/Dockerfile" in target[1]
    assert re.search(r"^IMAGE \?= nodemanager:\$\(VERSION\)$", makefile, re.MULTILINE)
    assert main["image"] == f"nodemanager:{pyproject()['project']['version']}"
