"""The Kubernetes cluster source against the API stub: which pods the cache sees, names
by providerID, binding, draining with disruption budgets, labels and events."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import urllib3
import yaml
from kube_helpers import Kubelets, kube_config, source
from kube_stub import KubeStub
from kubernetes import client

from cloud.base import BootRequest
from cloud.simulated import SimulatedCloud
from nodemanager.clock import VirtualClock
from nodemanager.cluster.base import BindError, EventType, NodeEvent, PodEvent
from nodemanager.cluster.kubernetes.connect import api_client
from nodemanager.cluster.kubernetes.source import KubernetesCluster
from nodemanager.config.cluster_schema import KubernetesCluster as KubeSettings
from nodemanager.config.cluster_schema import KubernetesMode
from nodemanager.dra.model import AllocationResult, DeviceResult
from nodemanager.model import CapacityType, PodKey


def boot(cloud: SimulatedCloud, name: str) -> str:
    request = BootRequest(
        node_name=name, pool="general", instance_type="a.large", capacity_type=CapacityType.ON_DEMAND, zone="zone-1a", token=name, volume_bytes=0
    )
    return cloud.boot(request).instance_id


@pytest.fixture
def cloud(clock: VirtualClock) -> SimulatedCloud:
    return SimulatedCloud("test", clock, boot_delay=0)


def registered(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock, *names: str) -> Kubelets:
    for name in names:
        boot(cloud, name)
    clock.advance(10)
    kubelets = Kubelets(stub, cloud, clock)
    kubelets.step()
    return kubelets


def test_scheduler_mode_sees_its_own_waiting_pods_and_every_bound_pod(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    stub.create_pod("mine")
    stub.create_pod("theirs", scheduler="default-scheduler")
    stub.create_pod("placed", scheduler="default-scheduler", node="elsewhere")
    cluster = source(stub, cloud, clock, kube_config())
    listed = cluster.list()
    assert sorted(e.pod.name for e in listed if isinstance(e, PodEvent)) == ["mine", "placed"]
    assert cluster.schedules_pods


def test_provisioner_mode_sees_only_pods_the_scheduler_gave_up_on(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    stub.create_pod("fresh", scheduler="default-scheduler")
    stub.create_pod("stuck", scheduler="default-scheduler")
    cluster = source(stub, cloud, clock, kube_config(mode=KubernetesMode.PROVISIONER))
    assert [e for e in cluster.list() if isinstance(e, PodEvent)] == []
    assert not cluster.schedules_pods
    stub.mark_unschedulable("default", "stuck")
    events = cluster.poll()
    assert [(e.type, e.pod.name) for e in events if isinstance(e, PodEvent)] == [(EventType.ADDED, "stuck")]
    stub.update("pods", "default", "stuck", lambda p: p["spec"].update(nodeName="n1"))  # the scheduler bound it
    assert [(e.type, e.pod.node_name) for e in cluster.poll() if isinstance(e, PodEvent)] == [(EventType.MODIFIED, "n1")]


def test_a_pod_nodemanager_cannot_read_is_skipped_and_the_rest_served(
    stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    stub.create_pod("bad", cpu="lots")
    stub.create_pod("good")
    cluster = source(stub, cloud, clock, kube_config())
    assert [e.pod.name for e in cluster.list() if isinstance(e, PodEvent)] == ["good"]
    assert "pod default/bad" in caplog.text
    assert "lots" in caplog.text


def test_a_node_of_our_instance_is_known_by_our_name_and_its_lease_is_its_heartbeat(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    kubelets = registered(stub, cloud, clock, "nm-1")
    stub.register_node("other-node", "aws:///zone-1a/i-0000000000000beef")  # an instance that is not ours
    stub.create_pod("on-it", scheduler="default-scheduler", node="ip-10-0-0-1.ec2.internal")
    cluster = source(stub, cloud, clock, kube_config())
    listed = cluster.list()
    nodes = {e.node.name: e.node for e in listed if isinstance(e, NodeEvent)}
    assert set(nodes) == {"nm-1", "other-node"}
    assert nodes["nm-1"].ready
    assert nodes["nm-1"].allocatable.cpu == 2000
    assert [e.pod.node_name for e in listed if isinstance(e, PodEvent)] == ["nm-1"]
    before = nodes["nm-1"].last_heartbeat
    clock.advance(10)
    kubelets.step()  # renews the Lease only; the Node object is unchanged
    beats = [e.node for e in cluster.poll() if isinstance(e, NodeEvent)]
    assert [(n.name, n.last_heartbeat - before) for n in beats] == [("nm-1", 10.0)]


def test_bind_goes_through_the_binding_subresource_and_the_watch_confirms_it(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    registered(stub, cloud, clock, "nm-1")
    stub.create_pod("p")
    cluster = source(stub, cloud, clock, kube_config())
    cluster.list()
    cluster.bind(PodKey("default/p"), "nm-1")
    assert stub.get("pods", "default", "p")["spec"]["nodeName"] == "ip-10-0-0-1.ec2.internal"  # type: ignore[index]
    confirmed = [e.pod for e in cluster.poll() if isinstance(e, PodEvent)]
    assert [(p.name, p.node_name) for p in confirmed] == [("p", "nm-1")]


def test_bind_refusals_name_the_reason(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    registered(stub, cloud, clock, "nm-1", "nm-2")
    stub.create_pod("p")
    cluster = source(stub, cloud, clock, kube_config())
    cluster.list()
    cluster.bind(PodKey("default/p"), "nm-1")
    with pytest.raises(BindError, match=r'already assigned to node "ip-10-0-0-1\.ec2\.internal"'):
        cluster.bind(PodKey("default/p"), "nm-2")  # a second binding: 409
    with pytest.raises(BindError, match='pods "gone" not found'):
        cluster.bind(PodKey("default/gone"), "nm-1")
    with pytest.raises(BindError, match="not registered"):
        cluster.bind(PodKey("default/p"), "nm-9")
    stub.fail("POST", "binding$", 504, "Timeout: request did not complete")
    stub.create_pod("q")
    with pytest.raises(BindError, match="Timeout"):
        cluster.bind(PodKey("default/q"), "nm-1")


def drain_setup(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> tuple[KubernetesCluster, Kubelets]:
    kubelets = registered(stub, cloud, clock, "nm-1")
    node = "ip-10-0-0-1.ec2.internal"
    stub.create_pod("web-1", labels={"app": "web"}, node=node, owner="ReplicaSet")
    stub.create_pod("web-2", labels={"app": "web"}, node=node, owner="ReplicaSet")
    stub.create_pod("agent", node=node, owner="DaemonSet")
    stub.create_pod("starting", node=node)
    for name in ("web-1", "web-2", "agent"):
        stub.set_pod_phase("default", name, "Running")
    cluster = source(stub, cloud, clock, kube_config())
    cluster.list()
    return cluster, kubelets


def test_drain_cordons_evicts_and_waits_while_a_disruption_budget_forbids(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    stub.add_pdb("default", "web", {"app": "web"}, disruptions_allowed=1)
    cluster, kubelets = drain_setup(stub, cloud, clock)
    status = cluster.drain("nm-1")
    assert stub.get("nodes", "", "ip-10-0-0-1.ec2.internal")["spec"]["unschedulable"] is True  # type: ignore[index]
    # the budget lets one web pod go; the Pending pod skips budgets; the DaemonSet pod stays
    assert not status.done
    assert status.evicting == 2
    assert len(status.blocked) == 1
    assert "default/web-2" in status.blocked[0]
    assert "disruption budget web needs 2 healthy pods" in status.blocked[0]
    evictions = [c for c in stub.calls if c.subresource == "eviction"]
    assert len(evictions) == 3
    cluster.poll()
    clock.advance(30)  # the evicted pods' grace period ends
    kubelets.step()
    cluster.poll()
    status = cluster.drain("nm-1")
    assert not status.done
    assert status.blocked  # web-2 is still protected
    stub.update("poddisruptionbudgets", "default", "web", lambda p: p["status"].update(disruptionsAllowed=1))  # a replacement became healthy
    cluster.poll()
    assert not cluster.drain("nm-1").done  # evicted; terminating for its grace period
    clock.advance(30)
    kubelets.step()
    cluster.poll()
    assert cluster.drain("nm-1").done
    left = {p["metadata"]["name"] for p in stub.items("pods")}
    assert left == {"agent"}


def test_an_unprocessed_budget_asks_to_retry_later(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    stub.add_pdb("default", "web", {"app": "web"}, processed=False)
    cluster, _ = drain_setup(stub, cloud, clock)
    status = cluster.drain("nm-1")
    assert any("still being processed" in b for b in status.blocked)
    assert "blocked" in str(status)


def test_labels_and_events(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    registered(stub, cloud, clock, "nm-1")
    stub.create_pod("p", namespace="team")
    cluster = source(stub, cloud, clock, kube_config())
    cluster.list()
    labels = {"node.kubernetes.io/instance-type": "a.large", "nodemanager.io/pool": "general", "kubernetes.io/hostname": "nm-1"}
    cluster.label_node("nm-1", labels)
    node = stub.get("nodes", "", "ip-10-0-0-1.ec2.internal")
    assert node is not None
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "a.large"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "ip-10-0-0-1.ec2.internal"  # the kubelet's own stays
    cluster.poll()
    patches = len([c for c in stub.calls if c.verb == "patch"])
    cluster.label_node("nm-1", labels)
    assert len([c for c in stub.calls if c.verb == "patch"]) == patches  # nothing missing: no call
    cluster.record_event("Pod", "team/p", "TriggeredScaleUp", "booting node nm-2 for this pod")
    cluster.record_event("Pod", "team/p", "TriggeredScaleUp", "booting node nm-2 for this pod")  # said already
    cluster.record_event("Node", "nm-1", "Terminating", "idle for 30s", warning=False)
    (pod_event,) = stub.events_for("p")
    assert pod_event["metadata"]["namespace"] == "team"
    assert pod_event["involvedObject"]["uid"]
    (node_event,) = stub.events_for("ip-10-0-0-1.ec2.internal")
    assert node_event["metadata"]["namespace"] == "default"
    assert node_event["reason"] == "Terminating"
    assert node_event["source"] == {"component": "nodemanager"}


def test_remove_node_deletes_the_node_object_once(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    registered(stub, cloud, clock, "nm-1")
    cluster = source(stub, cloud, clock, kube_config())
    cluster.list()
    cluster.remove_node("nm-1")
    cluster.remove_node("nm-1")  # a retried reap: 404 is fine
    assert stub.get("nodes", "", "ip-10-0-0-1.ec2.internal") is None
    assert [(e.type, e.node.name) for e in cluster.poll() if isinstance(e, NodeEvent)] == [(EventType.DELETED, "nm-1")]


def test_node_metrics_come_under_our_names(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    registered(stub, cloud, clock, "nm-1")
    stub.create_pod("p", node="ip-10-0-0-1.ec2.internal")
    stamp = "2027-01-15T08:00:00Z"
    stub.metrics["nodes"] = [{"metadata": {"name": "ip-10-0-0-1.ec2.internal"}, "timestamp": stamp, "usage": {"cpu": "700m", "memory": "2Gi"}}]
    stub.metrics["pods"] = [{"metadata": {"name": "p", "namespace": "default"}, "containers": [{"name": "main", "usage": {"cpu": "500m", "memory": "1Gi"}}]}]
    cluster = source(stub, cloud, clock, kube_config())
    cluster.list()
    metrics = cluster.node_metrics()
    assert set(metrics) == {"nm-1"}
    assert metrics["nm-1"].system_cpu == 200
    assert metrics["nm-1"].pods["default/p"].cpu == 500
    stub.fail("GET", "metrics.k8s.io", 503, "unavailable")
    assert cluster.node_metrics() == {}


def device_objects(stub: KubeStub, version: str = "v1") -> None:
    """A driver's slice, a class and claims, each in the shape ``version`` gives them: v1beta1
    nests a device under ``basic`` and a request's fields on the request itself; v1beta2 and
    v1 put a device's fields on the device and a request's under ``exactly``."""
    group = f"resource.k8s.io/{version}"
    stub.add("deviceclasses", {"apiVersion": group, "kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {}})
    fields = {"attributes": {"model": {"string": "a100"}}, "capacity": {"memory": {"value": "40Gi"}}}
    devices = [{"name": f"g{i}", **({"basic": fields} if version == "v1beta1" else fields)} for i in range(2)]
    spec = {
        "driver": "gpu.example.com",
        "nodeName": "ip-10-0-0-1.ec2.internal",
        "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
        "devices": devices,
    }
    stub.add("resourceslices", {"apiVersion": group, "kind": "ResourceSlice", "metadata": {"name": "s1"}, "spec": spec})

    def request(**exactly: object) -> dict:
        fields = {"deviceClassName": "gpu", **exactly}
        return {"devices": {"requests": [{"name": "r", **fields} if version == "v1beta1" else {"name": "r", "exactly": fields}]}}

    stub.add("resourceclaims", {"apiVersion": group, "kind": "ResourceClaim", "metadata": {"name": "want", "namespace": "default"}, "spec": request(count=1)})
    taken = {"allocation": {"devices": {"results": [{"request": "r", "driver": "gpu.example.com", "pool": "p", "device": "g0"}]}}}
    stub.add("resourceclaims", {"apiVersion": group, "metadata": {"name": "taken", "namespace": "default"}, "spec": request(count=1), "status": taken})
    stub.add("resourceclaims", {"apiVersion": group, "metadata": {"name": "bad", "namespace": "default"}, "spec": request(allocationMode="Some")})


def test_device_claims_come_from_the_api_server(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock, caplog: pytest.LogCaptureFixture) -> None:
    registered(stub, cloud, clock, "nm-1")
    device_objects(stub)
    cluster = source(stub, cloud, clock, kube_config())
    cluster.list()
    context = cluster.devices()
    assert context is not None
    assert set(context.classes) == {"gpu"}
    assert set(context.claims) == {"default/want", "default/taken"}  # the unreadable one is skipped
    assert "resourceClaims default/bad.spec.devices.requests[0].allocationMode" in caplog.text
    assert [d.device for d in context.claims["default/taken"].allocation.devices] == ["g0"]  # type: ignore[union-attr]
    assert [len(s.devices) for s in context.published_for("nm-1")] == [2]  # the driver's slice, under our name
    stub.fail("GET", "resourceslices", 503, "unavailable")
    assert cluster.devices() is None


@pytest.mark.parametrize(("served", "used"), [(("v1beta1",), "v1beta1"), (("v1beta1", "v1beta2"), "v1beta2"), (("v1beta1", "v1beta2", "v1"), "v1")])
def test_an_allocation_is_written_to_the_claim_and_reserved_for_its_pod_in_the_newest_version_served(
    stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock, served: tuple[str, ...], used: str
) -> None:
    stub.resource_versions = served  # 1.32 with the group enabled; 1.33; 1.34 (§11)
    registered(stub, cloud, clock, "nm-1")
    device_objects(stub, used)
    stub.create_pod("trainer", extra_spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "want"}]})
    cluster = source(stub, cloud, clock, kube_config())
    cluster.list()
    context = cluster.devices()
    assert context is not None
    assert set(context.claims) == {"default/want", "default/taken"}
    assert context.claims["default/want"].requests[0].device_class == "gpu"
    assert [len(s.devices) for s in context.published_for("nm-1")] == [2]
    assert context.published_for("nm-1")[0].devices[0].capacity["memory"] == 40 * 2**30
    cluster.allocate_claim("default/want", "nm-1", AllocationResult((DeviceResult("r", "gpu.example.com", "p", "g1"),)))
    status = stub.get("resourceclaims", "default", "want")["status"]  # type: ignore[index]
    assert status["allocation"]["devices"]["results"] == [{"request": "r", "driver": "gpu.example.com", "pool": "p", "device": "g1"}]
    assert status["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["ip-10-0-0-1.ec2.internal"]
    (user,) = status["reservedFor"]
    assert user["name"] == "trainer"
    assert user["uid"] == stub.get("pods", "default", "trainer")["metadata"]["uid"]  # type: ignore[index]
    again = cluster.devices()
    assert again is not None
    assert again.claims["default/want"].allocation is not None  # read back as allocated
    assert {c.version for c in stub.calls if c.group == "resource.k8s.io" and c.resource} == {used}
    assert len([c for c in stub.calls if c.group == "resource.k8s.io" and not c.resource]) == 1  # discovery asked once


def test_a_server_without_resource_k8s_io_is_said_once_and_asked_again_rarely(
    stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    stub.resource_versions = ()  # 1.32 without the feature gate (§11)
    cluster = source(stub, cloud, clock, kube_config())
    cluster.list()
    for _ in range(5):
        context = cluster.devices()
        assert context is not None
        assert "resource.k8s.io is not served by the API server" in context.unavailable
        clock.advance(60)
    assert caplog.text.count("resource.k8s.io is not served") == 1
    discoveries = [c for c in stub.calls if c.group == "resource.k8s.io"]
    assert len(discoveries) == 1  # not every loop
    stub.resource_versions = ("v1beta1",)  # the group enabled later
    device_objects(stub, "v1beta1")
    clock.advance(600)
    context = cluster.devices()
    assert context is not None
    assert not context.unavailable
    assert set(context.classes) == {"gpu"}


def test_a_claim_made_from_a_template_is_known_by_its_generated_name(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    stub.create_pod(
        "trainer", extra_spec={"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}, {"name": "x", "resourceClaimName": "shared"}]}
    )
    cluster = source(stub, cloud, clock, kube_config())
    (listed,) = [e.pod for e in cluster.list() if isinstance(e, PodEvent)]
    assert listed.claims == ("default/trainer-gpu", "default/shared")
    generated = [{"name": "gpu", "resourceClaimName": "trainer-gpu-7x2kq"}]
    stub.update("pods", "default", "trainer", lambda p: p["status"].update(resourceClaimStatuses=generated))
    (changed,) = [e.pod for e in cluster.poll() if isinstance(e, PodEvent)]
    assert changed.claims == ("default/trainer-gpu-7x2kq", "default/shared")


def test_a_dropped_connection_is_one_failure_not_three_urllib3_retry_warnings(stub: KubeStub, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The reflectors and loops retry with their own backoff; urllib3 retrying underneath
    them only added three warnings per failed reconnect."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "stub", "cluster": {"server": stub.host}}],
                "users": [{"name": "u", "user": {"token": stub.token}}],
                "contexts": [{"name": "c", "context": {"cluster": "stub", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    api = api_client(KubeSettings(kubeconfig=str(kubeconfig)))
    assert client.CoreV1Api(api).list_node().items == []  # the kubeconfig's server and token are used
    stub.blocked.add(stub.token)  # the connection dies with no reply
    with pytest.raises(urllib3.exceptions.HTTPError):
        client.CoreV1Api(api).list_node(_request_timeout=5)
    assert "Retrying" not in caplog.text


def test_the_client_pools_a_connection_for_every_watch_and_says_once_that_tls_is_not_verified(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """On a real cluster, thirteen watches and the loops overran urllib3's pool of 10
    ("Connection pool is full"), and insecure-skip-tls-verify warned on every request."""
    kubeconfig = tmp_path / "kubeconfig"
    cluster = {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}
    doc = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "k", "cluster": cluster}], "users": [{"name": "u", "user": {"token": "t"}}]}
    doc["contexts"] = [{"name": "c", "context": {"cluster": "k", "user": "u"}}]
    doc["current-context"] = "c"
    kubeconfig.write_text(yaml.safe_dump(doc))
    with caplog.at_level("WARNING", logger="nodemanager"):
        api = api_client(KubeSettings(kubeconfig=str(kubeconfig)))
    assert api.configuration.connection_pool_maxsize >= 20
    assert [r.getMessage() for r in caplog.records] == [
        "cluster.kubernetes: the API server's certificate is not verified (insecure-skip-tls-verify in the kubeconfig)"
    ]


def test_binds_go_out_at_once_and_each_says_what_it_did(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    """A burst is bound in parallel (each bind waits here until a second is in flight: bound
    one after another, the first would wait in vain), and a refused bind is reported in its
    place without hiding the others."""
    registered(stub, cloud, clock, "nm-1")
    for name in ("a", "b", "c"):
        stub.create_pod(name)
    cluster = source(stub, cloud, clock, kube_config(), threaded=True)
    try:
        cluster.list()
        together = threading.Barrier(2, timeout=10)
        post = cluster.core.create_namespaced_pod_binding

        def meeting(name: str, *args: object, **kwargs: object) -> object:
            if name in ("a", "c"):
                together.wait()
            return post(name, *args, **kwargs)

        cluster.core.create_namespaced_pod_binding = meeting  # type: ignore[method-assign]
        outcomes = cluster.bind_all([(PodKey("default/a"), "nm-1"), (PodKey("default/gone"), "nm-1"), (PodKey("default/c"), "nm-1")])
    finally:
        cluster.stop()
    assert outcomes[0] == outcomes[2] == "ip-10-0-0-1.ec2.internal"
    assert isinstance(outcomes[1], BindError)
    assert 'pods "gone" not found' in str(outcomes[1])
    assert stub.get("pods", "default", "c")["spec"]["nodeName"] == "ip-10-0-0-1.ec2.internal"  # type: ignore[index]
