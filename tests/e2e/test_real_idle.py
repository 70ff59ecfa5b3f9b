"""Ten minutes of real time with nothing to do: the service, against each real API server at
once, says nothing alarming. Idle watches end at the server's timeout and are opened again,
the Lease is renewed, the nodes' Leases come and go: none of it is an outage, a relist
storm, a warning or a change to the fleet.

Marked ``slow``: it waits in real time (``NODEMANAGER_IDLE_SECONDS``, 600 unless set), started
first by the suite so that it waits while the other tests run."""

from __future__ import annotations

import logging
import os
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from conftest import Planes
from controlplane import VERSIONS, free_port
from kubernetes import client
from test_kubernetes_service import eventually
from world import Registrar, api_client, apply_shipped, new_namespace

from cloud.catalog import Catalog
from nodemanager.config.load import parse_config
from nodemanager.service import Service

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

IDLE = float(os.environ.get("NODEMANAGER_IDLE_SECONDS", "600"))

CONFIG = """
controllerId: idle-{version}
cloud: {{provider: simulated, simulated: {{bootDelay: 0.5s}}}}
cluster:
  source: kubernetes
  kubernetes:
    mode: scheduler
    kubeconfig: {kubeconfig}
    leaderElection: {{leaseName: {lease}}}
pools: [{{name: general, instanceTypes: [m5.large, m5.xlarge]}}]
status: {{listen: "127.0.0.1:{port}"}}
"""


def _get(port: int, path: str) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
        return reply.status


def test_ten_idle_minutes_pass_without_a_warning_a_relist_or_a_change(planes: Planes, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def alarms() -> list[str]:  # every record at WARNING or above, from any logger (ours, the client's, urllib3's)
        return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]

    services: dict[str, tuple[Service, Registrar, int, str]] = {}
    try:
        for version in VERSIONS:
            plane = planes[version]
            core = client.CoreV1Api(api_client(plane))
            apply_shipped(api_client(plane), "namespace.yaml")  # where the status ConfigMap goes
            namespace = f"idle-{uuid.uuid4().hex[:8]}"
            new_namespace(core, namespace)
            port = free_port()
            text = CONFIG.format(version=version.replace(".", "-"), kubeconfig=plane.kubeconfig(), lease=f"idle-{uuid.uuid4().hex[:6]}", port=port)
            config, catalog = parse_config(text, "provider.yaml", tmp_path)
            assert isinstance(catalog, Catalog)
            service = Service(config, catalog, f"idle-{version}")
            services[version] = (service, Registrar(plane, service.cloud, service.catalog), port, namespace)
            service.start()
            spec = {"schedulerName": "nodemanager", "containers": [{"name": "c", "image": "c:1", "resources": {"requests": {"cpu": "500m"}}}]}
            for name in ("one", "two"):
                core.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": spec})

        def placed() -> bool:
            for version, (_, registrar, _, namespace) in services.items():
                registrar.step()
                pods = client.CoreV1Api(api_client(planes[version])).list_namespaced_pod(namespace).items
                if not all(p.spec.node_name and p.status.phase == "Running" for p in pods):
                    return False
            return True

        eventually(placed, 120)
        fleets = {v: s.cloud.list_instances() for v, (s, *_) in services.items()}
        relists = {v: {k: r.relists for k, r in s.cluster.reflectors.items()} for v, (s, *_) in services.items()}
        caplog.clear()  # from here on, nothing happens
        began = time.monotonic()
        while time.monotonic() - began < IDLE:
            for version, (_, registrar, port, _) in services.items():
                registrar.step()
                assert _get(port, "/readyz") == 200, f"{version}: not ready after {time.monotonic() - began:.0f} s idle"
            assert not alarms(), f"after {time.monotonic() - began:.0f} s idle: {alarms()}"
            time.sleep(5)
        for version, (service, *_) in services.items():
            assert service.cloud.list_instances() == fleets[version]  # nothing booted, nothing stopped
            assert service.reachability is not None
            assert service.reachability.describe()["outages"] == 0
            assert {k: r.relists for k, r in service.cluster.reflectors.items()} == relists[version], f"{version}: an idle watch was listed again"
            assert service.elector is not None
            assert service.elector.leading()
    finally:
        for version, (service, registrar, _, namespace) in services.items():
            service.stop()
            registrar.remove_all()
            client.CoreV1Api(api_client(planes[version])).delete_namespace(namespace)
