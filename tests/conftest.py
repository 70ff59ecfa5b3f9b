"""Shared fixtures: the bundled catalog (loaded once) and small builders."""

from __future__ import annotations

import pytest

from cloud.catalog import Catalog


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return Catalog.bundled()
