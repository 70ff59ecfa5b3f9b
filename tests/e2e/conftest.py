"""The real control plane, one per Kubernetes version for the whole session (started in
seconds from the binaries' cache; built once, on a new machine, by ``controlplane/build.sh``),
started on first use."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import VERSIONS, ControlPlane


class Planes:
    def __init__(self, session: pytest.Session) -> None:
        self.session = session
        self.started: dict[str, ControlPlane] = {}
        self.failed_before = session.testsfailed

    def __getitem__(self, version: str) -> ControlPlane:
        if version not in self.started:
            made = ControlPlane(version, Path(tempfile.mkdtemp(prefix=f"nodemanager-e2e-{version}-")), scheduler=True)
            try:
                made.start()
            except Exception:
                made.stop(keep_logs=True)
                raise
            self.started[version] = made
        return self.started[version]

    def stop(self) -> None:
        keep = self.session.testsfailed > self.failed_before
        for version, made in self.started.items():
            made.stop(keep_logs=keep)
            if keep:
                print(f"\ncontrol plane {version}: logs kept in {made.root}")


@pytest.fixture(scope="session")
def planes(request: pytest.FixtureRequest) -> Iterator[Planes]:
    made = Planes(request.session)
    yield made
    made.stop()


@pytest.fixture(scope="session", params=VERSIONS, ids=[f"k8s-{v}" for v in VERSIONS])
def plane(request: pytest.FixtureRequest, planes: Planes) -> ControlPlane:
    return planes[request.param]
