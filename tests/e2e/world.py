"""nodemanager against the real control plane: a simulated cloud whose instances become Nodes
the way a real cluster makes them, and the controller's loops driven in real time.

The registrar plays kubelet registration and the cloud controller manager: for each instance
the cloud runs, a Node named like EC2's private DNS name, with its ``providerID``, the zone,
region, instance-type and architecture labels, the catalog's capacity and the
``node.cloudprovider.kubernetes.io/uninitialized`` taint, taken off once the Node is Ready
(as the cloud controller manager does once it has initialized it); kwok (which manages
Nodes annotated ``kwok.x-k8s.io/node: fake``) then keeps its status Ready and its Lease fresh
and runs its pods; the real node lifecycle controller takes the not-ready taint off. A
terminated instance's Node is deleted, as the cloud controller manager would.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from controlplane import ControlPlane
from kubernetes import client, utils

from cloud.base import InstanceState
from cloud.catalog import Catalog
from cloud.simulated import SimulatedCloud
from nodemanager.clock import RealClock
from nodemanager.cluster.kubernetes.connect import CONNECTIONS
from nodemanager.cluster.kubernetes.source import KubernetesCluster
from nodemanager.config.schema import ProviderConfig
from nodemanager.controller import InlineExecutor, NodeController
from nodemanager.model.reservation import Reservation

KWOK = {"kwok.x-k8s.io/node": "fake"}
UNINITIALIZED = {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}
_REGISTRARS = itertools.count(1)


def api_client(plane: ControlPlane, user: str = "admin", token: str | None = None) -> client.ApiClient:
    configuration = client.Configuration(host=plane.host, api_key={"authorization": token or plane.token(user)}, api_key_prefix={"authorization": "Bearer"})
    configuration.ssl_ca_cert = str(plane.root / "certs" / "apiserver.crt")  # its self-signed serving certificate
    configuration.connection_pool_maxsize = CONNECTIONS
    return client.ApiClient(configuration)


SHIPPED = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


def apply_shipped(api: client.ApiClient, *manifests: str) -> None:
    """``deploy/kubernetes/<manifest>`` applied as a user would. Tests share a control plane:
    what another applied already stands (409), so the namespace is always the shipped one,
    with its Pod Security labels, whichever test made it first."""
    for name in manifests:
        try:
            utils.create_from_yaml(api, str(SHIPPED / name))
        except utils.FailToCreateError as err:
            refused = [e for e in err.api_exceptions if e.status != 409]
            if refused:
                raise AssertionError(f"{name}: {[e.body for e in refused]}") from None


def new_namespace(core: client.CoreV1Api, name: str, timeout: float = 30.0) -> str:
    """A namespace made, once pods can be made in it: the ServiceAccount controller has made
    its ``default`` account (until then the API server refuses pods: 403)."""
    core.create_namespace({"metadata": {"name": name}})
    deadline = time.monotonic() + timeout
    while not any(a.metadata.name == "default" for a in core.list_namespaced_service_account(name).items):
        assert time.monotonic() < deadline, f"no default ServiceAccount in {name} within {timeout} s"
        time.sleep(0.1)
    return name


def kube_answer(core: client.CoreV1Api, namespace: str, name: str, timeout: float = 15.0) -> tuple[str, str]:
    """kube-scheduler's answer for a pod: (its node, "") once bound, ("", why) once it has
    said the pod is unschedulable (its PodScheduled condition)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod(name, namespace)
        if pod.spec.node_name:
            return pod.spec.node_name, ""
        for c in pod.status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                return "", c.message or "unschedulable"
        time.sleep(0.1)
    raise AssertionError(f"kube-scheduler gave no answer for {namespace}/{name} within {timeout} s")


class Registrar:
    def __init__(self, plane: ControlPlane, cloud: SimulatedCloud, catalog: Catalog) -> None:
        self.core = client.CoreV1Api(api_client(plane))
        self.cloud = cloud
        self.catalog = catalog
        self.names: dict[str, str] = {}  # instance id -> Node name
        self.solo = False  # the next Nodes get a kwok of their own (ControlPlane.kubelet) instead of the shared one
        self.plane = plane
        self.kubelets: dict[str, object] = {}  # Node -> its own kwok
        self.initialized: set[str] = set()  # Nodes whose uninitialized taint the "cloud controller manager" took off
        self.prefix = f"ip-10-{next(_REGISTRARS)}"  # its Nodes' names: apart from another registrar's
        self._made = itertools.count()  # (a name is never used twice: a deleted Node may linger)

    def step(self) -> None:
        running = {i.instance_id: i for i in self.cloud.list_instances() if i.state is InstanceState.RUNNING}
        for instance_id, instance in running.items():
            if instance_id in self.names:
                continue
            n = next(self._made)
            name = f"{self.prefix}-{n // 250}-{n % 250 + 1}.ec2.internal"
            itype = self.catalog.get(instance.instance_type)
            assert itype is not None
            capacity = {"cpu": str(itype.vcpu), "memory": f"{itype.memory_mib}Mi", "pods": "110"}
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "arm64" if "arm64" in itype.architectures else "amd64",
                "node.kubernetes.io/instance-type": instance.instance_type,
                "topology.kubernetes.io/zone": instance.zone,
                "topology.kubernetes.io/region": instance.zone[:-1],
                "type": "kwok",
            }
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "solo"} if self.solo else dict(KWOK)},
                "spec": {"providerID": f"aws:///{instance.zone}/{instance_id}", "taints": [UNINITIALIZED]},
                "status": {"capacity": capacity, "allocatable": capacity},
            }
            self.core.create_node(body)
            self.names[instance_id] = name
            if self.solo:
                self.kubelets[name] = self.plane.kubelet(name)
        for name in self._uninitialized():  # the cloud controller manager's part, once the kubelet is Ready
            node = self.core.read_node(name)
            if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or []):
                taints = [t.to_dict() for t in node.spec.taints or [] if t.key != UNINITIALIZED["key"]]
                self.core.patch_node(name, {"spec": {"taints": taints}})
                self.initialized.add(name)
        for instance_id in [i for i in self.names if i not in running]:
            name = self.names.pop(instance_id)
            try:
                self.core.delete_node(name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise

    def _uninitialized(self) -> list[str]:
        return [name for name in self.names.values() if name not in self.initialized]

    def remove_all(self) -> None:
        for name in self.names.values():
            with contextlib.suppress(client.ApiException):
                self.core.delete_node(name)
        self.names.clear()


class World:
    """A controller over the simulated cloud and the real API server, its loops run in real
    time by ``run_until`` (the cloud's boots take ``boot_delay`` real seconds)."""

    def __init__(
        self,
        plane: ControlPlane,
        config: ProviderConfig,
        catalog: Catalog,
        boot_delay: float = 1.0,
        token: str | None = None,
        *,
        reservations: Sequence[tuple[Reservation, float]] = (),
    ) -> None:
        self.plane = plane
        self.clock = RealClock()
        self.cloud = SimulatedCloud(config.controller_id or "e2e", self.clock, boot_delay=boot_delay, reservations=reservations)
        self.config, self.catalog, self.token = config, catalog, token
        self.registrar = Registrar(plane, self.cloud, catalog)
        self.core = client.CoreV1Api(api_client(plane))
        self.apps = client.AppsV1Api(api_client(plane))
        self.restart()

    def restart(self) -> None:
        """A new nodemanager process over the same cloud and cluster: it recovers from the
        instances' tags and the API server."""
        old = getattr(self, "cluster", None)
        if old is not None:
            old.stop()
        assert self.config.cluster.kubernetes is not None
        settings = self.config.cluster.kubernetes
        self.cluster = KubernetesCluster(api_client(self.plane, token=self.token), self.cloud, self.clock, settings, identity="e2e")
        self.controller = NodeController(self.config, self.catalog, self.cloud, self.cluster, self.clock, executor=InlineExecutor())
        self.controller.recover()

    def step(self) -> None:
        self.registrar.step()
        c = self.controller
        c.reservations_loop()
        c.pool_loop()
        c.heartbeat_loop()
        c.reaper_loop()
        c.disruption_loop()

    def run_until(self, done: Callable[[], bool], timeout: float, every: float = 0.5) -> bool:
        """Loops every ``every`` seconds until ``done()`` or ``timeout`` (real seconds)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.step()
            if done():
                return True
            time.sleep(every)
        return False

    def run_for(self, seconds: float, every: float = 0.5) -> None:
        self.run_until(lambda: False, seconds, every)

    def live_instances(self) -> list[str]:
        return sorted(i.instance_id for i in self.cloud.list_instances() if i.state is not InstanceState.TERMINATED)

    def pods(self, namespace: str) -> dict[str, client.V1Pod]:
        return {p.metadata.name: p for p in self.core.list_namespaced_pod(namespace).items}

    def close(self) -> None:
        self.cluster.stop()
        for instance in self.live_instances():
            self.cloud.terminate([instance])
        self.registrar.remove_all()
