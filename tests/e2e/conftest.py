"""The real control plane, one per Kubernetes version for the whole session (started in
seconds from the binaries' cache; built once, on a new machine, by ``controlplane/build.sh``)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import VERSIONS, ControlPlane


@pytest.fixture(scope="session", params=VERSIONS, ids=[f"k8s-{v}" for v in VERSIONS])
def plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    root = Path(tempfile.mkdtemp(prefix=f"nodemanager-e2e-{request.param}-"))
    made = ControlPlane(request.param, root, scheduler=True)
    try:
        made.start()
    except Exception:
        made.stop(keep_logs=True)
        raise
    failed_before = request.session.testsfailed
    yield made
    keep = request.session.testsfailed > failed_before
    made.stop(keep_logs=keep)
    if keep:
        print(f"\ncontrol plane {request.param}: logs kept in {root}")
