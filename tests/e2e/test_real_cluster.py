"""nodemanager against a real control plane (kube-apiserver, kube-controller-manager,
kube-scheduler, etcd; kwok as the kubelets), on the oldest and newest Kubernetes versions.

Real seconds pass here (each wait bounded); the Deployments, ReplicaSets, DaemonSets and
their pods are made by the real controllers, the cordon taint by the real node lifecycle
controller, and in provisioner mode every bind is the real kube-scheduler's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import ControlPlane
from kubernetes import client, utils
from world import World, api_client

from cloud.catalog import Catalog
from nodemanager.config import parse_config

pytestmark = pytest.mark.e2e

PROVIDER = """
apiVersion: nodemanager/v1
controllerId: e2e
cluster: {{source: kubernetes, kubernetes: {{mode: {mode}}}}}
nodes: {{idleGrace: 5s, bootTimeout: 120s}}
pools:
  - {{name: general, zones: [us-east-1a, us-east-1b, us-east-1c], instanceTypes: ["m5.*", "c5.*"], disruption: {{consolidateAfter: 2s}}}}
  - {{name: gpu, packing: cell, instanceTypes: ["g5.*"], taints: [{{key: nvidia.com/gpu, value: "true", effect: NoSchedule}}]}}
"""


@pytest.fixture
def namespace(plane: ControlPlane) -> Iterator[str]:
    core = client.CoreV1Api(api_client(plane))
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def world(plane: ControlPlane, mode: str, tmp_path: Path, token: str | None = None) -> World:
    config, catalog = parse_config(PROVIDER.format(mode=mode), "provider.yaml", tmp_path)
    assert isinstance(catalog, Catalog)
    return World(plane, config, catalog, token=token)


def deployment(name: str, replicas: int, *, scheduler: str = "nodemanager", spread: bool = False) -> dict:
    spec: dict = {
        "schedulerName": scheduler,
        "containers": [{"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if spread:
        spec["topologySpreadConstraints"] = [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": name}}}
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}}, "spec": spec}},
    }


def running(w: World, namespace: str, count: int) -> bool:
    pods = [p for p in w.pods(namespace).values() if p.metadata.deletion_timestamp is None]
    return len(pods) == count and all(p.status.phase == "Running" and p.spec.node_name for p in pods)


DAEMONSET = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "agent"},
    "spec": {
        "selector": {"matchLabels": {"app": "agent"}},
        "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {
                "containers": [{"name": "agent", "image": "agent:1", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
                "tolerations": [{"operator": "Exists"}],
            },
        },
    },
}


def test_scheduler_mode_places_a_deployment_and_lets_idle_nodes_go(plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    """The pods of a real Deployment get nodes and run; the real DaemonSet controller's pods
    (pinned by node affinity, bound by kube-scheduler) run on every node and keep none."""
    w = world(plane, "scheduler", tmp_path)
    apps = client.AppsV1Api(api_client(plane))
    try:
        apps.create_namespaced_daemon_set(namespace, DAEMONSET)
        apps.create_namespaced_deployment(namespace, deployment("web", 3))

        def settled() -> bool:
            pods = [p for p in w.pods(namespace).values() if p.metadata.deletion_timestamp is None]
            nodes = set(w.registrar.names.values())
            agents = {p.spec.node_name for p in pods if p.metadata.name.startswith("agent") and p.status.phase == "Running"}
            return running(w, namespace, 3 + len(nodes)) and agents == nodes

        assert w.run_until(settled, 90), w.controller.status()["pods"]
        nodes = {p.spec.node_name for p in w.pods(namespace).values() if p.metadata.name.startswith("web")}
        assert nodes <= set(w.registrar.names.values())
        booted = len(w.live_instances())
        assert 1 <= booted <= 3
        apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 0}})
        assert w.run_until(lambda: not w.live_instances(), 90), w.controller.status()["nodes"]
        assert all(p.metadata.name.startswith("agent") for p in w.pods(namespace).values())  # (being deleted with their nodes)
    finally:
        w.close()


def test_the_shipped_rbac_allows_every_call_the_controller_makes(plane: ControlPlane, namespace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """deploy/kubernetes/rbac.yaml, applied as is; nodemanager runs with a token of its
    ServiceAccount: pods placed, bound and their nodes labelled, events written, idle nodes
    drained and deleted, without one 403."""
    admin = api_client(plane)
    repo = Path(__file__).resolve().parents[2]
    for manifest in ("namespace.yaml", "rbac.yaml"):
        utils.create_from_yaml(admin, str(repo / "deploy" / "kubernetes" / manifest))
    token = client.CoreV1Api(admin).create_namespaced_service_account_token("nodemanager", "nodemanager", {"spec": {"expirationSeconds": 3600}})
    w = world(plane, "scheduler", tmp_path, token=token.status.token)
    apps = client.AppsV1Api(admin)
    try:
        with caplog.at_level("INFO", logger="nodemanager"):
            apps.create_namespaced_deployment(namespace, deployment("web", 2))
            assert w.run_until(lambda: running(w, namespace, 2), 90), w.controller.status()["pods"]
            apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 0}})
            assert w.run_until(lambda: not w.live_instances(), 90)
        refused = [r.getMessage() for r in caplog.records if "403" in r.getMessage() or "Forbidden" in r.getMessage() or "forbidden" in r.getMessage()]
        assert refused == []
    finally:
        w.close()


def test_a_cordon_the_real_lifecycle_controller_taints_is_never_drift(plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    """Cordoned on a real 1.32 control plane, a node was drained and terminated 21 s later."""
    w = world(plane, "scheduler", tmp_path)
    apps = client.AppsV1Api(api_client(plane))
    try:
        apps.create_namespaced_deployment(namespace, deployment("web", 1))
        assert w.run_until(lambda: running(w, namespace, 1), 90)
        [instance] = w.live_instances()
        [node] = {p.spec.node_name for p in w.pods(namespace).values()}
        w.core.patch_node(node, {"spec": {"unschedulable": True}})  # kubectl cordon

        def tainted() -> bool:
            return any(t.key == "node.kubernetes.io/unschedulable" for t in w.core.read_node(node).spec.taints or [])

        assert w.run_until(tainted, 30)  # the node lifecycle controller's answer
        w.run_for(20)
        assert w.live_instances() == [instance]
        assert not w.controller.disruption.summary()
        assert list(w.controller.operator_held.values()) == ["cordoned: an operator has the node"]
    finally:
        w.close()


def test_provisioner_mode_boots_only_what_kube_scheduler_then_uses(plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    """The spread that booted 517 nodes for 6 pods, with the real kube-scheduler binding:
    every pod placed on what nodemanager booted, over the zones the pods can reach, and
    nothing booted after."""
    w = world(plane, "provisioner", tmp_path)
    apps = client.AppsV1Api(api_client(plane))
    try:
        apps.create_namespaced_deployment(namespace, deployment("web", 6, scheduler="default-scheduler", spread=True))
        assert w.run_until(lambda: running(w, namespace, 6), 120), w.controller.status()["pods"]
        launched = [e for e in w.cloud.events if e.kind == "launched"]
        assert len(launched) <= 6
        used = {p.spec.node_name for p in w.pods(namespace).values()}
        assert used <= set(w.registrar.names.values())  # on nodes nodemanager booted
        zones = {w.core.read_node(name).metadata.labels["topology.kubernetes.io/zone"] for name in used}
        assert zones <= {"us-east-1a", "us-east-1b", "us-east-1c"}  # (kube-scheduler spreads over the zones whose nodes are Ready first)
        w.run_for(15)
        assert [e for e in w.cloud.events if e.kind == "launched"] == launched  # nothing booted after
        assert {w.registrar.names[i] for i in w.live_instances()} == used  # a node kube-scheduler did not use went idle
    finally:
        w.close()
