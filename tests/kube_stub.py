"""An HTTP stub of the Kubernetes API server on 127.0.0.1 for the official client.

It keeps the semantics that ``../shared/reference/kubernetes-api-behaviour.md`` records of a
real 1.32 server, as far as nodemanager uses the API:

* one global resourceVersion counter for every kind; DELETED events carry a new RV;
* LIST with pagination (``limit``/``continue``, every page at page 1's RV; an expired
  continue token is a 410 with a fresh token); WATCH as chunked JSON lines with BOOKMARKs
  (``allowWatchBookmarks``), the initial-events-end bookmark after a watch from RV unset/"0",
  and a too-old RV answered with HTTP 200 and one ERROR event (code 410), never an HTTP 410;
* 409 on a stale ``metadata.resourceVersion`` (replace or patch) and on a create of an
  existing name (AlreadyExists);
* pods/binding: 201 with a Status; 409 "already assigned" or "being deleted"; 404; an unknown
  node is accepted;
* pods/eviction: Pending pods skip the PodDisruptionBudget; a Running pod covered by a PDB
  the server has not processed gets 429 with Retry-After 10, one with no disruption allowed a
  429 without it, two PDBs a 500; an evicted bound pod stays Terminating;
* leases: MicroTime fields must have exactly six fractional digits and an offset (else 400);
* core/v1 events: involvedObject.namespace must equal the event's namespace (else 422);
* a new Node gets the ``node.kubernetes.io/not-ready:NoSchedule`` taint; a node delete leaves
  its pods alone; a pod create gets the API server's defaults.
* a pod gone for good leaves its claims as the resourceclaim controller does: its
  ``reservedFor`` entries dropped, and a claim left with none deallocated only if it carries
  ``resource.kubernetes.io/delete-protection``; a dict PATCH of ``metadata.finalizers`` is
  a strategic merge (the finalizers join);
* with ``node_lifecycle`` (the default; a real cluster runs kube-controller-manager), the
  node lifecycle controller's part (§9, §11): a Ready Node loses the not-ready taint, and a
  cordoned one (``spec.unschedulable``) gets ``node.kubernetes.io/unschedulable:NoSchedule``
  (taken off at uncordon), each as a write of its own after the one that caused it.

Tests act as users and kubelets through the Python methods (``create_pod``,
``register_node``...), which write through the same store and so produce watch events.
A watch normally sends what is there, a bookmark, and ends (as if its timeout ran out), so
tests stay deterministic; ``hold_watches`` keeps streams open until new events or a drop.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

MICROTIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")
PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>[^/]+))(?:/namespaces/(?P<ns>[^/]+))?/(?P<res>[a-z]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[a-z]+))?)?$"
)
KINDS = {
    "pods": "Pod",
    "configmaps": "ConfigMap",
    "nodes": "Node",
    "leases": "Lease",
    "events": "Event",
    "poddisruptionbudgets": "PodDisruptionBudget",
    "deviceclasses": "DeviceClass",
    "resourceclaims": "ResourceClaim",
    "resourceslices": "ResourceSlice",
    "daemonsets": "DaemonSet",
    "persistentvolumeclaims": "PersistentVolumeClaim",
    "persistentvolumes": "PersistentVolume",
    "storageclasses": "StorageClass",
    "namespaces": "Namespace",
    "services": "Service",
    "replicationcontrollers": "ReplicationController",
    "replicasets": "ReplicaSet",
    "statefulsets": "StatefulSet",
}
CLUSTER_SCOPED = {"nodes", "deviceclasses", "resourceslices", "persistentvolumes", "storageclasses", "namespaces"}


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def microtime(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def status_body(code: int, reason: str | None, message: str, details: dict | None = None) -> dict:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure" if code >= 400 else "Success",
        "message": message,
        "code": code,
    }
    if reason:
        body["reason"] = reason
    if details:
        body["details"] = details
    if code < 400:
        body.pop("message")
    return body


class ApiError(Exception):
    def __init__(self, code: int, reason: str | None, message: str, details: dict | None = None, headers: dict | None = None) -> None:
        super().__init__(message)
        self.body = status_body(code, reason, message, details)
        self.code = code
        self.headers = headers or {}


@dataclass(frozen=True)
class Call:
    verb: str  # get list watch create update patch delete
    group: str  # "" for core
    resource: str
    subresource: str
    namespace: str
    version: str = ""  # the group's version ("" for core)


def merge(target: dict, patch: dict) -> dict:
    """A merge patch: maps merge, null deletes, lists and scalars replace."""
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections: set[Any] = set()  # open client connections (keep-alive ones serve on after shutdown())
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def cut_connections(self) -> None:
        with self._connections_lock:
            open_now = list(self.connections)
        for connection in open_now:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client hanging up (a dropped watch, a timed-out read) is routine here."""


class KubeStub:
    def __init__(self, clock: Callable[[], float] = time.time, token: str = "stub-token") -> None:
        self.clock = clock
        self.tokens = {token}
        self.token = token
        self.blocked: set[str] = set()  # tokens whose requests fail with a dropped connection
        self.cond = threading.Condition()
        self.rv = 100
        self.store: dict[str, dict[tuple[str, str], dict]] = {kind: {} for kind in KINDS}
        self.history: list[tuple[int, str, str, dict]] = []  # (rv, resource, type, object)
        self._by_kind: dict[str, list[tuple[int, str, dict]]] = {kind: [] for kind in KINDS}  # the same, by resource: (rv, type, object)
        self.oldest = 0  # a watch from an RV below this gets ERROR 410
        self.hold_watches = False
        self.node_lifecycle = True  # play kube-controller-manager's node lifecycle controller
        self.resource_versions: tuple[str, ...] = ("v1",)  # resource.k8s.io versions served (§11: 1.32 only v1beta1, if enabled)
        self.namespaces: set[str] | None = None  # None: every namespace exists; else a create elsewhere is a 404 (§11)
        self.watch_timeouts: list[float] = []  # each watch's timeoutSeconds
        self.drops = 0  # bumped to end every open watch at once
        self.drop_after: int | None = None  # the next watch dies after this many events
        self.snapshots: dict[int, list[dict]] = {}
        self.calls: list[Call] = []
        self.faults: list[tuple[str, re.Pattern[str], int, str]] = []  # (method, path, code, message)
        self.metrics: dict[str, list[dict]] = {"nodes": [], "pods": []}
        self._uid = 0
        self.server = _QuietServer(("127.0.0.1", 0), self._handler())
        self.port = self.server.server_address[1]
        self.host = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> KubeStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Gone as a stopped API server is: nothing listens, and every open connection
        (streams and keep-alive ones alike) is cut."""
        self.server.shutdown()
        self.server.server_close()
        self.server.cut_connections()
        with self.cond:
            self.drops += 1
            self.cond.notify_all()

    # -- the store ------------------------------------------------------------------------------
    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _write(self, resource: str, type_: str, obj: dict) -> dict:
        """Store (or drop, for DELETED) an object at a new RV and record the watch event."""
        with self.cond:
            meta = obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            rv = self._next_rv()
            meta["resourceVersion"] = str(rv)
            if type_ == "DELETED":
                self.store[resource].pop(key, None)
            else:
                self.store[resource][key] = obj
            copied = json.loads(json.dumps(obj))
            self.history.append((rv, resource, type_, copied))
            self._by_kind[resource].append((rv, type_, copied))
            self.cond.notify_all()
            return obj

    def get(self, resource: str, namespace: str, name: str) -> dict | None:
        with self.cond:
            found = self.store[resource].get((namespace if resource not in CLUSTER_SCOPED else "", name))
            return json.loads(json.dumps(found)) if found else None

    def items(self, resource: str) -> list[dict]:
        with self.cond:
            return [json.loads(json.dumps(o)) for _, o in sorted(self.store[resource].items())]

    def idle(self, writes: int = 1) -> None:
        """The global RV moves on with nothing of ours changing (the apiserver's own lease)."""
        with self.cond:
            for _ in range(writes):
                self._next_rv()

    def expire_history(self) -> None:
        """Every RV before the current one is now too old to watch or continue from (a watch-cache restart)."""
        with self.cond:
            self.oldest = self.rv

    def drop_watches(self) -> None:
        """End every open watch stream now (a connection drop)."""
        with self.cond:
            self.drops += 1
            self.cond.notify_all()

    def fail(self, method: str, path: str, code: int, message: str = "injected") -> None:
        """The next request matching ``method`` and the ``path`` regex gets this error."""
        self.faults.append((method, re.compile(path), code, message))

    def _new_meta(self, name: str, namespace: str = "", **extra: Any) -> dict:
        self._uid += 1
        meta = {"name": name, "uid": f"uid-{self._uid:06d}", "creationTimestamp": rfc3339(self.clock()), **extra}
        if namespace:
            meta["namespace"] = namespace
        return meta

    # -- what users and kubelets do -------------------------------------------------------------
    def create_pod(
        self,
        name: str,
        namespace: str = "default",
        *,
        cpu: str = "500m",
        memory: str = "512Mi",
        scheduler: str = "nodemanager",
        labels: dict | None = None,
        owner: str | None = None,
        node: str = "",
        annotations: dict | None = None,
        extra_spec: dict | None = None,
    ) -> dict:
        meta = self._new_meta(name, namespace, labels=labels or {}, annotations=annotations or {})
        if owner:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner", "uid": "owner-uid", "controller": True}]
        spec = {
            "containers": [{"name": "main", "image": "app:1", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
            "schedulerName": scheduler,
            "priority": 0,
            "terminationGracePeriodSeconds": 30,
            "restartPolicy": "Always",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            **(extra_spec or {}),
        }
        if node:
            spec["nodeName"] = node
        return self._write(
            "pods", "ADDED", {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending", "qosClass": "Burstable"}}
        )

    def update(self, resource: str, namespace: str, name: str, change: Callable[[dict], None]) -> dict:
        with self.cond:
            obj = self.get(resource, namespace, name)
            if obj is None:
                raise KeyError(name)
            change(obj)
            return self._write(resource, "MODIFIED", obj)

    def set_pod_phase(self, namespace: str, name: str, phase: str) -> dict:
        return self.update("pods", namespace, name, lambda p: p["status"].update(phase=phase))

    def mark_unschedulable(self, namespace: str, name: str, message: str = "0/3 nodes are available") -> dict:
        """What the default scheduler writes on a pod it cannot place."""
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message, "lastTransitionTime": rfc3339(self.clock())}
        return self.update("pods", namespace, name, lambda p: p["status"].update(conditions=[condition]))

    def delete_pod(self, namespace: str, name: str) -> None:
        """Gone for good (a kubelet finished it, or a grace-0 delete)."""
        with self.cond:
            pod = self.get("pods", namespace, name)
            if pod is not None:
                self._delete_pod(pod, 0)

    def register_node(self, name: str, provider_id: str, *, ready: bool = True, cpu: str = "2", memory: str = "8Gi", labels: dict | None = None) -> dict:
        """A kubelet registers its Node and starts its Lease in kube-node-lease."""
        now = self.clock()
        condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "lastHeartbeatTime": rfc3339(now),
            "lastTransitionTime": rfc3339(now),
            "reason": "KubeletReady",
        }
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": self._new_meta(name, labels={"kubernetes.io/hostname": name, **(labels or {})}),
            "spec": {"providerID": provider_id, "taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                "conditions": [condition],
            },
        }
        self._write("nodes", "ADDED", node)
        self._node_lifecycle(name)
        self.renew_node_lease(name)
        return node

    def renew_node_lease(self, name: str) -> None:
        with self.cond:
            lease = self.get("leases", "kube-node-lease", name)
            if lease is None:
                lease = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": self._new_meta(name, "kube-node-lease"),
                    "spec": {"holderIdentity": name, "leaseDurationSeconds": 40},
                }
                kind = "ADDED"
            else:
                kind = "MODIFIED"
            lease["spec"]["renewTime"] = microtime(self.clock())
            self._write("leases", kind, lease)

    def add_pdb(self, namespace: str, name: str, match_labels: dict, *, disruptions_allowed: int = 0, processed: bool = True) -> None:
        meta = self._new_meta(name, namespace, generation=1)
        status: dict[str, Any] = {"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": disruptions_allowed, "expectedPods": 0}
        if processed:
            status.update(observedGeneration=1, currentHealthy=2, desiredHealthy=2 + (disruptions_allowed <= 0))
        spec = {"selector": {"matchLabels": match_labels}}
        self._write(
            "poddisruptionbudgets", "ADDED", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta, "spec": spec, "status": status}
        )

    def add(self, resource: str, doc: dict) -> dict:
        """Any object as a user (or a driver) would create it."""
        meta = doc["metadata"]
        meta.update(self._new_meta(meta["name"], meta.get("namespace", "") if resource not in CLUSTER_SCOPED else ""))
        return self._write(resource, "ADDED", doc)

    def remove(self, resource: str, namespace: str, name: str) -> None:
        """Any object deleted at once, as a user would with ``kubectl delete``."""
        found = self.get(resource, namespace, name)
        if found is not None:
            self._write(resource, "DELETED", found)

    def events_for(self, name: str) -> list[dict]:
        return [e for e in self.items("events") if e["involvedObject"].get("name") == name]

    # -- the API ----------------------------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, str], body: Any, token: str) -> tuple[int, Any, dict]:
        if path.rstrip("/") == "/apis/resource.k8s.io":  # discovery of the group's versions
            self.calls.append(Call("get", "resource.k8s.io", "", "", ""))
        if path.rstrip("/") == "/apis/resource.k8s.io" and self.resource_versions:
            versions = [{"groupVersion": f"resource.k8s.io/{v}", "version": v} for v in self.resource_versions]
            return 200, {"kind": "APIGroup", "apiVersion": "v1", "name": "resource.k8s.io", "versions": versions, "preferredVersion": versions[0]}, {}
        m = PATH.match(path)
        if m is None or (m["group"] == "resource.k8s.io" and m["version"] not in self.resource_versions):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        group, res, ns, name, sub = m["group"] or "", m["res"], m["ns"] or "", m["name"] or "", m["sub"] or ""
        verb = {
            "GET": "get" if name else ("watch" if query.get("watch") == "true" else "list"),
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete",
        }[method]
        self.calls.append(Call(verb, group, res, sub, ns, m["version"] or ""))
        if token not in self.tokens:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        for fault in list(self.faults):
            if fault[0] == method and fault[1].search(path):
                self.faults.remove(fault)
                raise ApiError(fault[2], {409: "Conflict", 429: "TooManyRequests", 504: "Timeout"}.get(fault[2]), fault[3])
        if group == "metrics.k8s.io":
            return (
                200,
                {"kind": f"{KINDS.get(res, res)}MetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": self.metrics.get(res, [])},
                {},
            )
        if res not in KINDS:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        with self.cond:
            if verb == "list":
                return 200, self._list(res, ns, query), {}
            if verb == "get":
                return 200, self._existing(res, ns, name), {}
            if method == "POST" and sub == "binding":
                return 201, self._bind(ns, name, body), {}
            if method == "POST" and sub == "eviction":
                return 201, self._evict(ns, name, body), {}
            if verb == "create":
                return 201, self._create(res, ns, body), {}
            if verb in ("update", "patch"):
                return 200, self._update(res, ns, name, body, replace=verb == "update"), {}
            if verb == "delete":
                return 200, self._delete(res, ns, name, body or {}), {}
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")

    def _existing(self, res: str, ns: str, name: str) -> dict:
        obj = self.get(res, ns, name)
        if obj is None:
            raise ApiError(404, "NotFound", f'{res} "{name}" not found', {"name": name, "kind": res})
        return obj

    def _list(self, res: str, ns: str, query: dict[str, str]) -> dict:
        token = query.get("continue")
        if token:
            state = json.loads(base64.b64decode(token))
            rv, start = state["rv"], state["start"]
            if rv < self.oldest:
                fresh = base64.b64encode(json.dumps({"rv": -1, "start": start}).encode()).decode()
                raise ApiError(410, "Expired", "The provided continue parameter is too old to display a consistent list result.", headers={"continue": fresh})
            items = self.snapshots[rv] if rv in self.snapshots else [o for (n, _), o in sorted(self.store[res].items()) if not ns or n == ns]
        else:
            rv, start = self.rv, 0
            items = [json.loads(json.dumps(o)) for (n, _), o in sorted(self.store[res].items()) if not ns or n == ns]
        limit = int(query.get("limit") or 0)
        meta: dict[str, Any] = {"resourceVersion": str(self.rv if rv < 0 else rv)}
        page = items[start:]
        if limit > 0 and query.get("resourceVersion") != "0" and len(page) > limit:
            self.snapshots[rv] = items
            meta["continue"] = base64.b64encode(json.dumps({"rv": rv, "start": start + limit}).encode()).decode()
            meta["remainingItemCount"] = len(page) - limit
            page = page[:limit]
        return {"kind": f"{KINDS[res]}List", "apiVersion": "v1", "metadata": meta, "items": page}

    def _create(self, res: str, ns: str, body: dict) -> dict:
        if ns and self.namespaces is not None and ns not in self.namespaces:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            self._uid += 1
            meta["name"] = f"{meta['generateName']}{self._uid:05x}"
        name = meta["name"]
        if self.get(res, ns, name) is not None:
            raise ApiError(409, "AlreadyExists", f'{res} "{name}" already exists', {"name": name, "kind": res})
        if res == "leases":
            self._check_lease(body)
        if res == "pods":  # the API server's defaults
            spec = body.setdefault("spec", {})
            for key, value in (("schedulerName", "default-scheduler"), ("restartPolicy", "Always"), ("terminationGracePeriodSeconds", 30), ("priority", 0)):
                spec.setdefault(key, value)
            body["status"] = {"phase": "Pending", "qosClass": "Burstable"}
        if res == "events":
            involved_ns = (body.get("involvedObject") or {}).get("namespace") or ""
            if involved_ns != ns and not (involved_ns == "" and ns == "default"):  # cluster-scoped objects' events live in default
                raise ApiError(
                    422, "Invalid", f'Event "{name}" is invalid: involvedObject.namespace: Invalid value: "{involved_ns}": does not match event.namespace'
                )
        meta.update(self._new_meta(name, ns if res not in CLUSTER_SCOPED else ""))
        if res == "poddisruptionbudgets":  # the disruption controller's first status, at once
            meta["generation"] = 1
            body["status"] = self._pdb_status(ns, body["spec"])
        return self._write(res, "ADDED", body)

    def _pdb_status(self, ns: str, spec: dict) -> dict:
        """What the disruption controller computes (integer minAvailable or maxUnavailable)."""
        wanted = (spec.get("selector") or {}).get("matchLabels") or {}
        pods = [p for (n, _), p in self.store["pods"].items() if n == ns and (p["metadata"].get("labels") or {}).items() >= wanted.items()]
        healthy = sum(1 for p in pods if p["status"].get("phase") == "Running")
        desired = int(spec["minAvailable"]) if "minAvailable" in spec else max(len(pods) - int(spec.get("maxUnavailable", 0)), 0)
        return {
            "observedGeneration": 1,
            "expectedPods": len(pods),
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "disruptionsAllowed": max(healthy - desired, 0),
        }

    def _check_lease(self, body: dict) -> None:
        spec = body.get("spec") or {}
        for field in ("acquireTime", "renewTime"):
            value = spec.get(field)
            if value is None:
                continue
            if not MICROTIME.match(value):
                raise ApiError(
                    400,
                    "BadRequest",
                    f'Lease in version "v1" cannot be handled as a Lease: parsing time "{value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse',
                )
            spec[field] = microtime(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())  # stored as ...Z
        if spec.get("leaseDurationSeconds") is not None and spec["leaseDurationSeconds"] <= 0:
            raise ApiError(422, "Invalid", f"spec.leaseDurationSeconds: Invalid value: {spec['leaseDurationSeconds']}: must be greater than 0")

    def _conflict(self, res: str, name: str) -> ApiError:
        return ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {res} "{name}": the object has been modified; please apply your changes to the latest version and try again',
            {"name": name, "kind": res},
        )

    def _update(self, res: str, ns: str, name: str, body: dict, *, replace: bool) -> dict:
        current = self._existing(res, ns, name)
        sent_rv = (body.get("metadata") or {}).get("resourceVersion")
        if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
            raise self._conflict(res, name)
        if res == "leases":
            self._check_lease(body)
        if replace:
            body["metadata"] = {**current["metadata"], **body.get("metadata", {})}
            updated = body
        else:
            updated = merge(current, body)
            added = (body.get("metadata") or {}).get("finalizers")
            if added is not None:  # the client's dict patches are strategic merges: finalizers join
                had = current["metadata"].get("finalizers") or []
                updated["metadata"]["finalizers"] = had + [f for f in added if f not in had]
        if res == "nodes" and updated["spec"].get("providerID") != current["spec"].get("providerID") and current["spec"].get("providerID"):
            raise ApiError(
                422, "Invalid", f'Node "{name}" is invalid: spec.providerID: Forbidden: node updates may not change providerID except from "" to valid'
            )
        written = self._write(res, "MODIFIED", updated)
        if res == "nodes":
            self._node_lifecycle(name)
        return written

    def _node_lifecycle(self, name: str) -> None:
        """What the node lifecycle controller writes after a Node changes."""
        node = self.get("nodes", "", name)
        if not self.node_lifecycle or node is None:
            return
        taints = list(node["spec"].get("taints") or [])
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in node["status"].get("conditions") or [])
        keep = [t for t in taints if not (ready and t["key"] == "node.kubernetes.io/not-ready")]
        cordon = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
        if node["spec"].get("unschedulable") and cordon not in keep:
            keep.append(cordon)
        elif not node["spec"].get("unschedulable") and cordon in keep:
            keep.remove(cordon)
        if keep != taints:
            node["spec"]["taints"] = keep
            self._write("nodes", "MODIFIED", node)

    def _delete(self, res: str, ns: str, name: str, options: dict) -> dict:
        obj = self._existing(res, ns, name)
        if res == "pods":
            return self._delete_pod(obj, options.get("gracePeriodSeconds"))
        self._write(res, "DELETED", obj)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "kind": res, "uid": obj["metadata"]["uid"]},
        }

    def _delete_pod(self, pod: dict, grace: int | None) -> dict:
        meta = pod["metadata"]
        if not pod["spec"].get("nodeName") or grace == 0:
            meta.setdefault("deletionTimestamp", rfc3339(self.clock()))
            meta["deletionGracePeriodSeconds"] = 0
            self._write("pods", "MODIFIED", pod)
            self._write("pods", "DELETED", json.loads(json.dumps(pod)))
            self._claims_released(meta["uid"])
            return pod
        if "deletionTimestamp" not in meta:  # no kubelet here: it stays Terminating
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30) if grace is None else grace
            meta["deletionTimestamp"] = rfc3339(self.clock() + grace)
            meta["deletionGracePeriodSeconds"] = grace
            self._write("pods", "MODIFIED", pod)
        return pod

    def _claims_released(self, uid: str) -> None:
        """The resourceclaim controller's part when a pod is gone: its ``reservedFor``
        entries go, and a claim no one uses any more is deallocated, but only if it carries
        ``resource.kubernetes.io/delete-protection`` (the finalizer comes off with it)."""
        for claim in [c for c in self.store["resourceclaims"].values() if any(u.get("uid") == uid for u in (c.get("status") or {}).get("reservedFor") or [])]:
            status = claim["status"]
            status["reservedFor"] = [u for u in status["reservedFor"] if u.get("uid") != uid]
            finalizers = claim["metadata"].get("finalizers") or []
            if not status["reservedFor"] and "resource.kubernetes.io/delete-protection" in finalizers:
                status.pop("allocation", None)
                claim["metadata"]["finalizers"] = [f for f in finalizers if f != "resource.kubernetes.io/delete-protection"]
            self._write("resourceclaims", "MODIFIED", claim)

    def _bind(self, ns: str, name: str, body: dict) -> dict:
        if (body.get("metadata") or {}).get("name") != name:
            raise ApiError(400, "BadRequest", "name in URL does not match name in Binding object")
        pod = self._existing("pods", ns, name)
        if pod["spec"].get("nodeName"):
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"',
                {"name": name, "kind": "pods/binding"},
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise ApiError(
                409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is being deleted, cannot be assigned to a host'
            )
        target = (body.get("target") or {}).get("name")
        if not target:
            raise ApiError(500, None, "target.name: Required value")
        pod["spec"]["nodeName"] = target
        conditions = [c for c in pod["status"].get("conditions", []) if c["type"] != "PodScheduled"]
        pod["status"]["conditions"] = [
            *conditions,
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": rfc3339(self.clock())},
        ]
        self._write("pods", "MODIFIED", pod)
        return status_body(201, None, "")

    def _evict(self, ns: str, name: str, body: dict) -> dict:
        if (body.get("metadata") or {}).get("name") != name:
            raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
        pod = self._existing("pods", ns, name)
        labels = pod["metadata"].get("labels") or {}
        pdbs = [
            p for (n, _), p in sorted(self.store["poddisruptionbudgets"].items()) if n == ns and labels.items() >= p["spec"]["selector"]["matchLabels"].items()
        ]
        if len(pdbs) > 1:
            raise ApiError(500, None, "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
        guarded = pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
        if pdbs and guarded:
            pdb = pdbs[0]
            status = pdb["status"]
            message = "Cannot evict pod as it would violate the pod's disruption budget."
            if status.get("observedGeneration", 0) < pdb["metadata"]["generation"]:
                cause = f"The disruption budget {pdb['metadata']['name']} is still being processed by the server."
                details = {"causes": [{"reason": "DisruptionBudget", "message": cause}], "retryAfterSeconds": 10}
                raise ApiError(429, "TooManyRequests", message, details, headers={"Retry-After": "10"})
            if status["disruptionsAllowed"] <= 0:
                needs, has = status["desiredHealthy"], status["currentHealthy"]
                cause = f"The disruption budget {pdb['metadata']['name']} needs {needs} healthy pods and has {has} currently"
                raise ApiError(429, "TooManyRequests", message, {"causes": [{"reason": "DisruptionBudget", "message": cause}]})
            status["disruptionsAllowed"] -= 1
            self._write("poddisruptionbudgets", "MODIFIED", pdb)
        self._delete_pod(pod, ((body.get("deleteOptions") or {}).get("gracePeriodSeconds")))
        return status_body(201, None, "")

    # -- watch ---------------------------------------------------------------------------------
    def watch_lines(self, res: str, ns: str, query: dict[str, str]):  # type: ignore[no-untyped-def]
        """The lines of one watch stream; ends like a server timeout (or at once when idle)."""
        bookmarks = query.get("allowWatchBookmarks") == "true"
        timeout = float(query.get("timeoutSeconds") or 5)
        self.watch_timeouts.append(timeout)
        deadline = time.monotonic() + timeout
        with self.cond:
            drops = self.drops
            budget, self.drop_after = self.drop_after, None
            rv_text = query.get("resourceVersion") or "0"
            rv = int(rv_text)
            if rv == 0:
                rv = self.rv
                for (n, _), obj in sorted(self.store[res].items()):
                    if not ns or n == ns:
                        yield {"type": "ADDED", "object": obj}
                if bookmarks:
                    yield self._bookmark(res, rv, initial_end=True)
            elif rv < self.oldest:
                yield {"type": "ERROR", "object": status_body(410, "Expired", f"too old resource version: {rv} ({self.oldest - 1})")}
                return
        start = rv
        while True:
            with self.cond:
                events = self._by_kind[res]
                after = events[bisect.bisect_right(events, rv, key=lambda e: e[0]) :]
                fresh = [(r, t, o) for r, t, o in after if not ns or o["metadata"].get("namespace") == ns]
                rv = max(rv, self.history[-1][0]) if self.history else rv
                if not fresh:
                    if self.drops != drops:
                        yield None  # the connection dies mid-stream
                        return
                    if not self.hold_watches or time.monotonic() >= deadline:
                        if bookmarks and self._last_rv(res) > start:  # §11: an idle kind's watch gets no byte, not even a bookmark
                            yield self._bookmark(res, self._last_rv(res))
                        return
                    self.cond.wait(timeout=max(deadline - time.monotonic(), 0))
                    continue
            for _, type_, obj in fresh:
                if budget is not None:
                    if budget == 0:
                        yield None  # the connection dies mid-stream
                        return
                    budget -= 1
                yield {"type": type_, "object": obj}

    def _last_rv(self, res: str) -> int:
        events = self._by_kind[res]
        return events[-1][0] if events else 0

    def _bookmark(self, res: str, rv: int, *, initial_end: bool = False) -> dict:
        meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"type": "BOOKMARK", "object": {"kind": KINDS[res], "apiVersion": "v1", "metadata": meta, "spec": {}, "status": {}}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # a watch writes a line at a time: no 40 ms delayed-ACK stalls

            def log_message(self, *args: Any) -> None:
                return

            def _reply(self, code: int, body: Any, headers: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    if key != "continue":
                        self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _serve(self) -> None:
                url = urlparse(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                if token in stub.blocked:  # a partition: the connection dies with no reply
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                m = PATH.match(url.path)
                if self.command == "GET" and query.get("watch") == "true" and m is not None and m["res"] in KINDS:
                    stub.calls.append(Call("watch", m["group"] or "", m["res"], "", m["ns"] or ""))
                    if token not in stub.tokens:
                        self._reply(401, status_body(401, "Unauthorized", "Unauthorized"), {})
                        return
                    self._stream(stub.watch_lines(m["res"], m["ns"] or "", query))
                    return
                try:
                    code, reply, headers = stub.handle(self.command, url.path, query, body, token)
                except ApiError as exc:
                    body_out = exc.body
                    if "continue" in exc.headers:
                        body_out = {**exc.body, "metadata": {"continue": exc.headers["continue"]}}
                    self._reply(exc.code, body_out, exc.headers)
                    return
                self._reply(code, reply, headers)

            def _stream(self, lines) -> None:  # type: ignore[no-untyped-def]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for line in lines:
                        if line is None:
                            self.close_connection = True
                            self.connection.shutdown(2)
                            return
                        data = (json.dumps(line) + "\n").encode()
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        return Handler
