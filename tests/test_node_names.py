"""Node names over a controller's life: a name used again, by a node planned long after
the first went, boots an instance of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodemanager.cluster.workload import parse_workload
from nodemanager.config import parse_config
from nodemanager.simulator import Simulation

CONFIG = """
controllerId: names
cloud: {provider: simulated, simulated: {bootDelay: 40s, seed: 1}}
cluster: {source: simulated, simulated: {registerDelay: 20s}}
pools:
  - name: general
    instanceTypes: ["m5.*", "c5.*"]
    capacityTypes: [on-demand, spot]
    packing: cell
"""
POD = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}


def test_a_node_named_as_one_long_gone_boots_an_instance_of_its_own(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """With two hex digits to a name, the nodes of a cell pool soon take names used before: each
    still launches its own instance (a boot token of the name alone got back the old one,
    terminated, and the node was replaced as vanished)."""
    from nodemanager.scaler import run

    monkeypatch.setattr(run, "NODE_NAME_DIGITS", 2)
    config, catalog = parse_config(CONFIG, "cells", Path("."))
    doc = {"pods": [{"name": f"c{i}", "at": i * 600, "duration": 120, "pod": POD} for i in range(40)]}
    sim = Simulation(config, catalog, parse_workload(json.dumps(doc), "cells"), clairvoyant=False)
    report = sim.run(until=8 * 3600.0)
    launched = [e for e in sim.cloud.events if e.kind == "launched"]
    assert "gone from the cloud" not in caplog.text
    assert report["pods"]["bound"] == 40
    assert report["nodes"]["booted"] == len(launched) == len({e.instance_id for e in launched})
    assert len({e.node_name for e in launched}) < len(launched)  # (names were used again)
