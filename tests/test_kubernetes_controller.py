"""The controller with the Kubernetes source on the API stub: pods created through the API
get nodes booted, bound through pods/binding once their Node registers, and nodes that are
no longer needed are drained, terminated and their Node objects deleted."""

from __future__ import annotations

import pytest
from builders import binpack_pool, cell_pool
from kube_helpers import Kubelets, controller, kube_config, run_loops, source
from kube_stub import KubeStub

from cloud.base import InstanceState
from cloud.simulated import SimulatedCloud
from nodemanager.cache.pod_state import PodState
from nodemanager.clock import VirtualClock
from nodemanager.config.cluster_schema import KubernetesMode
from nodemanager.controller import NodeController
from nodemanager.model import NodeState, PodKey


@pytest.fixture
def cloud(clock: VirtualClock) -> SimulatedCloud:
    return SimulatedCloud("test", clock, boot_delay=20)


def live(cloud: SimulatedCloud) -> list[str]:
    return sorted(i.node_name for i in cloud.list_instances() if i.state is not InstanceState.TERMINATED)


def test_scheduler_mode_boots_binds_and_scales_down(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    config = kube_config(cell_pool(), idle_grace=30)
    for i in range(3):
        stub.create_pod(f"job-{i}", cpu="1", memory="1Gi")
    stub.create_pod("not-ours", scheduler="default-scheduler")
    made = controller(config, cloud, source(stub, cloud, clock, config), clock)
    kubelets = Kubelets(stub, cloud, clock)
    run_loops(made, clock, kubelets, 60)

    pods = {p["metadata"]["name"]: p for p in stub.items("pods")}
    nodes = {n["metadata"]["name"]: n for n in stub.items("nodes")}
    bound = {name: p["spec"].get("nodeName") for name, p in pods.items()}
    assert bound["not-ours"] is None  # another scheduler's pod is left alone
    assert {bound[f"job-{i}"] for i in range(3)} <= set(nodes)  # bound to the kubelets' Node names
    assert len({bound[f"job-{i}"] for i in range(3)}) == 3  # cell packing: one node each
    for i in range(3):
        assert made.state.cache.state(PodKey(f"default/job-{i}")) is PodState.ADDED  # confirmed by the watch
    bindings = [c for c in stub.calls if c.subresource == "binding"]
    assert len(bindings) == 3  # each pod bound exactly once
    for node in nodes.values():  # the well-known labels were added to each Node
        labels = node["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "a.large"
        assert labels["nodemanager.io/pool"] == "cells"
        assert labels["topology.kubernetes.io/zone"] in ("zone-1a", "zone-1b")
    reasons = sorted(e["reason"] for e in stub.events_for("job-0"))
    assert reasons == ["Scheduled", "TriggeredScaleUp"]
    (scheduled,) = [e for e in stub.events_for("job-0") if e["reason"] == "Scheduled"]
    assert bound["job-0"] in scheduled["message"]  # the Node's name, not nodemanager's
    assert not [e for e in stub.items("events") if e["reason"] == "Booting"]  # no event on a Node that does not exist yet
    label_patches = [c for c in stub.calls if c.verb == "patch" and c.resource == "nodes"]
    assert len(label_patches) == 3  # one per registration, not one per loop until the watch catches up

    for i in range(3):  # the jobs finish: the kubelet removes them
        stub.delete_pod("default", f"job-{i}")
    run_loops(made, clock, kubelets, 60)
    assert live(cloud) == []
    assert stub.items("nodes") == []  # Node objects deleted after termination
    assert all(n.state is NodeState.TERMINATED for n in made.state.nodes.values())
    cordons = [c for c in stub.calls if c.verb == "patch" and c.resource == "nodes"]
    assert len(cordons) >= 6  # labels at registration, then a cordon before each termination


def test_a_bind_refused_by_the_server_is_forgotten_and_retried(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    config = kube_config(binpack_pool())
    stub.create_pod("web", cpu="1", memory="1Gi")
    made = controller(config, cloud, source(stub, cloud, clock, config), clock)
    kubelets = Kubelets(stub, cloud, clock)
    stub.fail("POST", "binding$", 500, "etcdserver: request timed out")
    run_loops(made, clock, kubelets, 60)
    pod = stub.get("pods", "default", "web")
    assert pod is not None
    assert pod["spec"]["nodeName"] == "ip-10-0-0-1.ec2.internal"
    assert len(live(cloud)) == 1  # the retry used the same node; nothing more was booted
    assert len([c for c in stub.calls if c.subresource == "binding"]) == 2


def _marked_under_a_budget(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock, label: str) -> tuple[NodeController, Kubelets, str]:
    """A node running a pod whose PodDisruptionBudget allows no eviction, then marked for
    termination with ``label``."""
    config = kube_config(binpack_pool(), drain_timeout=120)
    stub.create_pod("db", cpu="1", memory="1Gi", labels={"app": "db"})
    made = controller(config, cloud, source(stub, cloud, clock, config), clock)
    kubelets = Kubelets(stub, cloud, clock)
    run_loops(made, clock, kubelets, 50)
    (name,) = [n for n, node in made.state.nodes.items() if node.state is NodeState.CLAIMED or node.state is NodeState.AVAILABLE]
    stub.add_pdb("default", "db", {"app": "db"}, disruptions_allowed=0)
    made.state.mark_for_termination(name, f"test: {label}", label)
    return made, kubelets, name


def test_a_pod_with_a_disruption_budget_holds_its_node_until_the_drain_timeout(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    made, kubelets, name = _marked_under_a_budget(stub, cloud, clock, "unhealthy")
    run_loops(made, clock, kubelets, 60)
    assert live(cloud) == [name]  # the budget holds the node
    assert stub.get("pods", "default", "db") is not None
    node_events = stub.events_for("ip-10-0-0-1.ec2.internal")
    assert node_events == [e for e in node_events if e["reason"] in ("Registered",)]
    run_loops(made, clock, kubelets, 80)
    assert live(cloud) == []  # terminated once the drain timed out
    reasons = [e["reason"] for e in stub.events_for("ip-10-0-0-1.ec2.internal")]
    assert "DrainTimeout" in reasons


def test_a_voluntary_disruption_waits_past_the_drain_timeout_for_a_disruption_budget(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    """Consolidation could keep the node: it never terminates pods a budget protects, it
    says so each drainTimeout instead (an unhealthy node, above, goes once it times out)."""
    made, kubelets, name = _marked_under_a_budget(stub, cloud, clock, "consolidation")
    run_loops(made, clock, kubelets, 400)
    assert live(cloud) == [name]
    reasons = [e["reason"] for e in stub.events_for("ip-10-0-0-1.ec2.internal")]
    assert "DrainTimeout" not in reasons
    assert "DrainBlocked" in reasons


def test_provisioner_mode_adds_capacity_and_leaves_binding_to_the_scheduler(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    config = kube_config(binpack_pool(), mode=KubernetesMode.PROVISIONER)
    stub.create_pod("web", cpu="1", memory="1Gi", scheduler="default-scheduler")
    made = controller(config, cloud, source(stub, cloud, clock, config), clock)
    kubelets = Kubelets(stub, cloud, clock)
    run_loops(made, clock, kubelets, 20)
    assert live(cloud) == []  # the scheduler has not given up on it yet
    stub.mark_unschedulable("default", "web")
    run_loops(made, clock, kubelets, 40)
    assert len(live(cloud)) == 1
    assert [c for c in stub.calls if c.subresource == "binding"] == []
    assert stub.get("pods", "default", "web")["spec"].get("nodeName") is None  # type: ignore[index]
    stub.update("pods", "default", "web", lambda p: p["spec"].update(nodeName="ip-10-0-0-1.ec2.internal"))  # the scheduler binds
    run_loops(made, clock, kubelets, 60)
    assert len(live(cloud)) == 1  # in use: kept
    stub.create_pod("api", cpu="100m", memory="64Mi", scheduler="default-scheduler")
    stub.mark_unschedulable("default", "api")
    run_loops(made, clock, kubelets, 14)
    (api,) = [w for w in made.status()["pods"]["waiting"] if w["pod"] == "default/api"]  # type: ignore[index]
    assert api["reason"].startswith("room for it on ")  # its node is Ready: not "waiting for it to be Ready"
    assert len(live(cloud)) == 1


def test_daemonset_pods_do_not_keep_a_node_and_taints_and_cordons_are_honoured(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    """§11: a real node runs DaemonSet pods for its whole life; `kubectl taint` and `kubectl
    cordon` are the cluster's word that no new pod may land there."""
    config = kube_config(binpack_pool(), idle_grace=20)
    template = {"spec": {"containers": [{"name": "p", "image": "proxy:1", "resources": {"requests": {"cpu": "100m"}}}]}}
    stub.add(
        "daemonsets",
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system"}, "spec": {"template": template}},
    )
    stub.create_pod("web", cpu="500m", memory="512Mi")
    made = controller(config, cloud, source(stub, cloud, clock, config), clock)
    kubelets = Kubelets(stub, cloud, clock)
    run_loops(made, clock, kubelets, 60)
    [kube_node] = [n["metadata"]["name"] for n in stub.items("nodes")]
    stub.create_pod("kube-proxy-x", "kube-system", cpu="100m", memory="64Mi", owner="DaemonSet", node=kube_node, scheduler="default-scheduler")
    assert made.state.cache.snapshot().daemon_sets[0].key == "kube-system/kube-proxy"

    # taint the node: a new pod that does not tolerate it is not bound there
    stub.update("nodes", "", kube_node, lambda n: n["spec"].setdefault("taints", []).append({"key": "dedicated", "value": "db", "effect": "NoSchedule"}))
    stub.create_pod("api", cpu="100m", memory="64Mi")
    run_loops(made, clock, kubelets, 60)
    api = stub.get("pods", "default", "api")
    assert api is not None
    assert api["spec"].get("nodeName") not in (None, kube_node)

    # the operator takes the taint off (a tainted node is theirs: never stopped by choice); the
    # web pod goes; its node holds only the DaemonSet pod: stopped after the grace, the proxy not evicted
    stub.update("nodes", "", kube_node, lambda n: n["spec"].update(taints=[t for t in n["spec"]["taints"] if t["key"] != "dedicated"]))
    stub.delete_pod("default", "web")
    evictions_before = [c for c in stub.calls if c.subresource == "eviction"]
    run_loops(made, clock, kubelets, 90)
    assert kube_node not in [n["metadata"]["name"] for n in stub.items("nodes")]
    evicted = [c for c in stub.calls if c.subresource == "eviction"][len(evictions_before) :]
    assert all(c.namespace != "kube-system" for c in evicted)


def one_ready_node(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> tuple[NodeController, Kubelets, str]:
    """A controller whose one pod ("web") got a node that registered: the Node's name."""
    config = kube_config(binpack_pool(), idle_grace=300)
    stub.create_pod("web", cpu="500m", memory="512Mi")
    made = controller(config, cloud, source(stub, cloud, clock, config), clock)
    kubelets = Kubelets(stub, cloud, clock)
    run_loops(made, clock, kubelets, 60)
    [kube_node] = [n["metadata"]["name"] for n in stub.items("nodes")]
    return made, kubelets, kube_node


def test_a_cordoned_node_gets_no_new_pods(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    made, kubelets, kube_node = one_ready_node(stub, cloud, clock)
    stub.update("nodes", "", kube_node, lambda n: n["spec"].update(unschedulable=True))  # kubectl cordon
    stub.create_pod("api", cpu="100m", memory="64Mi")
    run_loops(made, clock, kubelets, 60)
    api = stub.get("pods", "default", "api")
    assert api is not None
    assert api["spec"].get("nodeName") not in (None, kube_node)


def test_a_pod_with_a_claim_is_placed_against_a_server_that_serves_only_v1beta1(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    """§11: Kubernetes 1.32 serves resource.k8s.io only as v1beta1 (when enabled)."""
    stub.resource_versions = ("v1beta1",)
    made, kubelets, kube_node = one_ready_node(stub, cloud, clock)
    group = "resource.k8s.io/v1beta1"
    device = {"name": "gpu-0", "basic": {"attributes": {"model": {"string": "a10g"}}, "capacity": {"memory": {"value": "24Gi"}}}}
    spec = {"driver": "gpu.nvidia.com", "nodeName": kube_node, "pool": {"name": kube_node, "generation": 1, "resourceSliceCount": 1}, "devices": [device]}
    stub.add("resourceslices", {"apiVersion": group, "kind": "ResourceSlice", "metadata": {"name": f"{kube_node}-gpu"}, "spec": spec})
    stub.add("deviceclasses", {"apiVersion": group, "kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {}})
    claim = {"devices": {"requests": [{"name": "one", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]}}
    stub.add("resourceclaims", {"apiVersion": group, "kind": "ResourceClaim", "metadata": {"name": "want", "namespace": "default"}, "spec": claim})
    stub.create_pod("trainer", cpu="100m", memory="64Mi", extra_spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "want"}]})
    run_loops(made, clock, kubelets, 30)

    assert stub.get("pods", "default", "trainer")["spec"].get("nodeName") == kube_node  # type: ignore[index]
    status = stub.get("resourceclaims", "default", "want")["status"]  # type: ignore[index]
    assert status["allocation"]["devices"]["results"] == [{"request": "one", "driver": "gpu.nvidia.com", "pool": kube_node, "device": "gpu-0"}]
    assert status["reservedFor"][0]["name"] == "trainer"
    assert {c.version for c in stub.calls if c.group == "resource.k8s.io" and c.resource} == {"v1beta1"}
    assert len(live(cloud)) == 1


def test_pods_with_claims_say_why_when_the_server_has_no_resource_api(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    stub.resource_versions = ()  # 1.32 without the DynamicResourceAllocation gate
    config = kube_config(binpack_pool())
    stub.create_pod("trainer", cpu="100m", memory="64Mi", extra_spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "want"}]})
    made = controller(config, cloud, source(stub, cloud, clock, config), clock)
    run_loops(made, clock, Kubelets(stub, cloud, clock), 60)
    assert live(cloud) == []
    (event,) = [e for e in stub.events_for("trainer") if e["reason"] == "NotTriggerScaleUp"]
    assert "resource.k8s.io is not served by the API server" in event["message"]
    assert len([c for c in stub.calls if c.group == "resource.k8s.io"]) == 1


def test_namespace_labels_and_what_selects_pods_reach_the_scaler(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    """namespaceSelector needs namespaces' labels, default spread the Services, RCs,
    ReplicaSets and StatefulSets selecting a pod; each is listed and watched, changes too."""
    config = kube_config(binpack_pool())
    stub.add("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"tier": "web"}}})
    stub.add("services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api", "namespace": "shop"}, "spec": {"selector": {"app": "api"}}})
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "api-1", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"app": "api"}}},
    }
    stub.add("replicasets", rs)
    made = controller(config, cloud, source(stub, cloud, clock, config), clock)
    made.pool_loop()
    cached = made.state.cache.snapshot()
    assert cached.namespaces == {"shop": {"tier": "web"}}
    assert [(type(o).__name__, o.key) for o in cached.pod_selecting] == [("Service", "shop/api"), ("ReplicaSet", "shop/api-1")]
    stub.add("statefulsets", {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "shop"}, "spec": {"selector": {}}})
    stub.remove("services", "shop", "api")
    made.pool_loop()
    assert [(type(o).__name__, o.key) for o in made.state.cache.snapshot().pod_selecting] == [("ReplicaSet", "shop/api-1"), ("StatefulSet", "shop/db")]


def test_pod_disruption_budgets_reach_the_cache_with_what_the_server_allows(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    """policy/v1 budgets are listed and watched; disruptionsAllowed is the server's, and a
    budget the server has not processed yet allows nothing (the Eviction API answers 429)."""
    config = kube_config(binpack_pool())
    stub.add_pdb("shop", "api", {"app": "api"}, disruptions_allowed=2)
    made = controller(config, cloud, source(stub, cloud, clock, config), clock)
    made.pool_loop()
    assert [(b.key, b.allowed(())) for b in made.state.cache.snapshot().pdbs] == [("shop/api", 2)]
    stub.add_pdb("shop", "db", {"app": "db"}, disruptions_allowed=3, processed=False)
    made.pool_loop()
    assert [(b.key, b.allowed(())) for b in made.state.cache.snapshot().pdbs] == [("shop/api", 2), ("shop/db", 0)]


def test_a_drain_a_budget_holds_for_long_does_not_stop_other_disruption(stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
    made, kubelets, name = _marked_under_a_budget(stub, cloud, clock, "consolidation")
    run_loops(made, clock, kubelets, 60)
    assert made.disruption.unsettled() == "nodes are being removed"  # draining, within drainTimeout
    run_loops(made, clock, kubelets, 120)
    assert name in made.state.drain_blocked
    assert made.disruption.unsettled() == ""  # held by its budget: the rest of the cluster may go on


def test_a_short_status_is_kept_in_a_configmap_current_but_not_rewritten_for_nothing(stub: KubeStub, clock: VirtualClock) -> None:
    """`kubectl -n nodemanager get configmap nodemanager-status`: the pools against their
    limits, the waiting pods by reason; written when it changes (at most every 30 s) and
    every 5 minutes regardless, so its time says it is current."""
    cloud = SimulatedCloud("test", clock, boot_delay=20)
    config = kube_config(binpack_pool())
    made = controller(config, cloud, source(stub, cloud, clock, config), clock)
    kubelets = Kubelets(stub, cloud, clock)
    stub.create_pod("web", cpu="1", memory="1Gi", owner="ReplicaSet")
    run_loops(made, clock, kubelets, 7)  # one pool pass: a node booting for the pod
    first = stub.get("configmaps", "nodemanager", "nodemanager-status")
    assert first is not None
    lines = first["data"]["status"].splitlines()
    assert lines[0].startswith("nodemanager status at 20")
    assert lines[1] == "controller: test, ready"
    assert lines[3:5] == ["pools:", "  general: nodes 1, cpu 2, memory 8Gi, standby 0/0, boots ok"]
    assert lines[5] == "pods: 1 waiting, 0 bound, 0 unschedulable"
    assert lines[6].startswith("  1 waiting: planned onto nm-general-")
    run_loops(made, clock, kubelets, 90)  # the pod bound on a new node: written again
    later = stub.get("configmaps", "nodemanager", "nodemanager-status")["data"]["status"]
    assert "pods: 0 waiting, 1 bound" in later
    writes = [c for c in stub.calls if c.resource == "configmaps" and c.verb in ("create", "update")]
    run_loops(made, clock, kubelets, 120)  # nothing changes: not written
    assert [c for c in stub.calls if c.resource == "configmaps" and c.verb in ("create", "update")] == writes
    run_loops(made, clock, kubelets, 200)  # past five minutes since the last write: written, with its new time
    assert len([c for c in stub.calls if c.resource == "configmaps" and c.verb == "update"]) == len([c for c in writes if c.verb == "update"]) + 1
