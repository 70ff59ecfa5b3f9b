"""Shared fixtures: the bundled catalog (loaded once) and small builders."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kube_stub import KubeStub

from cloud.catalog import Catalog
from nodemanager.clock import VirtualClock

KUBE_START = 1_800_000_000.0  # a realistic epoch: the API stub's timestamps and the clock agree


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return Catalog.bundled()


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(KUBE_START)


@pytest.fixture
def stub(clock: VirtualClock) -> Iterator[KubeStub]:
    """The Kubernetes API stub on 127.0.0.1, on the test's clock."""
    server = KubeStub(clock=clock.now).start()
    yield server
    server.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that wait minutes in real time first: one worker waits through them while the
    others take the rest (``make test``'s ``--dist worksteal`` moves its queue to them)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
