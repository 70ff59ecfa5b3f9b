"""The API stub kept honest: one test body against the stub and against each real API server.
Where they differ, the stub is wrong (it serves the fast unit tests the truth must hold for)."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from conftest import Planes
from controlplane import VERSIONS
from kube_stub import KubeStub
from kubernetes import client
from world import KWOK, api_client, new_namespace

pytestmark = pytest.mark.e2e


@dataclass
class Server:
    api: client.ApiClient
    running: Callable[[str, str], None]  # make a bound pod Running (a kubelet's part)
    compact: Callable[[], None]  # forget the history before now (etcd's compaction; the stub's expiry)
    real: bool = False  # a real API server (its controllers act a moment later)
    nodes: list[str] = field(default_factory=list)  # made by the test: deleted after it (a later test's DaemonSet would run on them)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)


@pytest.fixture(params=["stub", *VERSIONS], ids=["stub", *(f"k8s-{v}" for v in VERSIONS)])
def server(request: pytest.FixtureRequest, planes: Planes) -> Iterator[Server]:
    if request.param == "stub":
        stub = KubeStub().start()
        configuration = client.Configuration(host=stub.host, api_key={"authorization": stub.token}, api_key_prefix={"authorization": "Bearer"})
        yield Server(client.ApiClient(configuration), lambda ns, name: stub.set_pod_phase(ns, name, "Running") and None, stub.expire_history)
        stub.stop()
        return
    api = api_client(planes[request.param])
    core = client.CoreV1Api(api)

    def running(namespace: str, name: str) -> None:  # kwok runs it
        deadline = time.monotonic() + 30
        while core.read_namespaced_pod(name, namespace).status.phase != "Running":
            assert time.monotonic() < deadline, "kwok did not start the pod"
            time.sleep(0.2)

    made = Server(api, running, lambda: planes[request.param].compact_etcd() and None, real=True)
    yield made
    for node in made.nodes:
        with contextlib.suppress(client.ApiException):
            core.delete_node(node)


@pytest.fixture
def namespace(server: Server) -> Iterator[str]:
    """A namespace of the test's, deleted after it: its pods (some waiting for nodemanager)
    must not reach a later test's controller on the same control plane."""
    name = f"agree-{uuid.uuid4().hex[:8]}"
    if server.real:
        new_namespace(server.core, name)
    else:
        server.core.create_namespace({"metadata": {"name": name}})
    yield name
    with contextlib.suppress(client.ApiException):
        server.core.delete_namespace(name)


def _node(server: Server) -> str:
    name = f"agree-{uuid.uuid4().hex[:8]}"
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    server.core.create_node({"metadata": {"name": name, "annotations": dict(KWOK)}, "status": {"capacity": capacity, "allocatable": capacity}})
    server.nodes.append(name)
    return name


def _pod(server: Server, namespace: str, name: str, labels: dict | None = None) -> None:
    tolerate = [{"operator": "Exists"}]
    spec = {"containers": [{"name": "c", "image": "app:1"}], "tolerations": tolerate, "schedulerName": "nodemanager"}
    server.core.create_namespaced_pod(namespace, {"metadata": {"name": name, "labels": labels or {}}, "spec": spec})


def _bind(server: Server, namespace: str, pod: str, node: str) -> None:
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    server.core.create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)


def test_a_created_pod_waits_with_the_servers_defaults(server: Server, namespace: str) -> None:
    _pod(server, namespace, "p")
    pod = server.core.read_namespaced_pod("p", namespace)
    assert pod.status.phase == "Pending"
    assert (pod.spec.restart_policy, pod.spec.termination_grace_period_seconds, pod.spec.scheduler_name) == ("Always", 30, "nodemanager")


def test_a_second_binding_is_a_conflict(server: Server, namespace: str) -> None:
    node = _node(server)
    _pod(server, namespace, "p")
    _bind(server, namespace, "p", node)
    with pytest.raises(client.ApiException) as refused:
        _bind(server, namespace, "p", node)
    assert refused.value.status == 409
    assert "is already assigned to node" in json.loads(refused.value.body)["message"]


def test_an_eviction_a_budget_forbids_is_429_and_one_it_allows_deletes(server: Server, namespace: str) -> None:
    node = _node(server)
    for name in ("a", "b"):
        _pod(server, namespace, name, {"app": "x"})
        _bind(server, namespace, name, node)
        server.running(namespace, name)
    policy = client.PolicyV1Api(server.api)
    policy.create_namespaced_pod_disruption_budget(
        namespace, {"metadata": {"name": "b"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}}
    )
    deadline = time.monotonic() + 30
    while (policy.read_namespaced_pod_disruption_budget("b", namespace).status.disruptions_allowed or 0) < 1:  # the disruption controller
        assert time.monotonic() < deadline
        time.sleep(0.2)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": namespace}}
    server.core.create_namespaced_pod_eviction("a", namespace, eviction, _preload_content=False)
    with pytest.raises(client.ApiException) as refused:
        server.core.create_namespaced_pod_eviction("b", namespace, {**eviction, "metadata": {"name": "b", "namespace": namespace}}, _preload_content=False)
    assert refused.value.status == 429
    assert "disruption budget" in json.loads(refused.value.body)["message"]


def test_a_watch_from_a_revision_compacted_away_relists_and_misses_nothing(server: Server, namespace: str) -> None:
    """etcd compacts its history (the API server asks every five minutes; ConfigMaps are
    watched straight from etcd on these control planes): a watch resuming from a revision
    compacted away gets the server's ERROR 410 event (never an HTTP 410), and the reflector
    lists again, reporting what changed meanwhile once each."""
    from functools import partial

    from nodemanager.cluster.kubernetes.reflector import Reflector

    def ours(changes: list) -> list[tuple[str, str]]:  # (the root CA publisher adds a ConfigMap of its own, whenever)
        return sorted((c.type.value, c.key.partition("/")[2]) for c in changes if c.key.partition("/")[2] in ("before", "during"))

    core = server.core
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "before"}})
    reflector = Reflector("configmaps", partial(core.list_namespaced_config_map, namespace), watch_seconds=(5, 5))
    assert ours(reflector.relist()) == [("ADDED", "before")]
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "during"}})
    core.delete_namespaced_config_map("before", namespace)
    server.compact()
    seen: list = []
    reflector.watch(seen.extend)
    assert reflector.relists == 2  # the 410 made it list again
    assert ours(seen) == [("ADDED", "during"), ("DELETED", "before")]


def test_an_idle_watch_ends_at_its_timeout_and_resumes_without_a_list(server: Server, namespace: str) -> None:
    """A watch where nothing changes (bookmarks asked for) ends when its timeout runs out,
    with no event; the reflector's resourceVersion never goes back, and the next watch
    resumes from it rather than listing again (a relist storm on an idle cluster)."""
    from functools import partial

    from nodemanager.cluster.kubernetes.reflector import Reflector

    _pod(server, namespace, "there")
    reflector = Reflector("pods", partial(server.core.list_namespaced_pod, namespace), watch_seconds=(2, 2))
    assert [c.key for c in reflector.relist()] == [f"{namespace}/there"]
    listed = int(reflector.resource_version or 0)
    seen: list = []
    for _ in range(2):
        began = time.monotonic()
        reflector.watch(seen.extend)
        assert time.monotonic() - began < 15  # the server ended it
    assert seen == []
    assert reflector.relists == 1
    assert int(reflector.resource_version or 0) >= listed


def test_a_stale_write_is_a_conflict_and_a_patch_without_a_revision_wins(server: Server, namespace: str) -> None:
    """What leader election and Node labels rely on: a replace from an old resourceVersion
    is a 409 the caller reads again after; creating a name that exists is a 409 AlreadyExists;
    a patch that names no resourceVersion is applied whatever the object's."""
    leases = client.CoordinationV1Api(server.api)
    body = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
    first = leases.create_namespaced_lease(namespace, body)
    with pytest.raises(client.ApiException) as exists:
        leases.create_namespaced_lease(namespace, body)
    assert (exists.value.status, json.loads(exists.value.body)["reason"]) == (409, "AlreadyExists")
    leases.patch_namespaced_lease("l", namespace, {"spec": {"holderIdentity": "b"}})
    stale = first.to_dict() | {"spec": {"holderIdentity": "c", "leaseDurationSeconds": 15}}
    with pytest.raises(client.ApiException) as conflict:
        leases.replace_namespaced_lease("l", namespace, stale)
    said = json.loads(conflict.value.body)
    assert (conflict.value.status, said["reason"]) == (409, "Conflict")
    assert "the object has been modified" in said["message"]
    assert leases.read_namespaced_lease("l", namespace).spec.holder_identity == "b"


def test_device_classes_are_read_in_the_newest_resource_version_served(server: Server, namespace: str) -> None:
    """Discovery of resource.k8s.io: a DeviceClass written in the version the server prefers
    is read back by nodemanager in the newest version the server serves (1.32: v1beta1 only,
    behind its feature gate; later: v1)."""
    from nodemanager.clock import RealClock
    from nodemanager.cluster.kubernetes.devices import RESOURCE_VERSIONS, DeviceApi

    group = client.ResourceApi(server.api).get_api_group()
    served = {v.version for v in group.versions}
    version = group.preferred_version.version
    name = f"{namespace}-gpu"
    body = {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
    }
    custom = client.CustomObjectsApi(server.api)
    custom.create_cluster_custom_object("resource.k8s.io", version, "deviceclasses", body)
    try:
        devices = DeviceApi(server.api, RealClock())
        context = devices.read()
        assert context is not None
        assert context.unavailable == ""
        assert name in context.classes
        newest = next(v for v in RESOURCE_VERSIONS if v in served)
        assert isinstance(devices.resource, RESOURCE_VERSIONS[newest])
    finally:
        custom.delete_cluster_custom_object("resource.k8s.io", version, "deviceclasses", name)
