"""kube's own table for the structured device allocator, with its cases' names:
kubernetes/kubernetes staging/src/k8s.io/dynamic-resource-allocation/structured/
allocator_test.go (TestAllocator, at commit 0141512a61b0aecd3bea78f6b4ac8b77f6b92654). Every
case is here; those of features nodemanager's allocator does not model (prioritized lists,
partitionable devices, device taints, binding conditions, usage restricted to a node,
feature gates) are kept and marked with why. The expectations are kube's: the devices each
claim gets (request, driver, pool, device; admin access where asked), the node selector of
the allocation, its config's sources; None where the node cannot satisfy the claims; an
error where the input is invalid (kube's message differs from nodemanager's; that an error
is raised, at parse or at allocation, is what is compared)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from nodemanager.dra.allocator import Allocator
from nodemanager.dra.model import AllocationResult, parse_claim_spec, parse_device_class, parse_slice
from nodemanager.dra.pools import AllocationError
from nodemanager.errors import InvalidManifest

REGION1, REGION2 = "region-1", "region-2"
NODE1, NODE2 = "node-1", "node-2"
CLASS_A, CLASS_B = "class-a", "class-b"
DRIVER_A, DRIVER_B = "driver-a", "driver-b"
POOL1, POOL2, POOL3, POOL4 = "pool-1", "pool-2", "pool-3", "pool-4"
REQ0, REQ1 = "req-0", "req-1"
CLAIM0, CLAIM1 = "claim-0", "claim-1"
SLICE1, SLICE2 = "slice-1", "slice-2"
DEVICE1, DEVICE2, DEVICE3 = "device-1", "device-2", "device-3"
NUMA, VERSION, STRING, BOOL = (f"{DRIVER_A}/{a}" for a in ("numa", "driverVersion", "stringAttribute", "boolAttribute"))
ALL_NODES = object()  # kube's nodeSelectionAll

_NEWER = {
    "prioritized": "not modelled: prioritized lists of subrequests (firstAvailable, DRAPrioritizedList)",
    "partitionable": "not modelled: partitionable devices (shared counters, DRAPartitionableDevices)",
    "tainted": "not modelled: device taints and tolerations (DRADeviceTaints)",
    "binding": "not modelled: device binding conditions (DRADeviceBindingConditions)",
    "restricted": "not modelled: devices whose usage is restricted to one node (the allocation keeps the slice's selector)",
    "gate": "not modelled: feature gates (admin access is always allowed, as by default since 1.34)",
    "unknown-device": "not modelled: a slice's API version is not read, and a device of only a name is a plain device in resource.k8s.io/v1",
}


def node(name: str, region: str) -> tuple[str, dict[str, str]]:
    return name, {"region": region, "planet": "earth"}


def cls(name: str, driver: str, *, expression: str = "", config: str = "") -> dict:
    spec: dict = {"selectors": [{"cel": {"expression": expression or f'device.driver == "{driver}"'}}]}
    if config:
        spec["config"] = [_config(driver, config)]
    return {"metadata": {"name": name}, "spec": spec}


def _config(driver: str, attribute: str) -> dict:
    return {"opaque": {"driver": driver, "parameters": {attribute: attribute + "Value"}}}


def request(name: str, class_name: str, count: int = 1, *selectors: str, mode: str = "ExactCount", admin: bool = False) -> dict:
    req: dict = {"name": name, "deviceClassName": class_name, "allocationMode": mode, "count": count}
    if selectors:
        req["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if admin:
        req["adminAccess"] = True
    return req


def claim(name: str, *requests: dict, constraints: tuple[dict, ...] = (), config: str = "") -> dict:
    devices: dict = {"requests": list(requests), "constraints": list(constraints)}
    if config:
        devices["config"] = [_config(DRIVER_A, config)]
    return {"name": name, "spec": {"devices": devices}}


def simple(name: str, req: str, class_name: str, **kw: object) -> dict:
    return claim(name, request(req, class_name), **kw)  # type: ignore[arg-type]


def device(name: str, capacity: dict[str, str] | None = None, attributes: dict[str, dict] | None = None) -> dict:
    return {"name": name, "basic": {"attributes": attributes or {}, "capacity": {k: {"value": v} for k, v in (capacity or {}).items()}}}


def slc(name: str, where: object, pool: str, driver: str, *devices: dict, generation: int = 1, count: int = 1) -> dict:
    spec: dict = {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count}, "devices": list(devices)}
    if where is ALL_NODES:
        spec["allNodes"] = True
    elif isinstance(where, dict):
        spec["nodeSelector"] = where
    else:
        spec["nodeName"] = where
    return {"metadata": {"name": name}, "spec": spec}


def one(name: str, where: object, pool: str, driver: str, **kw: int) -> dict:
    return slc(name, where, pool, driver, device(DEVICE1), **kw)


def labels(key: str, *values: str) -> dict:
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]}


def local(name: str) -> dict:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]}


def memory_at_least(size: str) -> str:
    return f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{size}")) >= 0'


@dataclass
class Want:
    """One claim's allocation: its devices (request, driver, pool, device[, admin]), the
    requirements of its node selector (one term: kube ANDs them), its config's sources."""

    devices: set[tuple]
    selector: dict | None
    sources: tuple[str, ...] = ()


def want(selector: dict | None, *devices: tuple, sources: tuple[str, ...] = ()) -> Want:
    return Want(set(devices), selector, sources)


@dataclass
class Case:
    claims: list[dict] = field(default_factory=list)
    classes: list[dict] = field(default_factory=list)
    slices: list[dict] = field(default_factory=list)
    node: tuple[str, dict[str, str]] = (NODE1, {"region": REGION1, "planet": "earth"})
    allocated: tuple[tuple[str, str, str], ...] = ()
    expect: list[Want] | None = None
    error: bool = False


def _requirements(selector: dict | None) -> set[tuple] | None:
    if selector is None:
        return None
    (term,) = selector["nodeSelectorTerms"]
    return {(r["key"], r["operator"], tuple(r["values"]), kind == "matchFields") for kind in ("matchExpressions", "matchFields") for r in term.get(kind, [])}


def _got_requirements(result: AllocationResult) -> set[tuple] | None:
    if result.node_selector is None:
        return None
    assert len(result.node_selector) == 1, result.node_selector  # one term, as kube's
    return {(r.key, r.operator.value, tuple(r.values), r.on_field) for r in result.node_selector[0].requirements}


def d(req: str, driver: str, pool: str, dev: str, admin: bool = False) -> tuple:
    return (req, driver, pool, dev, admin)


def _attrs(**values: object) -> dict[str, dict]:
    kinds = {bool: "bool", int: "int", str: "string"}
    return {k: ({"version": v[1:]} if isinstance(v, str) and v.startswith("v") else {kinds[type(v)]: v}) for k, v in values.items()}


def _with_attributes(**values: object) -> Callable[[str], dict]:
    return lambda name: device(name, None, _attrs(**values))


CASES: dict[str, Case | str] = {
    "empty": Case(expect=None),
    "simple": Case(
        [simple(CLAIM0, REQ0, CLASS_A)],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1))],
    ),
    "other-node": Case(
        [simple(CLAIM0, REQ0, CLASS_A)],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, NODE1, POOL1, DRIVER_B), one(SLICE2, NODE2, POOL2, DRIVER_A)],
        node(NODE2, REGION2),
        expect=[want(local(NODE2), d(REQ0, DRIVER_A, POOL2, DEVICE1))],
    ),
    "small-and-large": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, 1, memory_at_least("1Gi")), request(REQ1, CLASS_A, 1, memory_at_least("2Gi")))],
        [cls(CLASS_A, DRIVER_A)],
        [slc(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, {"memory": "1Gi"}), device(DEVICE2, {"memory": "2Gi"}))],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1), d(REQ1, DRIVER_A, POOL1, DEVICE2))],
    ),
    "small-and-large-backtrack-requests": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, 1, memory_at_least("1Gi")), request(REQ1, CLASS_A, 1, memory_at_least("2Gi")))],
        [cls(CLASS_A, DRIVER_A)],
        [slc(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE2, {"memory": "2Gi"}), device(DEVICE1, {"memory": "1Gi"}))],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1), d(REQ1, DRIVER_A, POOL1, DEVICE2))],
    ),
    "small-and-large-backtrack-claims": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, 1, memory_at_least("1Gi"))), claim(CLAIM1, request(REQ1, CLASS_A, 1, memory_at_least("2Gi")))],
        [cls(CLASS_A, DRIVER_A)],
        [slc(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE2, {"memory": "2Gi"}), device(DEVICE1, {"memory": "1Gi"}))],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1)), want(local(NODE1), d(REQ1, DRIVER_A, POOL1, DEVICE2))],
    ),
    "devices-split-across-different-slices": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, 2))],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A), one(SLICE2, NODE1, POOL2, DRIVER_A)],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1), d(REQ0, DRIVER_A, POOL2, DEVICE1))],
    ),
    "obsolete-slice": Case(
        [simple(CLAIM0, REQ0, CLASS_A)],
        [cls(CLASS_A, DRIVER_A)],
        [one("slice-1-obsolete", NODE1, POOL1, DRIVER_A), one(SLICE1, NODE1, POOL1, DRIVER_A, generation=2)],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1))],
    ),
    "duplicate-slice": Case(
        [simple(CLAIM0, REQ0, CLASS_A)],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A, count=2), one(SLICE1 + "-2", NODE1, POOL1, DRIVER_A, count=2)],
        error=True,
    ),
    "no-slices": Case([simple(CLAIM0, REQ0, CLASS_A)], [cls(CLASS_A, DRIVER_A)], [], expect=None),
    "not-enough-suitable-devices": Case(
        [simple(CLAIM0, REQ0, CLASS_A), simple(CLAIM0, REQ1, CLASS_A)], [cls(CLASS_A, DRIVER_A)], [one(SLICE1, NODE1, POOL1, DRIVER_A)], expect=None
    ),
    "no-classes": Case([simple(CLAIM0, REQ0, CLASS_A)], [], [one(SLICE1, NODE1, POOL1, DRIVER_A)], error=True),
    "unknown-class": Case([simple(CLAIM0, REQ0, "unknown-class")], [cls(CLASS_A, DRIVER_A)], [one(SLICE1, NODE1, POOL1, DRIVER_A)], error=True),
    "empty-class": Case([simple(CLAIM0, REQ0, "")], [cls(CLASS_A, DRIVER_A)], [one(SLICE1, NODE1, POOL1, DRIVER_A)], error=True),
    "no-claims-to-allocate": Case([], [cls(CLASS_A, DRIVER_A)], [one(SLICE1, NODE1, POOL1, DRIVER_A)], expect=None),
    "all-devices-single": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, mode="All"))],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1))],
    ),
    "all-devices-many": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, mode="All"))],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A), one(SLICE1, NODE1, POOL2, DRIVER_A)],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1), d(REQ0, DRIVER_A, POOL2, DEVICE1))],
    ),
    "all-devices-of-the-incomplete-pool": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, 1, mode="All"))], [cls(CLASS_A, DRIVER_A)], [one(SLICE1, NODE1, POOL1, DRIVER_A, count=2)], error=True
    ),
    "all-devices-plus-another": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, mode="All")), claim(CLAIM1, request(REQ0, CLASS_B))],
        [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A), one(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1)), want(local(NODE1), d(REQ0, DRIVER_B, POOL1, DEVICE1))],
    ),
    "all-devices-plus-another-reversed": Case(
        [claim(CLAIM1, request(REQ0, CLASS_B)), claim(CLAIM0, request(REQ0, CLASS_A, mode="All"))],
        [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A), one(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[want(local(NODE1), d(REQ0, DRIVER_B, POOL1, DEVICE1)), want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1))],
    ),
    "all-devices-many-plus-another": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, mode="All")), claim(CLAIM1, request(REQ0, CLASS_B))],
        [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)],
        [slc(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2)), one(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[
            want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1), d(REQ0, DRIVER_A, POOL1, DEVICE2)),
            want(local(NODE1), d(REQ0, DRIVER_B, POOL1, DEVICE1)),
        ],
    ),
    "all-devices-many-plus-another-reversed": Case(
        [claim(CLAIM1, request(REQ0, CLASS_B)), claim(CLAIM0, request(REQ0, CLASS_A, mode="All"))],
        [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)],
        [slc(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2)), one(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[
            want(local(NODE1), d(REQ0, DRIVER_B, POOL1, DEVICE1)),
            want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1), d(REQ0, DRIVER_A, POOL1, DEVICE2)),
        ],
    ),
    "all-devices-no-solution": Case(
        [claim(CLAIM1, request(REQ0, CLASS_A)), claim(CLAIM0, request(REQ0, CLASS_A, mode="All"))],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=None,
    ),
    "all-devices-no-solution-reversed": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, mode="All")), claim(CLAIM1, request(REQ0, CLASS_A))],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=None,
    ),
    "all-devices-slice-without-devices": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, mode="All"))], [cls(CLASS_A, DRIVER_A)], [slc(SLICE1, NODE1, POOL1, DRIVER_A)], expect=None
    ),
    "all-devices-no-slices": Case([claim(CLAIM0, request(REQ0, CLASS_A, mode="All"))], [cls(CLASS_A, DRIVER_A)], [], expect=None),
    "all-devices-some-allocated": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, mode="All"))],
        [cls(CLASS_A, DRIVER_A)],
        [slc(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))],
        allocated=((DRIVER_A, POOL1, DEVICE1),),
        expect=None,
    ),
    "all-devices-some-allocated-admin-access": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, mode="All", admin=True))],
        [cls(CLASS_A, DRIVER_A)],
        [slc(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))],
        allocated=((DRIVER_A, POOL1, DEVICE1),),
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1, True), d(REQ0, DRIVER_A, POOL1, DEVICE2, True))],
    ),
    "all-devices-slice-without-devices-prioritized-list": _NEWER["prioritized"],
    "all-devices-no-slices-prioritized-list": _NEWER["prioritized"],
    "all-devices-some-allocated-prioritized-list": _NEWER["prioritized"],
    "network-attached-device": Case(
        [simple(CLAIM0, REQ0, CLASS_A)],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, labels("region", REGION1), POOL1, DRIVER_A)],
        expect=[want(labels("region", REGION1), d(REQ0, DRIVER_A, POOL1, DEVICE1))],
    ),
    "unsuccessful-allocation-network-attached-device": Case(
        [simple(CLAIM0, REQ0, CLASS_A)], [cls(CLASS_A, DRIVER_A)], [one(SLICE1, labels("region", REGION1), POOL1, DRIVER_A)], node(NODE2, REGION2), expect=None
    ),
    "many-network-attached-devices": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, 4))],
        [cls(CLASS_A, DRIVER_A)],
        [
            one(SLICE1, labels("region", REGION1), POOL1, DRIVER_A),
            one(SLICE1, ALL_NODES, POOL2, DRIVER_A),
            one(SLICE1, labels("planet", "earth"), POOL3, DRIVER_A),
            one(SLICE1, local(NODE1), POOL4, DRIVER_A),
        ],
        expect=[
            want(
                {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "region", "operator": "In", "values": [REGION1]},
                                {"key": "planet", "operator": "In", "values": ["earth"]},
                            ],
                            "matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE1]}],
                        }
                    ]
                },
                *(d(REQ0, DRIVER_A, p, DEVICE1) for p in (POOL1, POOL2, POOL3, POOL4)),
            )
        ],
    ),
    "local-and-network-attached-devices": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, 2))],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, labels("region", REGION1), POOL1, DRIVER_A), one(SLICE1, NODE1, POOL2, DRIVER_A)],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1), d(REQ0, DRIVER_A, POOL2, DEVICE1))],
    ),
    "several-different-drivers": Case(
        [simple(CLAIM0, REQ0, CLASS_A), simple(CLAIM0, REQ0, CLASS_B)],
        [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)],
        [slc(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2)), one(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1)), want(local(NODE1), d(REQ0, DRIVER_B, POOL1, DEVICE1))],
    ),
    "already-allocated-devices": Case(
        [simple(CLAIM0, REQ0, CLASS_A)],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A)],
        allocated=((DRIVER_A, POOL1, DEVICE1), (DRIVER_A, POOL1, DEVICE2)),
        expect=None,
    ),
    "admin-access-disabled": _NEWER["gate"],
    "admin-access-enabled": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, admin=True))],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A)],
        allocated=((DRIVER_A, POOL1, DEVICE1), (DRIVER_A, POOL1, DEVICE2)),
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1, True))],
    ),
    "with-constraint": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A), request(REQ1, CLASS_A), constraints=tuple({"matchAttribute": a} for a in (NUMA, VERSION, STRING, BOOL)))],
        [cls(CLASS_A, DRIVER_A)],
        [
            slc(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                *(
                    device(n, None, _attrs(driverVersion="v1.0.0", numa=1, stringAttribute="stringAttributeValue", boolAttribute=True))
                    for n in (DEVICE1, DEVICE2)
                ),
            )
        ],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1), d(REQ1, DRIVER_A, POOL1, DEVICE2))],
    ),
    "with-constraint-non-existent-attribute": Case(
        [simple(CLAIM0, REQ0, CLASS_A, constraints=({"matchAttribute": f"{DRIVER_A}/NonExistentAttribute"},))],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=None,
    ),
    **{
        f"with-constraint-not-matching-{kind}-attribute": Case(
            [claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=({"matchAttribute": attribute},))],
            [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)],
            [slc(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, None, _attrs(**{name: a})), device(DEVICE2, None, _attrs(**{name: b})))],
            expect=None,
        )
        for kind, attribute, name, a, b in (
            ("int", NUMA, "numa", 1, 2),
            ("string", STRING, "stringAttribute", "stringAttributeValue", "stringAttributeValue2"),
            ("bool", BOOL, "boolAttribute", True, False),
            ("version", VERSION, "driverVersion", "v1.0.0", "v2.0.0"),
        )
    },
    "with-constraint-not-matching-int-attribute-all-devices": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, 0, mode="All"), constraints=({"matchAttribute": NUMA},))],
        [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)],
        [slc(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, None, _attrs(numa=1)), device(DEVICE2, None, _attrs(numa=2)))],
        error=True,
    ),
    "with-constraint-for-request": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A), request(REQ1, CLASS_A), constraints=({"requests": [REQ0], "matchAttribute": VERSION},))],
        [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)],
        [slc(SLICE1, NODE1, POOL1, DRIVER_A, device(DEVICE1, None, _attrs(driverVersion="v1.0.0")), device(DEVICE2, None, _attrs(driverVersion="v2.0.0")))],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1), d(REQ1, DRIVER_A, POOL1, DEVICE2))],
    ),
    "with-constraint-for-request-retry": Case(
        [
            claim(
                CLAIM0,
                request(REQ0, CLASS_A),
                request(REQ1, CLASS_A),
                constraints=({"requests": [REQ0], "matchAttribute": VERSION}, {"matchAttribute": STRING}),
            )
        ],
        [cls(CLASS_A, DRIVER_A), cls(CLASS_B, DRIVER_B)],
        [
            slc(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, _attrs(driverVersion="v1.0.0", stringAttribute="a")),
                device(DEVICE2, None, _attrs(driverVersion="v2.0.0", stringAttribute="b")),
                device(DEVICE3, None, _attrs(driverVersion="v3.0.0", stringAttribute="b")),
            )
        ],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE2), d(REQ1, DRIVER_A, POOL1, DEVICE3))],
    ),
    "with-class-device-config": Case(
        [simple(CLAIM0, REQ0, CLASS_A)],
        [cls(CLASS_A, DRIVER_A, config="classAttribute")],
        [one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1), sources=("FromClass",))],
    ),
    "claim-with-device-config": Case(
        [simple(CLAIM0, REQ0, CLASS_A, config="deviceAttribute")],
        [cls(CLASS_A, DRIVER_A)],
        [one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[want(local(NODE1), d(REQ0, DRIVER_A, POOL1, DEVICE1), sources=("FromClaim",))],
    ),
    "unknown-selector": Case(
        [claim(CLAIM0, {**request(REQ0, CLASS_A), "selectors": [{}]})], [cls(CLASS_A, DRIVER_A)], [one(SLICE1, NODE1, POOL1, DRIVER_A)], error=True
    ),
    "unknown-allocation-mode": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, mode="future-mode"))], [cls(CLASS_A, DRIVER_A)], [one(SLICE1, NODE1, POOL1, DRIVER_A)], error=True
    ),
    "unknown-constraint": Case([simple(CLAIM0, REQ0, CLASS_A, constraints=({},))], [cls(CLASS_A, DRIVER_A)], [one(SLICE1, NODE1, POOL1, DRIVER_A)], error=True),
    "unknown-device": _NEWER["unknown-device"],
    "invalid-CEL-one-device": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, 1, "noSuchVar"))], [cls(CLASS_A, DRIVER_A)], [one(SLICE1, NODE1, POOL1, DRIVER_A)], error=True
    ),
    "invalid-CEL-one-device-class": Case(
        [simple(CLAIM0, REQ0, CLASS_A)], [cls(CLASS_A, DRIVER_A, expression="noSuchVar")], [one(SLICE1, NODE1, POOL1, DRIVER_A)], error=True
    ),
    "invalid-CEL-all-devices": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, 1, "noSuchVar", mode="All"))], [cls(CLASS_A, DRIVER_A)], [one(SLICE1, NODE1, POOL1, DRIVER_A)], error=True
    ),
    "too-many-devices-single-request": Case([claim(CLAIM0, request(REQ0, CLASS_A, 500))], [cls(CLASS_A, DRIVER_A)], error=True),
    "many-devices-okay": Case([claim(CLAIM0, request(REQ0, CLASS_A, 32))], [cls(CLASS_A, DRIVER_A)], expect=None),
    "too-many-devices-total": Case(
        [claim(CLAIM0, request(REQ0, CLASS_A, 32), request(REQ1, CLASS_A, 1))],
        [cls(CLASS_A, DRIVER_A)],
        [slc(SLICE1, NODE1, POOL1, DRIVER_A, *(device(f"device-{i}") for i in range(33)))],
        error=True,
    ),
    "all-devices-invalid-CEL": Case([claim(CLAIM0, request(REQ0, CLASS_A, 500))], [cls(CLASS_A, DRIVER_A)], error=True),
    **dict.fromkeys(
        (
            "prioritized-list-first-unavailable",
            "prioritized-list-non-available",
            "prioritized-list-device-config",
            "prioritized-list-class-config",
            "prioritized-list-subrequests-with-expressions",
            "prioritized-list-subrequests-with-constraints-ref-parent-request",
            "prioritized-list-subrequests-with-constraints-ref-sub-request",
            "prioritized-list-subrequests-with-allocation-mode-all",
            "prioritized-list-allocation-mode-all-multiple-requests",
            "prioritized-list-disabled",
            "prioritized-list-multi-request",
            "prioritized-list-with-backtracking",
            "prioritized-list-too-many-in-first-subrequest",
        ),
        _NEWER["prioritized"],
    ),
    **dict.fromkeys(
        (
            "partitionable-devices-single-device",
            "partitionable-devices-prioritized-list",
            "partitionable-devices-multiple-devices",
            "partitionable-devices-multiple-capacity-pools",
            "partitionable-devices-multiple-counters",
            "partitionable-devices-no-capacity-available",
            "partitionable-devices-overallocated-capacity-pool",
            "partitionable-devices-disabled",
            "partitionable-devices-per-device-node-selection-nodename",
            "partitionable-devices-per-device-node-selection-node-selector",
            "partitionable-devices-per-device-node-selection-node-selector-multiple-devices",
        ),
        _NEWER["partitionable"],
    ),
    **dict.fromkeys(
        (
            "tainted-two-devices",
            "tainted-one-device-two-taints",
            "tainted-two-devices-tolerated",
            "tainted-one-device-two-taints-both-tolerated",
            "tainted-disabled",
            "tainted-prioritized-list",
            "tainted-prioritized-list-disabled",
            "tainted-admin-access",
            "tainted-admin-access-disabled",
            "tainted-all-devices-single",
            "tainted-all-devices-single-disabled",
        ),
        _NEWER["tainted"],
    ),
    "device-binding-conditions": _NEWER["binding"],
    "node-restriction": _NEWER["restricted"],
}


def _run(case: Case) -> list[AllocationResult] | None:
    classes = {c.name: c for c in map(parse_device_class, case.classes)}
    claims = [parse_claim_spec(c["spec"], "default", c["name"], c["name"]) for c in case.claims]
    slices = [parse_slice(s) for s in case.slices]
    name, node_labels = case.node
    return Allocator(claims, classes=classes, slices=slices, reserved=case.allocated).allocate(name, node_labels)


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.skip(reason=c)) if isinstance(c, str) else n for n, c in CASES.items()],
)
def test_allocator(name: str) -> None:
    case = CASES[name]
    assert isinstance(case, Case)
    if case.error:
        with pytest.raises((AllocationError, InvalidManifest)):
            _run(case)
        return
    results = _run(case)
    if case.expect is None:
        assert not results  # no claims to allocate, or the node cannot satisfy them
        return
    assert results is not None
    assert len(results) == len(case.expect)
    for got, expected in zip(results, case.expect, strict=True):
        assert {(r.request, r.driver, r.pool, r.device, r.admin_access) for r in got.devices} == expected.devices
        assert _got_requirements(got) == _requirements(expected.selector)
        assert tuple(c["source"] for c in got.config) == expected.sources


def test_the_table_has_every_case_of_kubes() -> None:
    """98 cases in kube's TestAllocator at that commit: every one is here, run or marked."""
    assert len(CASES) == 98
    assert sum(isinstance(c, Case) for c in CASES.values()) == 56
