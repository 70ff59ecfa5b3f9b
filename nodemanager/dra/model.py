"""Structured device allocation (``resource.k8s.io``): device classes, claims, resource
slices and allocation results, parsed from Kubernetes manifests (camelCase dicts as the API
server sends them; the official client's objects go through ``cluster.objects.to_manifest``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from nodemanager.errors import InvalidManifest
from nodemanager.model import Requirement, SelectorTerm, resource_amount
from nodemanager.model.pod import _requirement

MAX_DEVICES_PER_CLAIM = 32  # AllocationResultsMaxSize


class AllocationMode(StrEnum):
    EXACT_COUNT = "ExactCount"
    ALL = "All"


@dataclass(frozen=True)
class Version:
    """A semantic version attribute value."""

    text: str


AttributeValue = int | bool | str | Version


@dataclass(frozen=True)
class Device:
    name: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)  # qualified or bare names
    capacity: Mapping[str, int] = field(default_factory=dict)  # quantities as integers (bytes, counts)
    basic: bool = True  # False: a device type this allocator does not understand


@dataclass(frozen=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    devices: tuple[Device, ...]
    node_name: str = ""
    all_nodes: bool = False
    node_selector: tuple[SelectorTerm, ...] | None = None
    selector_error: str = ""  # the node selector could not be understood: fatal when used


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions
    config: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class DeviceRequest:
    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: AllocationMode = AllocationMode.EXACT_COUNT
    count: int = 1
    admin_access: bool = False


@dataclass(frozen=True)
class Constraint:
    requests: tuple[str, ...]  # empty: every request of the claim
    match_attribute: str


@dataclass(frozen=True)
class ResourceClaim:
    namespace: str
    name: str
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[Constraint, ...] = ()
    config: tuple[Mapping[str, Any], ...] = ()
    allocation: AllocationResult | None = None  # set once allocated

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class DeviceResult:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False  # allocated for admin access: the device stays available to others


@dataclass(frozen=True)
class AllocationResult:
    devices: tuple[DeviceResult, ...]
    node_selector: tuple[SelectorTerm, ...] | None = None  # None: available on every node
    config: tuple[Mapping[str, Any], ...] = ()


# --- parsing ------------------------------------------------------------------------------


def _get(doc: Any, key: str, where: str, default: Any = None) -> Any:
    if not isinstance(doc, Mapping):
        raise InvalidManifest(where, f"expected a mapping, got {type(doc).__name__}")
    return doc.get(key, default)


def _attribute(value: Any, where: str) -> AttributeValue:
    if not isinstance(value, Mapping) or len(value) != 1:
        raise InvalidManifest(where, "expected exactly one of int, bool, string, version")
    ((kind, raw),) = value.items()
    if kind == "int" and isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if kind == "bool" and isinstance(raw, bool):
        return raw
    if kind == "string" and isinstance(raw, str):
        return raw
    if kind == "version" and isinstance(raw, str):
        return Version(raw)
    raise InvalidManifest(where, f"unknown or ill-typed attribute value {value!r}")


def parse_device(doc: Mapping[str, Any], where: str) -> Device:
    name = _get(doc, "name", where)
    if not name:
        raise InvalidManifest(f"{where}.name", "required")
    basic = doc.get("basic")  # v1alpha3 / v1beta1 nest the device under "basic"
    if basic is None:
        if set(doc) - {"name", "attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector", "allNodes", "taints", "bindsToNode"}:
            return Device(str(name), basic=False)  # a device type this allocator does not know
        basic = doc  # v1 / v1beta2: attributes and capacity on the device itself
    attributes = {str(k): _attribute(v, f"{where}.basic.attributes[{k}]") for k, v in (basic.get("attributes") or {}).items()}
    capacity = {}
    for key, value in (basic.get("capacity") or {}).items():
        raw = value.get("value") if isinstance(value, Mapping) else value  # v1beta1 wraps it
        capacity[str(key)] = resource_amount("memory", raw, f"{where}.basic.capacity[{key}]")
    return Device(str(name), attributes, capacity)


def _terms(selector: Any, where: str) -> tuple[SelectorTerm, ...]:
    terms = []
    for i, term in enumerate(_get(selector, "nodeSelectorTerms", where) or []):
        reqs: list[Requirement] = []
        for j, expr in enumerate(_get(term, "matchExpressions", f"{where}.nodeSelectorTerms[{i}]") or []):
            reqs.append(_requirement(expr, f"{where}.nodeSelectorTerms[{i}].matchExpressions[{j}]", False))
        for j, expr in enumerate(_get(term, "matchFields", f"{where}.nodeSelectorTerms[{i}]") or []):
            reqs.append(_requirement(expr, f"{where}.nodeSelectorTerms[{i}].matchFields[{j}]", True))
        terms.append(SelectorTerm(tuple(reqs)))
    return tuple(terms)


def parse_slice(doc: Mapping[str, Any], where: str = "resourceSlice") -> ResourceSlice:
    """A ResourceSlice. An invalid node selector is *not* an error here: the allocator
    reports it as fatal when it meets it (it is part of the data, not of this parse)."""
    spec = _get(doc, "spec", where) or {}
    pool = _get(spec, "pool", f"{where}.spec") or {}
    selector = spec.get("nodeSelector")
    terms: tuple[SelectorTerm, ...] | None = None
    error = ""
    if selector is not None:
        try:
            terms = _terms(selector, f"{where}.spec.nodeSelector")
        except InvalidManifest as exc:
            error = str(exc)
    return ResourceSlice(
        name=str((_get(doc, "metadata", where) or {}).get("name", "")),
        driver=str(spec.get("driver", "")),
        pool=str(pool.get("name", "")),
        generation=int(pool.get("generation", 0)),
        slice_count=int(pool.get("resourceSliceCount", 1)),
        devices=tuple(parse_device(d, f"{where}.spec.devices[{i}]") for i, d in enumerate(spec.get("devices") or [])),
        node_name=str(spec.get("nodeName") or ""),
        all_nodes=bool(spec.get("allNodes")),
        node_selector=terms,
        selector_error=error,
    )


def _selectors(items: Any, where: str) -> tuple[str, ...]:
    out = []
    for i, item in enumerate(items or []):
        expression = (_get(item, "cel", f"{where}[{i}]") or {}).get("expression")
        if not expression:
            raise InvalidManifest(f"{where}[{i}].cel.expression", "required: only CEL selectors exist")
        out.append(str(expression))
    return tuple(out)


def parse_device_class(doc: Mapping[str, Any], where: str = "deviceClass") -> DeviceClass:
    spec = _get(doc, "spec", where) or {}
    name = (_get(doc, "metadata", where) or {}).get("name")
    if not name:
        raise InvalidManifest(f"{where}.metadata.name", "required")
    return DeviceClass(str(name), _selectors(spec.get("selectors"), f"{where}.spec.selectors"), tuple(spec.get("config") or ()))


def parse_claim_spec(spec: Mapping[str, Any], namespace: str, name: str, where: str) -> ResourceClaim:
    devices = _get(spec, "devices", where) or {}
    requests = []
    for i, req in enumerate(devices.get("requests") or []):
        rpath = f"{where}.devices.requests[{i}]"
        exactly = req.get("exactly") or req  # v1 nests the request under "exactly"
        mode_text = exactly.get("allocationMode") or "ExactCount"
        try:
            mode = AllocationMode(mode_text)
        except ValueError:
            raise InvalidManifest(f"{rpath}.allocationMode", f"expected ExactCount or All, got {mode_text!r}") from None
        count = exactly.get("count", 1)
        if mode is AllocationMode.ALL:
            count = 1  # (not read: every matching device)
        elif not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise InvalidManifest(f"{rpath}.count", f"expected an integer >= 1, got {count!r}")
        requests.append(
            DeviceRequest(
                name=str(req.get("name") or ""),
                device_class=str(exactly.get("deviceClassName") or ""),
                selectors=_selectors(exactly.get("selectors"), f"{rpath}.selectors"),
                mode=mode,
                count=count,
                admin_access=bool(exactly.get("adminAccess")),
            )
        )
    constraints = []
    for i, c in enumerate(devices.get("constraints") or []):
        attribute = c.get("matchAttribute")
        if not attribute:
            raise InvalidManifest(f"{where}.devices.constraints[{i}]", "unknown constraint: only matchAttribute exists")
        constraints.append(Constraint(tuple(c.get("requests") or ()), str(attribute)))
    return ResourceClaim(namespace, name, tuple(requests), tuple(constraints), tuple(devices.get("config") or ()))


def parse_claim(doc: Mapping[str, Any], where: str = "resourceClaim") -> ResourceClaim:
    meta = _get(doc, "metadata", where) or {}
    if not meta.get("name"):
        raise InvalidManifest(f"{where}.metadata.name", "required")
    claim = parse_claim_spec(_get(doc, "spec", where) or {}, str(meta.get("namespace") or "default"), str(meta["name"]), f"{where}.spec")
    allocation = (_get(doc, "status", where) or {}).get("allocation")
    return replace(claim, allocation=parse_allocation(allocation, f"{where}.status.allocation")) if allocation else claim


def parse_allocation(doc: Mapping[str, Any], where: str = "allocation") -> AllocationResult:
    """An allocation as the API server holds it (``status.allocation`` of a claim)."""
    results = (_get(doc, "devices", where) or {}).get("results") or []
    devices = []
    for i, r in enumerate(results):
        path = f"{where}.devices.results[{i}]"
        missing = [k for k in ("request", "driver", "pool", "device") if not _get(r, k, path)]
        if missing:
            raise InvalidManifest(f"{path}.{missing[0]}", "required")
        devices.append(DeviceResult(str(r["request"]), str(r["driver"]), str(r["pool"]), str(r["device"]), bool(r.get("adminAccess"))))
    selector = doc.get("nodeSelector")  # where the devices are: a pod using the claim runs there or nowhere
    return AllocationResult(tuple(devices), node_selector=_terms(selector, f"{where}.nodeSelector") if selector is not None else None)


def allocation_document(result: AllocationResult, node: str) -> dict[str, Any]:
    """``status.allocation`` for a claim allocated on ``node`` (its devices are node-local)."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {
        "devices": {
            "results": [
                {"request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device, **({"adminAccess": True} if d.admin_access else {})}
                for d in result.devices
            ],
            "config": [{"source": "FromClaim", **c} for c in result.config],
        },
        "nodeSelector": {"nodeSelectorTerms": [term]},
    }


def parse_all(docs: Sequence[Mapping[str, Any]]) -> tuple[list[DeviceClass], list[ResourceClaim], list[ResourceSlice]]:
    """Sort a list of manifests by kind."""
    classes, claims, slices = [], [], []
    for i, doc in enumerate(docs):
        kind = doc.get("kind")
        where = f"[{i}]"
        if kind == "DeviceClass":
            classes.append(parse_device_class(doc, where))
        elif kind == "ResourceClaim":
            claims.append(parse_claim(doc, where))
        elif kind == "ResourceSlice":
            slices.append(parse_slice(doc, where))
        else:
            raise InvalidManifest(f"{where}.kind", f"expected DeviceClass, ResourceClaim or ResourceSlice, got {kind!r}")
    return classes, claims, slices
