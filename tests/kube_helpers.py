"""Helpers for the Kubernetes tests: clients of the API stub, configurations, fake kubelets."""

from __future__ import annotations

from builders import CATALOG, cell_pool
from kube_stub import KubeStub
from kubernetes import client

from cloud.base import InstanceState
from cloud.simulated import SimulatedCloud
from nodemanager.clock import VirtualClock
from nodemanager.cluster.kubernetes.source import KubernetesCluster
from nodemanager.config.cluster_schema import Cluster, ClusterSource, KubernetesMode
from nodemanager.config.cluster_schema import KubernetesCluster as KubeSettings
from nodemanager.config.schema import Loops, NodeDefaults, Pool, ProviderConfig
from nodemanager.controller import InlineExecutor, NodeController

START = 1_800_000_000.0  # the clock fixture's start (conftest)


def api_client(stub: KubeStub, token: str | None = None) -> client.ApiClient:
    """The official client, configured as a kubeconfig with a bearer token would."""
    configuration = client.Configuration(host=stub.host, api_key={"authorization": token or stub.token}, api_key_prefix={"authorization": "Bearer"})
    configuration.retries = 0  # a dropped connection is the test's business, not urllib3's
    return client.ApiClient(configuration)


def kube_config(*pools: Pool, mode: KubernetesMode = KubernetesMode.SCHEDULER, drain_timeout: float = 300.0, idle_grace: float = 30.0) -> ProviderConfig:
    return ProviderConfig(
        controller_id="test",
        pools=list(pools) or [cell_pool()],
        nodes=NodeDefaults(default_instance_type="a.large", idle_grace=idle_grace, boot_timeout=300, healthy_timeout=90, max_boots_per_loop=10, name_tag="nm"),
        loops=Loops(pool=7, heartbeat=10, reaper=10, orphan_gc=60),
        cluster=Cluster(source=ClusterSource.KUBERNETES, kubernetes=KubeSettings(mode=mode, drain_timeout=drain_timeout)),
    )


def source(
    stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock, config: ProviderConfig, token: str | None = None, *, threaded: bool = False
) -> KubernetesCluster:
    assert config.cluster.kubernetes is not None
    return KubernetesCluster(api_client(stub, token), cloud, clock, config.cluster.kubernetes, threaded=threaded, identity="test-replica")


def controller(config: ProviderConfig, cloud: SimulatedCloud, cluster: KubernetesCluster, clock: VirtualClock) -> NodeController:
    made = NodeController(config, CATALOG, cloud, cluster, clock, executor=InlineExecutor())
    made.recover()
    return made


class Kubelets:
    """What the kubelets on booted instances do: register a Node named like EC2's private DNS
    ``register_delay`` after the instance runs, renew its Lease, start the pods bound to it,
    and finish pods being deleted once their grace period is over."""

    def __init__(self, stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock, register_delay: float = 10.0) -> None:
        self.stub, self.cloud, self.clock = stub, cloud, clock
        self.register_delay = register_delay
        self.names: dict[str, str] = {}  # instance id -> Node name
        self.silent: set[str] = set()

    def step(self) -> None:
        now = self.clock.now()
        for instance in self.cloud.list_instances():
            if instance.state is not InstanceState.RUNNING or now - instance.launched_at < self.register_delay:
                continue
            if instance.instance_id not in self.names:
                name = f"ip-10-0-{len(self.names) // 250}-{len(self.names) % 250 + 1}.ec2.internal"
                itype = CATALOG.get(instance.instance_type)
                assert itype is not None
                self.stub.register_node(name, f"aws:///{instance.zone}/{instance.instance_id}", cpu=str(itype.vcpu), memory=f"{itype.memory_mib}Mi")
                self.names[instance.instance_id] = name
            elif self.stub.get("nodes", "", self.names[instance.instance_id]) is not None and self.names[instance.instance_id] not in self.silent:
                self.stub.renew_node_lease(self.names[instance.instance_id])
        for pod in self.stub.items("pods"):
            meta, node = pod["metadata"], pod["spec"].get("nodeName")
            if not node or node not in self.names.values():
                continue
            deleting = meta.get("deletionTimestamp")
            if deleting is not None:
                self.stub.delete_pod(meta["namespace"], meta["name"])
            elif pod["status"]["phase"] == "Pending":
                self.stub.set_pod_phase(meta["namespace"], meta["name"], "Running")


def run_loops(made: NodeController, clock: VirtualClock, kubelets: Kubelets, seconds: float, step: float = 1.0, *, disruption: bool = False) -> None:
    """Drive the loops at their intervals in virtual time, the kubelets every step (the
    disruption loop too, with ``disruption``)."""
    end = clock.now() + seconds
    while clock.now() < end:
        clock.advance(step)
        kubelets.step()
        t = round(clock.now() - START)
        if t % 7 == 0:
            made.pool_loop()
        if t % 10 == 0:
            made.heartbeat_loop()
            made.reaper_loop()
            if disruption:
                made.disruption_loop()
