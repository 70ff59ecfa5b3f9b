"""Safety against the API (the stub, taught what a real 1.32 control plane did): an operator's
cordon or taint is never drift, a device claim pins its pod, and claims are written as
kube-scheduler writes them."""

from __future__ import annotations

import pytest
from builders import binpack_pool
from kube_helpers import Kubelets, controller, kube_config, run_loops, source
from kube_stub import KubeStub

from cloud.base import InstanceState
from cloud.simulated import SimulatedCloud
from nodemanager.clock import VirtualClock
from nodemanager.controller import NodeController
from nodemanager.dra.model import AllocationResult, DeviceResult

GROUP = "resource.k8s.io/v1beta1"


@pytest.fixture
def cloud(clock: VirtualClock) -> SimulatedCloud:
    return SimulatedCloud("test", clock, boot_delay=20)


def live(cloud: SimulatedCloud) -> list[str]:
    return sorted(i.node_name for i in cloud.list_instances() if i.state is not InstanceState.TERMINATED)


def drive(made: NodeController, clock: VirtualClock, kubelets: Kubelets, seconds: float) -> None:
    """Every loop at its interval, disruption included."""
    run_loops(made, clock, kubelets, seconds, disruption=True)


def ready_node_with_a_replicaset_pod(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock, **pod: object) -> tuple[NodeController, Kubelets, str]:
    config = kube_config(binpack_pool(), idle_grace=30)
    stub.create_pod("web", cpu="500m", memory="512Mi", owner="ReplicaSet", **pod)  # type: ignore[arg-type]
    made = controller(config, cloud, source(stub, cloud, clock, config), clock)
    kubelets = Kubelets(stub, cloud, clock)
    drive(made, clock, kubelets, 60)
    [kube_node] = [n["metadata"]["name"] for n in stub.items("nodes")]
    return made, kubelets, kube_node


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda n: n["spec"].update(unschedulable=True), id="kubectl cordon"),
        pytest.param(lambda n: n["spec"]["taints"].append({"key": "test", "value": "x", "effect": "NoSchedule"}), id="NoSchedule taint"),
        pytest.param(lambda n: n["spec"]["taints"].append({"key": "test", "value": "x", "effect": "PreferNoSchedule"}), id="PreferNoSchedule taint"),
    ],
)
def test_an_operators_cordon_or_taint_is_not_drift_and_keeps_the_node(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock, change) -> None:  # type: ignore[no-untyped-def]
    """On a real 1.32 control plane the cordoned node was drained and terminated 21 s later
    ("drifted: taints changed"): the node lifecycle controller's cordon taint, or the
    operator's own, read as drift."""
    made, kubelets, kube_node = ready_node_with_a_replicaset_pod(stub, cloud, clock)
    [name] = live(cloud)
    stub.update("nodes", "", kube_node, change)
    stub._node_lifecycle(kube_node)  # the node lifecycle controller's answer: a cordon's taint
    drive(made, clock, kubelets, 900)
    assert live(cloud) == [name]
    assert "Drifted" not in made.disruption.summary()
    assert made.state.operator_held[name].endswith("an operator has the node")


def test_an_idle_cordoned_node_stays(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    made, kubelets, kube_node = ready_node_with_a_replicaset_pod(stub, cloud, clock)
    stub.update("nodes", "", kube_node, lambda n: n["spec"].update(unschedulable=True))
    stub.delete_pod("default", "web")
    drive(made, clock, kubelets, 600)
    assert len(live(cloud)) == 1


def _gpu(stub: KubeStub, kube_node: str, claim_status: dict | None = None) -> None:
    device = {"name": "gpu-0", "basic": {"attributes": {"model": {"string": "a10g"}}}}
    spec = {"driver": "gpu.nvidia.com", "nodeName": kube_node, "pool": {"name": kube_node, "generation": 1, "resourceSliceCount": 1}, "devices": [device]}
    stub.add("resourceslices", {"apiVersion": GROUP, "kind": "ResourceSlice", "metadata": {"name": f"{kube_node}-gpu"}, "spec": spec})
    stub.add("deviceclasses", {"apiVersion": GROUP, "kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {}})
    claim = {"devices": {"requests": [{"name": "one", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]}}
    doc = {"apiVersion": GROUP, "kind": "ResourceClaim", "metadata": {"name": "want", "namespace": "default"}, "spec": claim}
    if claim_status is not None:
        doc["status"] = claim_status
    stub.add("resourceclaims", doc)


def test_a_claim_is_protected_before_its_allocation_is_written_and_freed_when_its_pod_goes(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    """kube-scheduler adds resource.kubernetes.io/delete-protection before it writes an
    allocation; the resourceclaim controller deallocates a claim whose last user left only
    if it is there (a shared claim stayed allocated to a deleted Node's device)."""
    stub.resource_versions = ("v1beta1",)
    made, kubelets, kube_node = ready_node_with_a_replicaset_pod(stub, cloud, clock)
    _gpu(stub, kube_node)
    stub.create_pod("trainer", cpu="100m", memory="64Mi", owner="ReplicaSet", extra_spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "want"}]})
    drive(made, clock, kubelets, 30)
    claim = stub.get("resourceclaims", "default", "want")
    assert claim is not None
    assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    writes = [c.subresource for c in stub.calls if c.resource == "resourceclaims" and c.verb == "patch"]
    assert writes == ["", "status"]  # the finalizer first
    stub.delete_pod("default", "trainer")
    claim = stub.get("resourceclaims", "default", "want")
    assert claim is not None
    assert "allocation" not in claim["status"]
    assert claim["metadata"]["finalizers"] == []


def test_a_pod_with_an_allocated_claim_is_never_consolidated_off_its_device(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    stub.resource_versions = ("v1beta1",)
    made, kubelets, kube_node = ready_node_with_a_replicaset_pod(stub, cloud, clock)
    _gpu(stub, kube_node)
    stub.create_pod("trainer", cpu="100m", memory="64Mi", owner="ReplicaSet", extra_spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "want"}]})
    drive(made, clock, kubelets, 30)
    assert stub.get("pods", "default", "trainer")["spec"]["nodeName"] == kube_node  # type: ignore[index]
    stub.delete_pod("default", "web")  # the node now holds only the GPU pod: a cheaper node would hold it, without the GPU
    drive(made, clock, kubelets, 900)
    assert stub.get("pods", "default", "trainer")["spec"]["nodeName"] == kube_node  # type: ignore[index]
    assert not made.disruption.summary()
    (why,) = made.disruption.blocked.values()
    assert "holds device claims allocated on this node" in why


def test_a_pod_using_a_claim_allocated_on_a_node_that_is_gone_waits_and_boots_nothing(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    """The stale claim of a deleted Node: its pod was bound to a c5.xlarge with no GPU."""
    stub.resource_versions = ("v1beta1",)
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["ip-10-9-9-9.ec2.internal"]}]}
    allocation = {
        "devices": {"results": [{"request": "one", "driver": "gpu.nvidia.com", "pool": "gone", "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [term]},
    }
    _gpu(stub, "ip-10-9-9-9.ec2.internal", {"allocation": allocation})
    config = kube_config(binpack_pool())
    stub.create_pod("trainer", cpu="100m", memory="64Mi", owner="ReplicaSet", extra_spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "want"}]})
    made = controller(config, cloud, source(stub, cloud, clock, config), clock)
    drive(made, clock, Kubelets(stub, cloud, clock), 120)
    assert stub.get("pods", "default", "trainer")["spec"].get("nodeName") is None  # type: ignore[index]
    assert live(cloud) == []
    assert made.state.last_decision is not None
    assert "allocated elsewhere" in made.state.last_decision.unschedulable["default/trainer"]


def test_allocating_sends_the_finalizer_as_a_strategic_merge(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    """A claim that already carries another finalizer keeps it."""
    stub.resource_versions = ("v1beta1",)
    _gpu(stub, "n")
    stub.update("resourceclaims", "default", "want", lambda c: c["metadata"].update(finalizers=["example.com/keep"]))
    cluster = source(stub, cloud, clock, kube_config())
    cluster.list()
    cluster.devices()
    cluster.allocate_claim("default/want", "n", AllocationResult((DeviceResult("one", "gpu.nvidia.com", "n", "gpu-0"),)))
    claim = stub.get("resourceclaims", "default", "want")
    assert claim is not None
    assert claim["metadata"]["finalizers"] == ["example.com/keep", "resource.kubernetes.io/delete-protection"]
