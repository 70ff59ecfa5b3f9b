"""nodemanager against a real control plane (kube-apiserver, kube-controller-manager,
kube-scheduler, etcd; kwok as the kubelets), on the oldest and newest Kubernetes versions.

Real seconds pass here (each wait bounded); the Deployments, ReplicaSets, DaemonSets and
their pods are made by the real controllers, the cordon taint by the real node lifecycle
controller, and in provisioner mode every bind is the real kube-scheduler's.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from controlplane import VERSIONS, ControlPlane
from kubernetes import client
from world import SHIPPED, World, api_client, apply_shipped, new_namespace

from cloud.catalog import Catalog
from nodemanager.config import parse_config
from nodemanager.model.labels import RESERVATION_ID, RESERVATION_TYPE
from nodemanager.model.reservation import Reservation, ReservationKind

pytestmark = pytest.mark.e2e

FORBIDDEN = re.compile(r"\b403\b|[Ff]orbidden")  # a refusal in a log line

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
    new_namespace(core, name)
    yield name
    core.delete_namespace(name)


def world(plane: ControlPlane, mode: str, tmp_path: Path, token: str | None = None) -> World:
    config, catalog = parse_config(PROVIDER.format(mode=mode), "provider.yaml", tmp_path)
    assert isinstance(catalog, Catalog)
    return World(plane, config, catalog, token=token)


@pytest.fixture
def scheduling(plane: ControlPlane, tmp_path: Path) -> Iterator[World]:
    """nodemanager in scheduler mode over the real control plane, closed after the test."""
    made = world(plane, "scheduler", tmp_path)
    yield made
    made.close()


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


def test_scheduler_mode_places_a_deployment_and_lets_idle_nodes_go(plane: ControlPlane, namespace: str, scheduling: World) -> None:
    """The pods of a real Deployment get nodes and run; the real DaemonSet controller's pods
    (pinned by node affinity, bound by kube-scheduler) run on every node and keep none."""
    w, apps = scheduling, scheduling.apps
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


def test_the_shipped_rbac_allows_every_call_the_controller_makes(plane: ControlPlane, namespace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """deploy/kubernetes/rbac.yaml, applied as is; nodemanager runs with a token of its
    ServiceAccount: pods placed, bound and their nodes labelled, events written, idle nodes
    drained and deleted, without one 403."""
    admin = api_client(plane)
    apply_shipped(admin, "namespace.yaml", "rbac.yaml")
    token = client.CoreV1Api(admin).create_namespaced_service_account_token("nodemanager", "nodemanager", {"spec": {"expirationSeconds": 3600}})
    w = world(plane, "scheduler", tmp_path, token=token.status.token)
    apps = client.AppsV1Api(admin)
    try:
        with caplog.at_level("INFO", logger="nodemanager"):
            apps.create_namespaced_deployment(namespace, deployment("web", 2))
            assert w.run_until(lambda: running(w, namespace, 2), 90), w.controller.status()["pods"]
            apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 0}})
            assert w.run_until(lambda: not w.live_instances(), 90)
        # (a 403 as a status, not as digits of a node's random name: nodemanager-general-03740640392f)
        refused = [r.getMessage() for r in caplog.records if FORBIDDEN.search(r.getMessage())]
        assert refused == []
    finally:
        w.close()


@pytest.mark.parametrize("taint", [None, {"key": "test", "value": "x", "effect": "NoSchedule"}], ids=["cordon", "operator taint"])
def test_a_cordon_or_an_operators_taint_is_never_drift(namespace: str, scheduling: World, taint: dict | None) -> None:
    """Cordoned on a real 1.32 control plane, a node was drained and terminated 21 s later;
    tainted test=x:NoSchedule, 25 s later."""
    w, apps = scheduling, scheduling.apps
    apps.create_namespaced_deployment(namespace, deployment("web", 1))
    assert w.run_until(lambda: running(w, namespace, 1), 90)
    [instance] = w.live_instances()
    [node] = {p.spec.node_name for p in w.pods(namespace).values()}
    if taint is None:
        w.core.patch_node(node, {"spec": {"unschedulable": True}})  # kubectl cordon
    else:
        taints = [t.to_dict() for t in w.core.read_node(node).spec.taints or []]
        w.core.patch_node(node, {"spec": {"taints": [*taints, taint]}})  # kubectl taint
    key = "node.kubernetes.io/unschedulable" if taint is None else taint["key"]

    def tainted() -> bool:
        return any(t.key == key for t in w.core.read_node(node).spec.taints or [])

    assert w.run_until(tainted, 30)  # (a cordon: the node lifecycle controller's taint)
    w.run_for(20)
    assert w.live_instances() == [instance]
    assert not w.controller.disruption.summary()
    [why] = w.controller.state.operator_held.values()
    assert why.endswith("an operator has the node")


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


def _dra(plane: ControlPlane, node: str) -> tuple[client.CustomObjectsApi, str]:
    """A device class, a GPU published on ``node`` and a claim for one, in the shape the
    version serves (1.32: v1beta1, its devices' attributes under ``basic``; 1.34+: v1)."""
    version = "v1beta1" if plane.minor < 34 else "v1"
    objects = client.CustomObjectsApi(api_client(plane))
    attributes = {"model": {"string": "a10g"}}
    device = {"name": "gpu-0", "basic": {"attributes": attributes}} if version == "v1beta1" else {"name": "gpu-0", "attributes": attributes}
    group = f"resource.k8s.io/{version}"
    objects.create_cluster_custom_object(
        "resource.k8s.io",
        version,
        "deviceclasses",
        {
            "apiVersion": group,
            "kind": "DeviceClass",
            "metadata": {"name": f"gpu-{node}"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]},
        },
    )
    spec = {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": [device]}
    objects.create_cluster_custom_object(
        "resource.k8s.io", version, "resourceslices", {"apiVersion": group, "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpu"}, "spec": spec}
    )
    return objects, version


def test_a_device_claim_is_allocated_protected_and_freed_by_the_real_resourceclaim_controller(plane: ControlPlane, namespace: str, scheduling: World) -> None:
    """A shared claim stayed allocated to a deleted Node's device: nodemanager wrote
    allocations without the finalizer the real controller needs to free them."""
    w, apps = scheduling, scheduling.apps
    apps.create_namespaced_deployment(namespace, deployment("web", 1))
    assert w.run_until(lambda: running(w, namespace, 1), 90)
    [node] = {p.spec.node_name for p in w.pods(namespace).values()}
    objects, version = _dra(plane, node)
    request = {"name": "one", "deviceClassName": f"gpu-{node}", "allocationMode": "ExactCount", "count": 1}
    if version == "v1":
        request = {"name": "one", "exactly": {k: v for k, v in request.items() if k != "name"}}
    claim = {"apiVersion": f"resource.k8s.io/{version}", "kind": "ResourceClaim", "metadata": {"name": "gpu"}, "spec": {"devices": {"requests": [request]}}}
    objects.create_namespaced_custom_object("resource.k8s.io", version, namespace, "resourceclaims", claim)
    pod = {
        "metadata": {"name": "trainer"},
        "spec": {
            "schedulerName": "nodemanager",
            "containers": [{"name": "t", "image": "t:1", "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
            "tolerations": [{"operator": "Exists"}],
        },
    }
    w.core.create_namespaced_pod(namespace, pod)
    assert w.run_until(lambda: w.core.read_namespaced_pod("trainer", namespace).spec.node_name == node, 60)

    def read() -> dict:
        return objects.get_namespaced_custom_object("resource.k8s.io", version, namespace, "resourceclaims", "gpu")

    assert w.run_until(lambda: bool(read().get("status", {}).get("allocation")), 30)
    assert read()["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    w.core.delete_namespaced_pod("trainer", namespace, grace_period_seconds=0)
    assert w.run_until(lambda: not read().get("status", {}).get("allocation"), 60), read()  # the real controller freed it


def test_a_restart_mid_scale_up_launches_no_node_twice_and_places_every_pod(plane: ControlPlane, namespace: str, scheduling: World) -> None:
    w, apps = scheduling, scheduling.apps
    apps.create_namespaced_deployment(namespace, deployment("web", 8))
    assert w.run_until(lambda: bool(w.live_instances()), 30)
    w.restart()  # killed mid scale-up: the new process recovers from the tags and the API
    assert w.run_until(lambda: running(w, namespace, 8), 120), w.controller.status()["pods"]
    launched = [e.node_name for e in w.cloud.events if e.kind == "launched"]
    assert len(launched) == len(set(launched))  # no node launched twice
    used = {p.spec.node_name for p in w.pods(namespace).values()}
    w.run_for(10)
    assert {w.registrar.names[i] for i in w.live_instances()} == used  # none leaked


def small(name: str, *, labels: dict | None = None, annotations: dict | None = None) -> dict:
    """A one-replica Deployment of a small pod (300m, 256Mi)."""
    made = deployment(name, 1)
    template = made["spec"]["template"]
    template["metadata"]["labels"].update(labels or {})
    if annotations:
        template["metadata"]["annotations"] = annotations
    template["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "300m", "memory": "256Mi"}
    return made


def _two_nodes_of_one_small_pod(w: World, apps: client.AppsV1Api, namespace: str, a: dict, b: dict) -> None:
    """``a`` placed beside a large filler, ``b`` on a node of its own (no room was left),
    then the filler deleted: two nodes holding one small pod each, which one node could hold."""
    filler = deployment("filler", 1)
    filler["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1500m", "memory": "2Gi"}
    apps.create_namespaced_deployment(namespace, filler)
    apps.create_namespaced_deployment(namespace, a)
    assert w.run_until(lambda: running(w, namespace, 2), 90)
    apps.create_namespaced_deployment(namespace, b)
    assert w.run_until(lambda: running(w, namespace, 3), 90)
    assert len(w.live_instances()) == 2  # b found no room beside the filler
    apps.delete_namespaced_deployment("filler", namespace)


def test_consolidation_drains_within_a_budget_the_real_disruption_controller_keeps(plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    """Two nodes each left with one small pod of a maxUnavailable-1 budget: one goes, its pod
    evicted through the Eviction API and made again by the real ReplicaSet controller, placed,
    and no pod lost."""
    w = world(plane, "scheduler", tmp_path)
    admin = api_client(plane)
    apps, policy = client.AppsV1Api(admin), client.PolicyV1Api(admin)
    budget = {"metadata": {"name": "x"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"tier": "x"}}}}
    policy.create_namespaced_pod_disruption_budget(namespace, budget)

    try:
        _two_nodes_of_one_small_pod(w, apps, namespace, small("a", labels={"tier": "x"}), small("b", labels={"tier": "x"}))
        assert w.run_until(lambda: len(w.live_instances()) == 1 and running(w, namespace, 2), 120), w.controller.disruption.status()
        assert w.controller.disruption.summary()["Underutilized"]["nodes"] >= 1
        pods = w.pods(namespace)
        assert sorted(p.metadata.labels["app"] for p in pods.values()) == ["a", "b"]
    finally:
        w.close()


def test_the_api_server_killed_and_back_the_watches_resume_and_new_pods_are_placed(plane: ControlPlane, namespace: str, scheduling: World) -> None:
    w, apps = scheduling, scheduling.apps
    apps.create_namespaced_deployment(namespace, deployment("web", 2))
    assert w.run_until(lambda: running(w, namespace, 2), 90)
    plane.kill_and_restart_api_server()
    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 4}})
    assert w.run_until(lambda: running(w, namespace, 4), 120), w.controller.status()["pods"]


def test_a_node_whose_kubelet_stops_is_replaced_and_its_pods_placed_again(plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    """The node's own kwok (its kubelet) is killed: no more status from it. nodemanager
    replaces the node after nodes.healthyTimeout, its Node goes with its instance, and the
    Deployment's new pod is placed on a new node; the old one, Terminating on a Node that no
    longer exists, is then deleted by the real PodGC."""
    text = PROVIDER.format(mode="scheduler").replace("bootTimeout: 120s", "bootTimeout: 120s, healthyTimeout: 20s")
    config, catalog = parse_config(text, "provider.yaml", tmp_path)
    w = World(plane, config, catalog)
    apps = client.AppsV1Api(api_client(plane))
    try:
        w.registrar.solo = True
        apps.create_namespaced_deployment(namespace, deployment("web", 1))
        assert w.run_until(lambda: running(w, namespace, 1), 90)
        w.registrar.solo = False
        [first] = w.live_instances()
        [node] = {p.spec.node_name for p in w.pods(namespace).values()}
        kubelet = w.registrar.kubelets[node]
        kubelet.kill()  # type: ignore[attr-defined]

        def replaced() -> bool:
            pods = [p for p in w.pods(namespace).values() if p.metadata.deletion_timestamp is None]
            return first not in w.live_instances() and len(pods) == 1 and pods[0].status.phase == "Running" and pods[0].spec.node_name != node

        assert w.run_until(replaced, 180), (w.controller.status()["nodes"], {n: p.spec.node_name for n, p in w.pods(namespace).items()})
        assert node not in {n.metadata.name for n in w.core.list_node().items}  # nodemanager deleted the Node with its instance

        def collected() -> bool:  # the real PodGC deletes a pod bound to a Node that no longer exists
            return all(p.spec.node_name != node for p in w.pods(namespace).values())

        if plane.minor >= 37:  # (its 40 s quarantine is the same on both versions: waited for once, to keep the suite short)
            assert w.run_until(collected, 120), {n: (p.spec.node_name, p.metadata.deletion_timestamp) for n, p in w.pods(namespace).items()}
    finally:
        w.close()


def test_provisioner_mode_boots_for_anti_affinity_and_affinity_what_kube_scheduler_uses(plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    """Three replicas that must not share a node, and three that must each share one with
    them: kube-scheduler binds every one onto what nodemanager booted, the constraints hold."""
    w = world(plane, "provisioner", tmp_path)
    try:
        apart = deployment("apart", 3, scheduler="default-scheduler")
        term = {"labelSelector": {"matchLabels": {"app": "apart"}}, "topologyKey": "kubernetes.io/hostname"}
        apart["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        near = deployment("near", 3, scheduler="default-scheduler")
        near["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "100m", "memory": "128Mi"}
        near["spec"]["template"]["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        w.apps.create_namespaced_deployment(namespace, apart)
        w.apps.create_namespaced_deployment(namespace, near)
        assert w.run_until(lambda: running(w, namespace, 6), 150), w.controller.status()["pods"]
        pods = w.pods(namespace).values()
        apart_nodes = [p.spec.node_name for p in pods if p.metadata.labels["app"] == "apart"]
        assert len(set(apart_nodes)) == 3
        assert {p.spec.node_name for p in pods if p.metadata.labels["app"] == "near"} <= set(apart_nodes)
        assert len([e for e in w.cloud.events if e.kind == "launched"]) <= 6
    finally:
        w.close()


def test_a_fleet_launch_that_falls_back_registers_as_the_node_it_got(namespace: str, scheduling: World) -> None:
    """Every on-demand offering of us-east-1a is out of capacity: each node's one fleet launch
    takes another zone, its record says so, the Node registers there and the pods run on it,
    with no boot failed and no launch made twice."""
    w = scheduling
    w.cloud.capacity = {"*/on-demand/us-east-1a": 0}
    w.apps.create_namespaced_deployment(namespace, deployment("web", 3))
    assert w.run_until(lambda: running(w, namespace, 3), 90), w.controller.status()["pods"]
    live = [i for i in w.cloud.list_instances() if i.alive]
    assert live
    assert w.cloud.boot_calls == len(live)  # one launch per node: none failed, none repeated
    records = {n.instance_id: n for n in w.controller.state.nodes.values() if n.instance_id}
    for instance in live:
        assert instance.zone != "us-east-1a"
        assert (records[instance.instance_id].zone, records[instance.instance_id].instance_type) == (instance.zone, instance.instance_type)
    for pod in w.pods(namespace).values():
        assert w.core.read_node(pod.spec.node_name).metadata.labels["topology.kubernetes.io/zone"] != "us-east-1a"
    assert w.controller.metrics.boot_failures.labels("insufficient_capacity")._value.get() == 0
    w.apps.delete_namespaced_deployment("web", namespace)


def test_a_capacity_blocks_pods_move_to_nodes_booted_for_them_before_it_ends(plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    """A real Deployment's pods on a Capacity Block's nodes (labelled as such on the Node): from
    the block's drain time their new nodes are booted, then the block's Nodes are drained
    through the real Eviction API and deleted, and the ReplicaSet's new pods run on the
    nodes that were waiting for them."""
    if plane.version != VERSIONS[-1]:
        pytest.skip("one version is enough: nothing here differs between them")
    block = Reservation("cr-0e2e0e2e0e2e0e2e0", "m5.xlarge", "us-east-1b", 2, 2, ReservationKind.CAPACITY_BLOCK, time.time() + 2400.0 + 25.0)
    text = PROVIDER.format(mode="scheduler").replace(
        'instanceTypes: ["m5.*", "c5.*"],',
        f'instanceTypes: ["m5.*", "c5.*"], capacityTypes: [reserved, on-demand], capacityReservations: [{{id: {block.id}, launchCutoff: 0s}}],',
    )
    config, catalog = parse_config(text, "provider.yaml", tmp_path)
    w = World(plane, config, catalog, reservations=[(block, 0.0)])
    try:
        w.apps.create_namespaced_deployment(namespace, deployment("train", 2))
        assert w.run_until(lambda: running(w, namespace, 2), 60), w.controller.status()["pods"]
        first = {p.spec.node_name for p in w.pods(namespace).values()}
        labels = [w.core.read_node(n).metadata.labels for n in first]
        assert {(lb[RESERVATION_ID], lb[RESERVATION_TYPE], lb["nodemanager.io/capacity-type"]) for lb in labels} == {(block.id, "capacity-block", "reserved")}

        def moved() -> bool:
            pods = [p for p in w.pods(namespace).values() if p.metadata.deletion_timestamp is None]
            return running(w, namespace, 2) and not {p.spec.node_name for p in pods} & first

        assert w.run_until(moved, 90), w.controller.status()["nodes"]
        assert not [i for i in w.cloud.list_instances() if i.alive and i.reservation == block.id]
        assert [e for e in w.cloud.events if e.kind == "capacity-block-reclaimed"] == []
    finally:
        w.close()


def test_a_pod_of_a_zonal_volume_gets_a_node_in_its_zone(namespace: str, scheduling: World) -> None:
    """A PersistentVolume that lives in us-east-1b, bound by the real PV controller to the
    pod's claim: the node is booted there."""
    w = scheduling
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}
    volume = {
        "metadata": {"name": f"pv-{namespace}"},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "manual",
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{namespace}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}},
        },
    }
    w.core.create_persistent_volume(volume)
    claim = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "manual", "volumeName": volume["metadata"]["name"]}}
    claim["spec"]["resources"] = {"requests": {"storage": "10Gi"}}
    w.core.create_namespaced_persistent_volume_claim(namespace, claim)
    assert w.run_until(lambda: w.core.read_namespaced_persistent_volume_claim("data", namespace).status.phase == "Bound", 30)
    made = deployment("db", 1)
    made["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    w.apps.create_namespaced_deployment(namespace, made)
    try:
        assert w.run_until(lambda: running(w, namespace, 1), 90), w.controller.status()["pods"]
        [pod] = w.pods(namespace).values()
        assert w.core.read_node(pod.spec.node_name).metadata.labels["topology.kubernetes.io/zone"] == "us-east-1b"
    finally:
        w.apps.delete_namespaced_deployment("db", namespace)
        w.core.delete_persistent_volume(volume["metadata"]["name"])


def test_the_shipped_manifests_are_admitted_and_their_pods_meet_the_restricted_standard(plane: ControlPlane) -> None:
    """deploy/kubernetes/ applied as a user would, on the real API server with its
    PodSecurity admission: every object is accepted, the ReplicaSet controller creates both
    replicas in the namespace that enforces "restricted", and a pod without a seccomp
    profile is refused there (the standard is enforced, so the first check means something)."""
    admin = api_client(plane)
    first = ["namespace.yaml", "rbac.yaml"]
    apply_shipped(admin, *first, *sorted(p.name for p in SHIPPED.glob("*.yaml") if p.name not in first))
    core, apps = client.CoreV1Api(admin), client.AppsV1Api(admin)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pods = core.list_namespaced_pod("nodemanager", label_selector="app.kubernetes.io/name=nodemanager").items
            if len(pods) == 2:
                break
            time.sleep(0.2)
        assert len(pods) == 2, [e.message for e in core.list_namespaced_event("nodemanager").items]
        bare = {"metadata": {"name": "unconfined"}, "spec": {"containers": [{"name": "c", "image": "c:1"}]}}
        with pytest.raises(client.ApiException) as refused:
            core.create_namespaced_pod("nodemanager", bare)
        assert refused.value.status == 403
        assert "restricted" in refused.value.body
    finally:
        apps.delete_namespaced_deployment("nodemanager", "nodemanager")


def test_the_shipped_configuration_places_an_ordinary_deployment(plane: ControlPlane, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """deploy/kubernetes/configmap.yaml's provider.yaml as shipped (over the simulated cloud):
    a Deployment as a Karpenter or Cluster Autoscaler user writes it, with no schedulerName,
    is placed by kube-scheduler on nodes nodemanager booted for it."""
    monkeypatch.setenv("NODEMANAGER_STATUS_TOKEN", "from-the-secret")
    folder = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
    text = yaml.safe_load((folder / "configmap.yaml").read_text())["data"]["provider.yaml"]
    config, catalog = parse_config(text, "configmap.yaml provider.yaml", tmp_path)
    assert isinstance(catalog, Catalog)
    w = World(plane, config, catalog)
    ordinary = deployment("web", 3)
    del ordinary["spec"]["template"]["spec"]["schedulerName"]
    try:
        w.apps.create_namespaced_deployment(namespace, ordinary)
        assert w.run_until(lambda: running(w, namespace, 3), 120), w.controller.status()["pods"]
        used = {p.spec.node_name for p in w.pods(namespace).values()}
        assert used <= set(w.registrar.names.values())  # on nodes nodemanager booted
    finally:
        w.close()


def test_the_do_not_disrupt_annotations_of_karpenter_and_the_cluster_autoscaler_keep_their_nodes(plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    """Two nodes each left with one small pod, which consolidation would merge into one (as
    the budget test shows): one pod annotated karpenter.sh/do-not-disrupt, the other
    cluster-autoscaler.kubernetes.io/safe-to-evict: "false"; both nodes stay."""
    w = world(plane, "scheduler", tmp_path)
    apps = client.AppsV1Api(api_client(plane))

    try:
        a = small("a", annotations={"karpenter.sh/do-not-disrupt": "true"})
        b = small("b", annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})
        _two_nodes_of_one_small_pod(w, apps, namespace, a, b)
        assert w.run_until(lambda: running(w, namespace, 2), 60)
        w.run_for(20)  # consolidateAfter is 2 s: the budget test's merge happens well within this
        assert len(w.live_instances()) == 2
        assert w.controller.disruption.summary().get("Underutilized", {}).get("nodes", 0) == 0
    finally:
        w.close()
