"""Two replicas of the service, in real time, against the real API server: one leads and
acts, the other follows; a stop hands the Lease over and the follower takes the work on."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from controlplane import ControlPlane, free_port
from kubernetes import client
from test_kubernetes_service import eventually
from world import Registrar, api_client, apply_shipped, new_namespace

from cloud.catalog import Catalog
from nodemanager.config.load import parse_config
from nodemanager.service import Service

pytestmark = pytest.mark.e2e

CONFIG = """
controllerId: {name}
cloud: {{provider: simulated, simulated: {{bootDelay: 0.5s}}}}
cluster:
  source: kubernetes
  kubernetes:
    mode: scheduler
    kubeconfig: {kubeconfig}
    leaderElection: {{leaseName: {lease}, leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 0.5s}}
nodes: {{idleGrace: 60s}}
pools: [{{name: cells, packing: cell, instanceTypes: [m5.large]}}]
loops: {{pool: 0.5s, heartbeat: 1s, reaper: 1s, orphanGC: 30s}}
status: {{listen: "127.0.0.1:{port}"}}
"""


def test_two_replicas_one_leads_and_a_stop_hands_over(plane: ControlPlane, tmp_path: Path) -> None:
    core = client.CoreV1Api(api_client(plane))
    apply_shipped(api_client(plane), "namespace.yaml")  # where the status ConfigMap goes
    namespace = f"lead-{uuid.uuid4().hex[:8]}"
    new_namespace(core, namespace)
    lease = f"nodemanager-{uuid.uuid4().hex[:6]}"
    replicas = []
    for name in ("first", "second"):
        text = CONFIG.format(name="lead", kubeconfig=plane.kubeconfig(), lease=lease, port=free_port())
        config, catalog = parse_config(text, "provider.yaml", tmp_path)
        assert isinstance(catalog, Catalog)
        replicas.append(Service(config, catalog, name))
    first, second = replicas
    registrars = [Registrar(plane, r.cloud, r.catalog) for r in replicas]

    def placed(count: int) -> Callable[[], bool]:
        def check() -> bool:
            for registrar in registrars:
                registrar.step()
            pods = core.list_namespaced_pod(namespace).items
            return len(pods) == count and all(p.spec.node_name for p in pods)

        return check

    def pod(name: str) -> None:
        spec = {"schedulerName": "nodemanager", "containers": [{"name": "c", "image": "c:1", "resources": {"requests": {"cpu": "500m"}}}]}
        core.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": spec})

    first.start()
    try:
        eventually(lambda: first.elector and first.elector.leading(), 60)
        second.start()
        pod("one")
        eventually(placed(1), 60)
        assert second.elector is not None
        assert not second.elector.leading()
        assert second.cloud.list_instances() == []  # the follower never acted
        assert first.stop() is True  # releases the Lease
        eventually(second.elector.leading, 10)  # at its next try, not after leaseDuration
        pod("two")
        eventually(placed(2), 60)
        assert len(second.cloud.list_instances()) == 1
    finally:
        second.stop()
        if not first.stopped.is_set():
            first.stop()
        for registrar in registrars:
            registrar.remove_all()
        core.delete_namespace(namespace)
    held = client.CoordinationV1Api(api_client(plane)).read_namespaced_lease(lease, "nodemanager")
    assert not held.spec.holder_identity  # released on stop
