"""What kube's own tables leave open, asked of the real kube-scheduler: nodemanager's filters
must answer as the real one does on every supported version.

Host ports of sidecars (init containers with ``restartPolicy: Always``): one pod holds a
port on a node, another asking for the same port is pinned there; whether the real
kube-scheduler binds it is what nodemanager's NodePorts must say too (1.37 counts a
sidecar's port, 1.32 did not).

Pod-level requests (``spec.resources``, on by default since 1.34): a pod whose pod-level
cpu is more than its containers' is pinned to a 4-cpu node; nodemanager reads the pod the
API server kept (1.32 drops the field, its gate being off) and must answer as the real
scheduler does.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator

import pytest
from controlplane import ControlPlane
from kubernetes import client
from world import KWOK, api_client, kube_answer, new_namespace

from nodemanager.cluster.objects import pod_from_v1
from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scheduling import CycleState, Framework
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.profile import DEFAULT_PROFILE
from nodemanager.scheduling.registry import default_registry

pytestmark = pytest.mark.e2e

PORT = {"containerPort": 9000, "hostPort": 9000}
CAPACITY = {"cpu": "4", "memory": "8Gi", "pods": "110"}


@pytest.fixture
def core(plane: ControlPlane) -> client.CoreV1Api:
    return client.CoreV1Api(api_client(plane))


@pytest.fixture
def place(core: client.CoreV1Api) -> Iterator[tuple[str, str]]:
    """A 4-cpu kwok node and a namespace, both removed afterwards."""
    node, namespace = f"ref-{uuid.uuid4().hex[:8]}", f"ref-{uuid.uuid4().hex[:8]}"
    labels = {"kubernetes.io/hostname": node}
    core.create_node({"metadata": {"name": node, "annotations": dict(KWOK), "labels": labels}, "status": {"capacity": CAPACITY, "allocatable": CAPACITY}})
    new_namespace(core, namespace)
    try:
        yield node, namespace
    finally:
        core.delete_namespace(namespace)
        core.delete_node(node)


def _ours(node: str, asker: Pod, *placed: Pod) -> bool:
    """Whether nodemanager's filters let ``asker`` onto the 4-cpu node holding ``placed``."""
    info = NodeInfo(node, "p", "", CapacityType.ON_DEMAND, "", Resources({"cpu": 4000, "memory": 8 * 2**30, "pods": 110}), {"kubernetes.io/hostname": node})
    for pod in placed:
        info.add_pod(pod)
    fw = Framework(DEFAULT_PROFILE, default_registry())
    fw.handle.node_infos = {node: info}
    state = CycleState()
    return fw.run_pre_filter_plugins(state, asker).is_success() and fw.run_filter_plugins(state, asker, info).is_success()


def _spec(node: str, where: str) -> dict:
    """A pod pinned to ``node`` (by node affinity, so the filters run) whose hostPort is in
    an app container or in a sidecar."""
    app = {"name": "app", "image": "app:1", **({"ports": [PORT]} if where == "app" else {})}
    spec: dict = {"containers": [app], "tolerations": [{"operator": "Exists"}]}  # (a new node's not-ready taint)
    if where == "sidecar":
        spec["initContainers"] = [{"name": "proxy", "image": "proxy:1", "restartPolicy": "Always", "ports": [PORT]}]
    here = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [here]}}}
    return spec


@pytest.mark.parametrize(("first", "second"), [("sidecar", "app"), ("app", "sidecar"), ("sidecar", "sidecar"), ("app", "app")])
def test_host_ports_of_sidecars_conflict_as_the_real_scheduler_says(
    plane: ControlPlane, core: client.CoreV1Api, place: tuple[str, str], first: str, second: str
) -> None:
    """1.37's kube-scheduler counts a sidecar's host port; 1.32's did not, and bound a pod
    whose port then clashed on the node (the kubelet cannot start it). nodemanager counts
    them on every version: on 1.32 that is the one difference allowed, the stricter way."""
    node, namespace = place
    core.create_namespaced_pod(namespace, {"metadata": {"name": "holder"}, "spec": _spec(node, first)})
    assert kube_answer(core, namespace, "holder") == (node, "")
    core.create_namespaced_pod(namespace, {"metadata": {"name": "asker"}, "spec": _spec(node, second)})
    where, _ = kube_answer(core, namespace, "asker")
    kube_binds = where == node

    holder = Pod.from_manifest({"metadata": {"name": "holder", "namespace": namespace}, "spec": {**_spec(node, first), "nodeName": node}})
    asker = Pod.from_manifest({"metadata": {"name": "asker", "namespace": namespace}, "spec": _spec(node, second)})
    ours = _ours(node, asker, holder)
    if plane.version == "1.32" and "sidecar" in (first, second):
        assert (kube_binds, ours) == (True, False)
    else:
        verdict = "binds" if kube_binds else "refuses"
        assert ours == kube_binds, f"kube-scheduler {verdict} a pod with the port in its {second} next to one with it in its {first}"


@pytest.mark.parametrize("cpu", ["3", "6"])
def test_pod_level_requests_fit_as_the_real_scheduler_says(plane: ControlPlane, core: client.CoreV1Api, place: tuple[str, str], cpu: str) -> None:
    node, namespace = place
    spec = _spec(node, "app")
    spec["containers"][0] = {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "100m"}}}
    spec["resources"] = {"requests": {"cpu": cpu}}
    core.create_namespaced_pod(namespace, {"metadata": {"name": "asker"}, "spec": spec})
    where, _ = kube_answer(core, namespace, "asker")
    served = pod_from_v1(core.read_namespaced_pod("asker", namespace))
    assert _ours(node, dataclasses.replace(served, node_name="")) == (where == node), (
        f"{plane.version}: pod-level cpu {cpu}, kube-scheduler bound it to {where!r}"
    )
    if plane.version != "1.32":
        assert (where == node) == (cpu == "3")
