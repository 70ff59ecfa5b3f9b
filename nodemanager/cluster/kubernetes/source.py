"""``KubernetesCluster``: the ``ClusterSource`` for a real cluster, through the official client.

Three reflectors (pods, nodes, node Leases in ``kube-node-lease``) list and then watch; in
the service each runs in its own thread, reconnecting with jittered exponential backoff
(tenacity). The threads only collect raw changes; ``poll()`` turns them into cache events.
Conversion, names and the views that drains read belong to the loops' side (one lock).

Names: a kubelet names its Node (``ip-10-0-1-7.ec2.internal``), nodemanager names its
instances. A Node whose ``spec.providerID`` (``aws:///<zone>/<instance id>``) is one of our
instances is reported under our name, and binds and deletes translate back. Nodes that are
not ours keep their own names (their pods still count where they run).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from tenacity import RetryCallState, RetryError, Retrying, retry_if_exception_type, stop_when_event_set, wait_exponential_jitter

from cloud.base import CloudClient
from nodemanager.clock import Clock
from nodemanager.cluster.base import BindError, ClusterEvent, ClusterNode, DrainStatus, EventType, NodeEvent, ObjectEvent, PodEvent, bind_each
from nodemanager.cluster.kubernetes.convert import drain_facts, node_from_api, parse_time, pod_from_api
from nodemanager.cluster.kubernetes.devices import DeviceApi
from nodemanager.cluster.kubernetes.errors import NETWORK_ERRORS, api_message
from nodemanager.cluster.kubernetes.events import COMPONENT, EventRecorder
from nodemanager.cluster.kubernetes.node_names import NodeNames
from nodemanager.cluster.kubernetes.reachability import Reachability
from nodemanager.cluster.kubernetes.reflector import Change, Reflector
from nodemanager.cluster.metrics_api import read_metrics
from nodemanager.config.cluster_schema import KubernetesCluster as Settings
from nodemanager.config.cluster_schema import KubernetesMode
from nodemanager.deadline import api_timeout
from nodemanager.dra.context import DeviceContext
from nodemanager.dra.model import AllocationResult, allocation_document
from nodemanager.errors import NodeManagerError
from nodemanager.model import Pod, PodKey
from nodemanager.model import volumes as kv
from nodemanager.model.daemonset import DaemonSet
from nodemanager.model.labels import HOSTNAME
from nodemanager.model.pdb import PodDisruptionBudget
from nodemanager.model.pod_owners import Namespace, ReplicaSet, ReplicationController, Service, StatefulSet
from nodemanager.noderesource.model import NodeMetric

log = logging.getLogger("nodemanager.kubernetes")

NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_EVENT_NAMESPACE = "default"  # events on cluster-scoped objects live here
BIND_WORKERS = 16  # binds in flight at once (each holds a connection of connect.CONNECTIONS)
# Kinds that become ObjectEvents, and how each API document is read.
OBJECT_PARSERS = {
    "daemonsets": DaemonSet.from_manifest,
    "persistentvolumeclaims": kv.parse_claim,
    "persistentvolumes": kv.parse_volume,
    "storageclasses": kv.parse_storage_class,
    "namespaces": Namespace.from_manifest,
    "services": Service.from_manifest,
    "replicationcontrollers": ReplicationController.from_manifest,
    "replicasets": ReplicaSet.from_manifest,
    "statefulsets": StatefulSet.from_manifest,
    "poddisruptionbudgets": PodDisruptionBudget.from_manifest,
}


class KubernetesCluster:
    def __init__(
        self,
        api: client.ApiClient,
        cloud: CloudClient,
        clock: Clock,
        settings: Settings,
        *,
        threaded: bool = True,
        identity: str = COMPONENT,
        page_size: int | None = None,
        reachability: Reachability | None = None,
    ) -> None:
        self.settings = settings
        self.reachability = reachability or Reachability(clock)
        self.schedules_pods = settings.mode is KubernetesMode.SCHEDULER
        self.publishes_status = True
        self._status_failures = 0
        self.clock = clock
        self.identity = identity
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self._device_api = DeviceApi(api, clock)
        coordination = client.CoordinationV1Api(api)
        apps = client.AppsV1Api(api)
        sized: dict[str, Any] = {"asking": self.reachability.asking} | ({"page_size": page_size} if page_size else {})
        self.reflectors = {
            "nodes": Reflector("nodes", self.core.list_node, **sized),
            "leases": Reflector("node leases", partial(coordination.list_namespaced_lease, NODE_LEASE_NAMESPACE), **sized),
            "pods": Reflector("pods", self.core.list_pod_for_all_namespaces, **sized),
            "daemonsets": Reflector("daemonsets", apps.list_daemon_set_for_all_namespaces, **sized),
            "persistentvolumeclaims": Reflector("persistentvolumeclaims", self.core.list_persistent_volume_claim_for_all_namespaces, **sized),
            "persistentvolumes": Reflector("persistentvolumes", self.core.list_persistent_volume, **sized),
            "storageclasses": Reflector("storageclasses", client.StorageV1Api(api).list_storage_class, **sized),
            # What inter-pod constraints read: namespace labels, and what selects pods (default spread).
            "namespaces": Reflector("namespaces", self.core.list_namespace, **sized),
            "services": Reflector("services", self.core.list_service_for_all_namespaces, **sized),
            "replicationcontrollers": Reflector("replicationcontrollers", self.core.list_replication_controller_for_all_namespaces, **sized),
            "replicasets": Reflector("replicasets", apps.list_replica_set_for_all_namespaces, **sized),
            "statefulsets": Reflector("statefulsets", apps.list_stateful_set_for_all_namespaces, **sized),
            # What voluntary disruption may evict now (the Eviction API has the last word).
            "poddisruptionbudgets": Reflector("poddisruptionbudgets", client.PolicyV1Api(api).list_pod_disruption_budget_for_all_namespaces, **sized),
        }
        self.threaded = threaded
        self._changes: queue.SimpleQueue[tuple[str, Change]] = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._binders = ThreadPoolExecutor(BIND_WORKERS, thread_name_prefix="k8s-bind") if threaded else None
        self._events = EventRecorder(self.core, clock, identity, self._stopped, threaded=threaded, reachability=self.reachability)
        self._listed = False
        self._names = NodeNames(cloud, clock)  # Node names <-> our node names, through the instances
        # The controller's loops and a follower's poll may meet at a leadership change.
        self._views_lock = threading.RLock()
        # -- the views below belong to the controller's thread (poll, list, bind, drain) --
        self._docs: dict[str, dict[str, dict]] = {kind: {} for kind in self.reflectors}
        self._pods: dict[str, Pod] = {}  # what the cache was told, by "namespace/name"
        self._nodes: dict[str, ClusterNode] = {}  # what the cache was told, by the Node's name
        self._unreadable: set[tuple[str, str]] = set()  # (pod, resourceVersion) already warned about
        self._objects: dict[tuple[str, str], Any] = {}  # (kind, key) -> what the cache was told
        self._labelled: dict[str, tuple] = {}  # Node -> (its resourceVersion, labels) when last patched

    # -- ClusterSource: reading ---------------------------------------------------------------
    def list(self) -> list[ClusterEvent]:
        with self._views_lock:
            return self._list()

    def _list(self) -> list[ClusterEvent]:
        if not self._listed:
            for kind, reflector in self.reflectors.items():
                for change in reflector.relist():
                    self._changes.put((kind, change))
            self._listed = True
            if self.threaded:
                self._start_watching()
        self._drain_changes()
        nodes: list[ClusterEvent] = [NodeEvent(EventType.ADDED, n) for _, n in sorted(self._nodes.items())]
        objects: list[ClusterEvent] = [ObjectEvent(EventType.ADDED, key, obj) for (_, key), obj in sorted(self._objects.items())]
        return objects + nodes + [PodEvent(EventType.ADDED, p) for _, p in sorted(self._pods.items())]

    def poll(self) -> list[ClusterEvent]:
        with self._views_lock:
            return self._poll()

    def _poll(self) -> list[ClusterEvent]:
        if not self._listed:
            try:
                self._list()
            except NETWORK_ERRORS as exc:  # a follower's first listing: tried again next poll
                self.reachability.failed("first listing", api_message(exc))
            return []
        if not self.threaded:
            for kind, reflector in self.reflectors.items():
                try:
                    reflector.watch(partial(self._collect, kind))
                except NETWORK_ERRORS as exc:
                    self.reachability.failed(f"{kind} watch", api_message(exc))
        return self._drain_changes()

    def _collect(self, kind: str, changes: Iterable[Change]) -> None:
        for change in changes:
            self._changes.put((kind, change))

    def _start_watching(self) -> None:
        for kind, reflector in self.reflectors.items():
            thread = threading.Thread(target=self._watch_forever, args=(kind, reflector), name=f"watch-{kind}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _watch_forever(self, kind: str, reflector: Reflector) -> None:
        def warn(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            if exc is None or isinstance(exc, NETWORK_ERRORS):
                self.reachability.failed(f"{kind} watch", api_message(exc) if exc else "?")
            else:  # not the network: a bug or an answer nobody expected, said each time
                log.warning("%s watch failed (%s); reconnecting from resourceVersion %s", kind, exc, reflector.resource_version)

        retrying = Retrying(
            retry=retry_if_exception_type(Exception),
            wait=wait_exponential_jitter(multiplier=0.5, max=30, jitter=0.5),
            stop=stop_when_event_set(self._stopped),
            sleep=self._stopped.wait,
            before_sleep=warn,
        )
        while not self._stopped.is_set():
            try:
                retrying(reflector.watch, partial(self._collect, kind))
            except RetryError:
                return

    def stop(self) -> None:
        self._stopped.set()
        self._events.close()
        if self._binders is not None:
            self._binders.shutdown(wait=False)

    # -- raw changes to cache events ------------------------------------------------------------
    def _drain_changes(self) -> list[ClusterEvent]:
        events: list[ClusterEvent] = []
        while True:
            try:
                kind, change = self._changes.get_nowait()
            except queue.Empty:
                break
            docs = self._docs[kind]
            if change.new is None:
                docs.pop(change.key, None)
            else:
                docs[change.key] = change.new
            if kind == "pods":
                events += self._pod_event(change.key)
            elif kind in OBJECT_PARSERS:
                events += self._object_event(kind, change.key)
            else:  # a node, or its lease ("kube-node-lease/<node>"): the node's heartbeat
                events += self._node_events(change.key.rsplit("/", 1)[-1])
        for kube in [k for k in self._docs["nodes"] if k not in self._nodes]:  # not matched to an instance yet
            events += self._node_events(kube)
        return events

    def _object_event(self, kind: str, key: str) -> list[ClusterEvent]:
        doc = self._docs[kind].get(key)
        old = self._objects.get((kind, key))
        if doc is None:
            self._objects.pop((kind, key), None)
            return [] if old is None else [ObjectEvent(EventType.DELETED, key, old)]
        try:
            new = OBJECT_PARSERS[kind](doc, f"{kind} {key}")
        except NodeManagerError as exc:
            log.warning("ignoring an object nodemanager cannot read: %s", exc)
            return []
        self._objects[(kind, key)] = new
        return [] if old == new else [ObjectEvent(EventType.ADDED if old is None else EventType.MODIFIED, key, new)]

    def _pod_event(self, key: str) -> list[ClusterEvent]:
        doc = self._docs["pods"].get(key)
        new = self._convert_pod(doc) if doc is not None else None
        old = self._pods.get(key)
        if new is None:
            self._pods.pop(key, None)
            return [] if old is None else [PodEvent(EventType.DELETED, old)]
        self._pods[key] = new
        if old == new:
            return []
        return [PodEvent(EventType.ADDED if old is None else EventType.MODIFIED, new)]

    def _convert_pod(self, doc: dict) -> Pod | None:
        try:
            pod = pod_from_api(doc, self.settings.mode, self.settings.scheduler_name)
        except NodeManagerError as exc:
            seen = (doc["metadata"].get("name", "?"), doc["metadata"].get("resourceVersion", ""))
            if seen not in self._unreadable:
                self._unreadable.add(seen)
                log.warning("ignoring a pod nodemanager cannot read: %s", exc)
            return None
        if pod is not None and pod.node_name in self._names.ours:
            pod = replace(pod, node_name=self._names.ours[pod.node_name])
        return pod

    def _node_events(self, kube: str) -> list[ClusterEvent]:
        doc = self._docs["nodes"].get(kube)
        old = self._nodes.get(kube)
        if doc is None:
            if old is None:
                return []
            del self._nodes[kube]
            self._names.forget(kube)
            return [NodeEvent(EventType.DELETED, old)]
        name = self._names.resolve(kube, doc)
        if name is None:
            return []  # ours or not is unknown until the cloud answers
        lease = self._docs["leases"].get(f"{NODE_LEASE_NAMESPACE}/{kube}")
        renewed = parse_time((lease or {}).get("spec", {}).get("renewTime"))
        try:
            new = node_from_api(doc, name, renewed)
        except NodeManagerError as exc:
            log.warning("ignoring node %s: %s", kube, exc)
            return []
        self._nodes[kube] = new
        events: list[ClusterEvent] = []
        if old is None and name != kube:  # pods already seen on it now speak of our name
            events += [e for key, p in list(self._pods.items()) if p.node_name == kube for e in self._pod_event(key)]
        if old != new:
            events.insert(0, NodeEvent(EventType.ADDED if old is None else EventType.MODIFIED, new))
        return events

    # -- ClusterSource: acting --------------------------------------------------------------------
    def bind(self, pod: PodKey, node: str) -> str:
        kube = self._names.kube.get(node)
        if kube is None:
            raise BindError(pod, node, "node has not registered with the cluster")
        namespace, name = pod.split("/", 1)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": kube},
        }
        try:
            # The client fails to read the 201 Status as a Binding after the bind is done;
            # an unparsed reply avoids that.
            self.core.create_namespaced_pod_binding(name, namespace, body, _preload_content=False, _request_timeout=api_timeout())
        except NETWORK_ERRORS as exc:
            raise BindError(pod, node, api_message(exc)) from None
        return kube

    def bind_all(self, binds: Sequence[tuple[PodKey, str]]) -> list[str | Exception]:
        """The binds at once, ``BIND_WORKERS`` at a time, as kube-scheduler binds each pod in
        a goroutine of its own: one after another, a burst was bound at one round trip a pod."""
        if self._binders is None or len(binds) < 2:
            return bind_each(self.bind, binds)
        return bind_each(self.bind, binds, self._binders.map)

    def remove_node(self, name: str) -> None:
        kube = self._names.kube.get(name)
        if kube is None:
            return
        try:
            self.core.delete_node(kube, _preload_content=False, _request_timeout=api_timeout())
            log.info("deleted Node %s (node %s)", kube, name)
        except ApiException as exc:
            if exc.status != 404:
                log.warning("deleting Node %s failed: %s", kube, api_message(exc))
        except NETWORK_ERRORS as exc:
            log.warning("deleting Node %s failed: %s", kube, api_message(exc))

    def drain(self, name: str) -> DrainStatus:
        with self._views_lock:
            return self._drain(name)

    def _drain(self, name: str) -> DrainStatus:
        kube = self._names.kube.get(name)
        doc = self._docs["nodes"].get(kube or "")
        if kube is None or doc is None:
            return DrainStatus(done=True)
        if not (doc.get("spec") or {}).get("unschedulable"):
            try:
                self.core.patch_node(kube, {"spec": {"unschedulable": True}}, _preload_content=False, _request_timeout=api_timeout())
                log.info("cordoned Node %s (node %s)", kube, name)
            except NETWORK_ERRORS as exc:
                return DrainStatus(done=False, blocked=(f"cordon failed: {api_message(exc)}",))
        now = self.clock.now()
        evicting, blocked = 0, []
        for key, pod in sorted(self._docs["pods"].items()):
            if (pod.get("spec") or {}).get("nodeName") != kube:
                continue
            facts = drain_facts(pod)
            if not facts.evictable:
                continue
            if facts.deleting_until is not None:
                evicting += facts.deleting_until > now  # its grace period runs
                continue
            namespace, pod_name = key.split("/", 1)
            eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod_name, "namespace": namespace}}
            try:
                self.core.create_namespaced_pod_eviction(pod_name, namespace, eviction, _preload_content=False, _request_timeout=api_timeout())
            except ApiException as exc:
                if exc.status != 404:
                    blocked.append(f"{key}: {api_message(exc)}")
                continue
            except NETWORK_ERRORS as exc:
                blocked.append(f"{key}: {api_message(exc)}")
                continue
            log.info("evicted %s from %s", key, name)
            evicting += 1
        return DrainStatus(done=not evicting and not blocked, evicting=evicting, blocked=tuple(blocked))

    def label_node(self, name: str, labels: Mapping[str, str]) -> None:
        kube = self._names.kube.get(name)
        doc = self._docs["nodes"].get(kube or "")
        if kube is None or doc is None:
            return
        present = doc["metadata"].get("labels") or {}
        missing = {k: v for k, v in labels.items() if k not in present and k != HOSTNAME}
        asked = (doc["metadata"].get("resourceVersion"), frozenset(missing.items()))
        if not missing or self._labelled.get(kube) == asked:
            return  # nothing missing, or patched already and the watch has not caught up
        self._labelled[kube] = asked
        try:
            self.core.patch_node(kube, {"metadata": {"labels": missing}}, _preload_content=False, _request_timeout=api_timeout())
            log.info("labelled Node %s: %s", kube, ", ".join(f"{k}={v}" for k, v in sorted(missing.items())))
        except NETWORK_ERRORS as exc:
            log.warning("labelling Node %s failed (tried again next time): %s", kube, api_message(exc))

    def record_event(self, kind: str, key: str, reason: str, message: str, *, warning: bool = False) -> None:
        if self._events.said(kind, key, f"{reason}: {message}"):
            return
        if kind == "Pod":
            namespace, name = key.split("/", 1)
            uid = (self._docs["pods"].get(key) or {}).get("metadata", {}).get("uid")
            involved = {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name, **({"uid": uid} if uid else {})}
        elif key in self._names.kube:
            namespace, name = NODE_EVENT_NAMESPACE, self._names.kube[key]
            involved = {"apiVersion": "v1", "kind": "Node", "name": name}
        else:  # no Node yet (booting): an event on an object that does not exist helps nobody
            log.debug("event %s on node %s not posted: it has no Node yet (%s)", reason, key, message)
            return
        self._events.post(namespace, name, involved, reason, message, warning=warning)

    def publish_status(self, text: str) -> None:
        """The ConfigMap ``<leaseName>-status`` in the election's namespace, replaced whole
        (made the first time)."""
        election = self.settings.leader_election
        name, namespace = f"{election.lease_name}-status", election.namespace
        labels = {"app.kubernetes.io/name": "nodemanager", "app.kubernetes.io/component": "status"}
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace, "labels": labels}, "data": {"status": text}}
        try:
            try:
                self.core.replace_namespaced_config_map(name, namespace, body, _preload_content=False, _request_timeout=api_timeout())
            except ApiException as exc:
                if exc.status != 404:
                    raise
                self.core.create_namespaced_config_map(namespace, body, _preload_content=False, _request_timeout=api_timeout())
            self._status_failures = 0
        except NETWORK_ERRORS as exc:
            if self.reachability.unanswered("status ConfigMap write", exc):
                return
            level = logging.DEBUG if self._status_failures else logging.WARNING  # once per run of failures
            self._status_failures += 1
            log.log(level, "status ConfigMap %s/%s not written: %s", namespace, name, api_message(exc))

    # -- ClusterSource: usage and devices -----------------------------------------------------------
    def node_metrics(self) -> dict[str, NodeMetric]:
        """The metrics API's figures under our node names; none (batch resources degrade)
        when it cannot be read."""
        with self._views_lock:
            pod_nodes = {key: doc["spec"]["nodeName"] for key, doc in self._docs["pods"].items() if (doc.get("spec") or {}).get("nodeName")}
        try:
            metrics = read_metrics(self.custom, pod_nodes)
        except (*NETWORK_ERRORS, NodeManagerError, KeyError, ValueError) as exc:
            log.warning("metrics API unreadable: %s", api_message(exc) if isinstance(exc, NETWORK_ERRORS) else exc)
            return {}
        return {self._names.ours.get(kube, kube): metric for kube, metric in metrics.items()}

    def devices(self) -> DeviceContext | None:
        """Device classes, claims (with their allocations) and the slices drivers published
        (``DeviceApi.read``), the slices under our node names; read when pods with claims wait."""
        context = self._device_api.read()
        if context is None or not context.slices:
            return context
        with self._views_lock:
            slices = tuple(replace(s, node_name=self._names.ours.get(s.node_name, s.node_name)) for s in context.slices)
        return replace(context, slices=slices)

    def allocate_claim(self, claim: str, node: str, result: AllocationResult) -> None:
        """Write the allocation to the claim's status and reserve it for the pods that use it
        (the kubelet prepares devices only for pods in ``reservedFor``)."""
        with self._views_lock:
            users = [
                {"resource": "pods", "name": doc["metadata"]["name"], "uid": doc["metadata"].get("uid", "")}
                for key, doc in sorted(self._docs["pods"].items())
                if key in self._pods and claim in self._pods[key].claims
            ]
        status = {"status": {"allocation": allocation_document(result, self._names.kube.get(node, node)), "reservedFor": users}}
        self._device_api.write_allocation(claim, node, status, result)
