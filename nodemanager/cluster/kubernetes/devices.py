"""Device claims through the API server: which resource.k8s.io version it serves (from the
discovery API), the device classes, claims and slices read when pods with claims wait, and
an allocation written to its claim as kube-scheduler writes it."""

from __future__ import annotations

import json
import logging
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from nodemanager.clock import Clock
from nodemanager.cluster.kubernetes.convert import key_of
from nodemanager.cluster.kubernetes.errors import NETWORK_ERRORS, api_message
from nodemanager.deadline import api_timeout
from nodemanager.dra.context import DeviceContext
from nodemanager.dra.model import AllocationResult, parse_claim, parse_device_class, parse_slice
from nodemanager.errors import NodeManagerError

log = logging.getLogger("nodemanager.kubernetes")
# resource.k8s.io versions nodemanager reads and writes, newest first (all map to one model).
RESOURCE_VERSIONS = {"v1": client.ResourceV1Api, "v1beta2": client.ResourceV1beta2Api, "v1beta1": client.ResourceV1beta1Api}
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"  # the finalizer of a claim with an allocation
RESOURCE_DISCOVERY_EVERY = 600.0  # seconds before asking again a server that serves none of them
NOT_SERVED = (
    "resource.k8s.io is not served by the API server (device claims need Kubernetes 1.34, or 1.32-1.33 with "
    "the DynamicResourceAllocation feature gate and resource.k8s.io/v1beta1 or v1beta2 enabled)"
)


class DeviceApi:
    def __init__(self, api: client.ApiClient, clock: Clock) -> None:
        self._api = api
        self.clock = clock
        self.resource: Any = None  # the resource.k8s.io client of the version discovered
        self._resource_problem = ""  # why claims cannot be read: said once, asked again now and then
        self._resource_asked = float("-inf")

    def _resource_api(self) -> Any:
        """The resource.k8s.io client for the newest version the server serves, from the
        discovery API. A server that serves none is asked again only every 10 minutes; one
        that cannot be reached, next time."""
        if self.resource is not None or self.clock.now() - self._resource_asked < RESOURCE_DISCOVERY_EVERY:
            return self.resource
        try:
            group = client.ResourceApi(self._api).get_api_group(_request_timeout=(10, 60))
            served = {v.version for v in group.versions or ()}
        except ApiException as exc:
            if exc.status != 404:
                raise
            served = set()
        self._resource_asked = self.clock.now()
        version = next((v for v in RESOURCE_VERSIONS if v in served), None)
        if version is None:
            problem = NOT_SERVED
            if served:
                problem = f"resource.k8s.io is served only in {', '.join(sorted(served))}; nodemanager reads {', '.join(RESOURCE_VERSIONS)}"
            if problem != self._resource_problem:
                log.warning("%s; pods with device claims cannot be placed", problem)
            self._resource_problem = problem
            return None
        log.info("device claims: reading and writing resource.k8s.io/%s (served: %s)", version, ", ".join(sorted(served)))
        self._resource_problem = ""
        self.resource = RESOURCE_VERSIONS[version](self._api)
        return self.resource

    def read(self) -> DeviceContext | None:
        """Device classes, claims (with their allocations) and the slices drivers published,
        in the newest resource.k8s.io version served (slices name the cluster's Nodes). An
        object that cannot be read is skipped with a warning; an unreachable API gives None
        (claims wait); a group not served, a context that says so."""
        try:
            api = self._resource_api()
        except NETWORK_ERRORS as exc:
            log.warning("device claims unreadable (discovery: %s); pods with claims wait", api_message(exc))
            return None
        if api is None:
            return DeviceContext(unavailable=self._resource_problem)
        kinds = (
            ("deviceClasses", api.list_device_class, parse_device_class),
            ("resourceClaims", api.list_resource_claim_for_all_namespaces, parse_claim),
            ("resourceSlices", api.list_resource_slice, parse_slice),
        )
        parsed: dict[str, list[Any]] = {}
        for name, call, parse in kinds:
            try:
                items = json.loads(call(_preload_content=False, _request_timeout=(10, 60)).data).get("items") or []
            except NETWORK_ERRORS as exc:
                if isinstance(exc, ApiException) and exc.status == 404:
                    self.resource, self._resource_asked = None, float("-inf")  # the server changed: discover again
                log.warning("device claims unreadable (%s: %s); pods with claims wait", name, api_message(exc))
                return None
            parsed[name] = []
            for doc in items:
                try:
                    parsed[name].append(parse(doc, f"{name} {key_of(doc)}"))
                except NodeManagerError as exc:
                    log.warning("ignoring a device object nodemanager cannot read: %s", exc)
        return DeviceContext({c.name: c for c in parsed["deviceClasses"]}, {c.key: c for c in parsed["resourceClaims"]}, tuple(parsed["resourceSlices"]))

    def write_allocation(self, claim: str, node: str, status: dict, result: AllocationResult) -> None:
        """The claim's finalizer, then its status (the allocation and the pods it is reserved for)."""
        namespace, name = claim.split("/", 1)
        if self.resource is None:
            log.warning("writing the allocation of claim %s skipped: resource.k8s.io is not known to be served", claim)
            return
        try:
            # First, as kube-scheduler does: the resourceclaim controller deallocates a claim
            # whose last user left only if it carries this finalizer. (A strategic merge
            # patch: the finalizer joins any others, once.)
            self.resource.patch_namespaced_resource_claim(
                name, namespace, {"metadata": {"finalizers": [DELETE_PROTECTION]}}, _preload_content=False, _request_timeout=api_timeout()
            )
            self.resource.patch_namespaced_resource_claim_status(name, namespace, status, _preload_content=False, _request_timeout=api_timeout())
            log.info("claim %s allocated on %s: %s", claim, node, ", ".join(f"{d.driver}/{d.pool}/{d.device}" for d in result.devices))
        except NETWORK_ERRORS as exc:
            log.warning("writing the allocation of claim %s failed: %s", claim, api_message(exc))
