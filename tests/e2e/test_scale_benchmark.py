"""The scale benchmark (``benchmarks/e2e_scale.py``) kept working: a small burst onto a busy
cluster, every pod placed and its independent check passed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from controlplane import ControlPlane
from kubernetes import client
from world import api_client

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import e2e_scale

pytestmark = pytest.mark.e2e


def test_a_burst_onto_a_busy_cluster_is_placed_and_checked(plane: ControlPlane) -> None:
    report = e2e_scale.measure(plane, e2e_scale.Burst("scheduler", 30, 120, existing_nodes=3, existing_pods=30, settle=2))
    assert report["all_running"], report
    assert report["verified"], report["problems"]
    assert report["existing"] == {"nodes": 3, "pods": 30, "setup_seconds": report["existing"]["setup_seconds"]}  # type: ignore[index]
    assert report["bind_seconds"]["max"] < 120  # type: ignore[index]
    left = client.CoreV1Api(api_client(plane)).list_pod_for_all_namespaces(field_selector="spec.nodeName=").items
    assert not [p for p in left if p.metadata.namespace.startswith("scale-") and p.metadata.deletion_timestamp is None]  # none waits for a later test's nodes
