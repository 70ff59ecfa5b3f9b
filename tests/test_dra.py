"""The structured device allocator: pools, modes, constraints, backtracking, CEL errors."""

from __future__ import annotations

import pytest

from nodemanager.dra import AllocationError, Allocator, compile_selector, gather_pools, parse_claim, parse_device_class, parse_slice
from nodemanager.dra.model import MAX_DEVICES_PER_CLAIM

GI = 2**30
DRIVER = "gpu.example.com"


def gpu(name, model="a100", memory="40Gi", **attrs):
    attributes = {"model": {"string": model}, **{k: {"int": v} if isinstance(v, int) else {"string": v} for k, v in attrs.items()}}
    return {"name": name, "basic": {"attributes": attributes, "capacity": {"memory": memory}}}


def slice_(name, devices, *, pool="pool-a", generation=1, count=1, node="n1", driver=DRIVER, **kw):
    spec = {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count}, "devices": devices, **kw}
    if node and not kw:
        spec["nodeName"] = node
    return parse_slice({"metadata": {"name": name}, "spec": spec})


CLASS = parse_device_class({"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
CLASSES = {"gpu": CLASS}


def claim(name, *requests, constraints=(), namespace="default"):
    return parse_claim(
        {"metadata": {"name": name, "namespace": namespace}, "spec": {"devices": {"requests": list(requests), "constraints": list(constraints)}}}
    )


def req(name="r", count=1, *, mode=None, selectors=(), cls="gpu", admin=False):
    r = {"name": name, "deviceClassName": cls, "count": count}
    if mode:
        r["allocationMode"] = mode
    if selectors:
        r["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if admin:
        r["adminAccess"] = True
    return r


def names(results):
    return [[d.device for d in r.devices] for r in results]


def allocate(claims, slices, *, allocated=(), reserved=(), classes=CLASSES, node="n1", labels=None):
    return Allocator(claims, allocated, classes, slices, reserved).allocate(node, labels or {})


# -- pools --------------------------------------------------------------------------------------


def test_newest_generation_wins_without_duplicates():
    old = slice_("s-old", [gpu("g0")], generation=1)
    new = slice_("s-new", [gpu("g1")], generation=2)
    [pool] = gather_pools([old, new, old], "n1", {})
    assert [s.name for s in pool.slices] == ["s-new"]  # the old one neither stays nor doubles the new (v0.31's bug)
    assert not pool.incomplete


def test_incomplete_pools_and_slice_matching():
    part = slice_("s1", [gpu("g0")], count=2)
    other_node = slice_("s2", [gpu("g1")], pool="b", node="n2")
    everywhere = slice_("s3", [gpu("g2")], pool="c", allNodes=True)
    selected = slice_(
        "s4", [gpu("g3")], pool="d", nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["yes"]}]}]}
    )
    pools = gather_pools([part, other_node, everywhere, selected], "n1", {"gpu": "yes"})
    assert [(p.name, p.incomplete) for p in pools] == [("c", False), ("d", False), ("pool-a", True)]
    assert [p.name for p in gather_pools([selected], "n1", {"gpu": "no"})] == []


def test_invalid_node_selector_is_fatal():
    bad = slice_("bad", [gpu("g0")], nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near", "values": ["x"]}]}]})
    with pytest.raises(AllocationError, match="invalid node selector"):
        gather_pools([bad], "n1", {})


# -- ExactCount and All -------------------------------------------------------------------------


def test_exact_count_takes_the_first_devices_in_order():
    slices = [slice_("s", [gpu("g0"), gpu("g1"), gpu("g2")])]
    assert names(allocate([claim("c", req(count=2))], slices)) == [["g0", "g1"]]
    assert allocate([claim("c", req(count=4))], slices) is None  # cannot allocate: not an error


def test_exact_count_ignores_incomplete_pools_and_all_fails_on_them():
    slices = [slice_("s", [gpu("g0")], count=2)]
    assert allocate([claim("c", req())], slices) is None
    with pytest.raises(AllocationError, match="currently being updated"):
        allocate([claim("c", req(mode="All"))], slices)


def test_all_mode_takes_every_selectable_device():
    slices = [slice_("s", [gpu("g0", model="a100"), gpu("g1", model="t4"), gpu("g2", model="a100")])]
    sel = 'device.attributes["gpu.example.com"].model == "a100"'
    assert names(allocate([claim("c", req(mode="All", selectors=[sel]))], slices)) == [["g0", "g2"]]


def test_all_mode_with_a_device_in_use_cannot_allocate():
    slices = [slice_("s", [gpu("g0"), gpu("g1")])]
    assert allocate([claim("c", req(mode="All"))], slices, reserved=[(DRIVER, "pool-a", "g1")]) is None  # v0.32: not fatal


def test_devices_of_allocated_claims_are_taken():
    slices = [slice_("s", [gpu("g0"), gpu("g1")])]
    first = claim("first", req())
    [result] = allocate([first], slices)
    done = parse_claim({"metadata": {"name": "first"}, "spec": {"devices": {"requests": [req()]}}})
    done = type(done)(**{**done.__dict__, "allocation": result})
    assert names(allocate([claim("second", req())], slices, allocated=[done])) == [["g1"]]
    assert allocate([claim("third", req(count=2))], slices, allocated=[done]) is None
    assert names(allocate([claim("admin", req(admin=True))], slices, allocated=[done])) == [["g0"]]  # admin access shares


def test_several_claims_never_share_a_device():
    slices = [slice_("s", [gpu("g0"), gpu("g1")])]
    assert names(allocate([claim("a", req()), claim("b", req())], slices)) == [["g0"], ["g1"]]


# -- constraints and backtracking -----------------------------------------------------------------


def test_match_attribute_across_two_requests():
    slices = [slice_("s", [gpu("g0", model="t4"), gpu("g1", model="a100"), gpu("g2", model="a100")])]
    c = claim("c", req("a"), req("b"), constraints=[{"requests": ["a", "b"], "matchAttribute": f"{DRIVER}/model"}])
    assert names(allocate([c], slices)) == [["g1", "g2"]]


def test_backtracking_undoes_a_first_choice():
    # g0 (t4) suits request a, but then b finds no second t4: a must move to g1.
    slices = [slice_("s", [gpu("g0", model="t4"), gpu("g1", model="a100"), gpu("g2", model="a100")])]
    c = claim("c", req("a"), req("b"), constraints=[{"matchAttribute": f"{DRIVER}/model"}])
    assert names(allocate([c], slices)) == [["g1", "g2"]]


def test_device_without_the_attribute_fails_the_constraint():
    slices = [slice_("s", [{"name": "plain", "basic": {"attributes": {}}}, gpu("g1"), gpu("g2")])]
    c = claim("c", req(count=2), constraints=[{"matchAttribute": f"{DRIVER}/model"}])
    assert names(allocate([c], slices)) == [["g1", "g2"]]


def test_unknown_device_types_are_not_selectable():
    slices = [slice_("s", [{"name": "future", "composite": {"includes": ["x"]}}, gpu("g1")])]
    assert names(allocate([claim("c", req())], slices)) == [["g1"]]


# -- limits and errors --------------------------------------------------------------------------


def test_the_32_device_limit():
    devices = [gpu(f"g{i}") for i in range(40)]
    slices = [slice_("s", devices)]
    assert len(allocate([claim("c", req(count=MAX_DEVICES_PER_CLAIM))], slices)[0].devices) == 32
    with pytest.raises(AllocationError, match="too large"):
        allocate([claim("c", req(count=33))], slices)
    with pytest.raises(AllocationError, match="more than the limit of 32"):
        allocate([claim("c", req("a", count=20), req("b", count=20))], slices)
    with pytest.raises(AllocationError, match="more than the limit of 32"):
        allocate([claim("c", req(mode="All"))], slices)


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("device.(", "compile error"),
        ('device.attributes["gpu.example.com"].nope == "x"', "runtime error"),
        ("1 + 1", "must be a bool"),
        ('quantity("lots").compareTo(quantity("1")) > 0', "quantity"),
    ],
)
def test_cel_errors_are_fatal_and_name_claim_and_expression(expression, problem):
    slices = [slice_("s", [gpu("g0")])]
    with pytest.raises(AllocationError) as err:
        allocate([claim("c", req(selectors=[expression]))], slices)
    assert "claim default/c, request r" in str(err.value)
    assert repr(expression) in str(err.value)
    assert problem in str(err.value)


def test_unknown_class_and_empty_class_are_fatal():
    slices = [slice_("s", [gpu("g0")])]
    with pytest.raises(AllocationError, match="device class 'tpu' not found"):
        allocate([claim("c", req(cls="tpu"))], slices)
    with pytest.raises(AllocationError, match="empty deviceClassName"):
        allocate([claim("c", req(cls=""))], slices)


def test_cel_environment():
    from nodemanager.dra import Device, Version, evaluate

    d = Device("g", {"model": "a100", "other.org/flag": True, "driverVersion": Version("1.10.0")}, {"memory": 80 * GI})
    cases = {
        f'device.driver == "{DRIVER}"': True,
        f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0': True,
        f'device.capacity["{DRIVER}"].memory.isLessThan(quantity("64Gi"))': False,
        f'device.attributes["{DRIVER}"].model == "a100"': True,  # unqualified: the driver's domain
        'device.attributes["other.org"].flag': True,
        'has(device.attributes["unknown.io"].x)': False,  # unknown domain: an empty map
        f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.9.9"))': True,
        f'device.attributes["{DRIVER}"].driverVersion.compareTo(semver("1.10.0-rc.1")) > 0': True,
    }
    for expression, expected in cases.items():
        assert evaluate(expression, d, DRIVER) is expected, expression


def test_selectors_are_compiled_once_and_results_cached():
    compile_selector.cache_clear()
    expression = f'device.attributes["{DRIVER}"].model == "a100"'
    cls = parse_device_class({"metadata": {"name": "a100"}, "spec": {"selectors": [{"cel": {"expression": expression}}]}})
    slices = [slice_("s", [gpu(f"g{i}") for i in range(4)])]
    allocator = Allocator([claim("c", req(count=4, cls="a100"))], (), {"a100": cls}, slices)
    allocator.allocate("n1")
    assert compile_selector.cache_info().misses == 1
    assert len(allocator._selectable) == 4  # one evaluation per (device, request)


def test_manifests_parse_like_the_api_sends_them():
    from nodemanager.dra import parse_all
    from nodemanager.errors import InvalidManifest

    classes, claims, slices = parse_all(
        [
            {"kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}},
            {
                "kind": "ResourceClaim",
                "metadata": {"name": "c"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": 2}}]}},
            },
            {
                "kind": "ResourceSlice",
                "metadata": {"name": "s"},
                "spec": {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "p", "generation": 3, "resourceSliceCount": 1}, "devices": [gpu("g0")]},
            },
        ]
    )
    assert (classes[0].selectors, claims[0].requests[0].count, slices[0].generation, slices[0].devices[0].capacity["memory"]) == (("true",), 2, 3, 40 * GI)
    with pytest.raises(InvalidManifest, match=r"\[0\]\.spec\.devices\.requests\[0\]\.allocationMode"):
        parse_all([{"kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {"devices": {"requests": [{"name": "r", "allocationMode": "Some"}]}}}])


def test_official_client_objects_parse_to_the_same_model():
    from kubernetes import client as k8s

    from nodemanager.cluster.objects import to_manifest

    slice_obj = k8s.V1ResourceSlice(
        api_version="resource.k8s.io/v1",
        kind="ResourceSlice",
        metadata=k8s.V1ObjectMeta(name="s"),
        spec=k8s.V1ResourceSliceSpec(
            driver=DRIVER,
            node_name="n1",
            pool=k8s.V1ResourcePool(name="pool-a", generation=1, resource_slice_count=1),
            devices=[
                k8s.V1Device(
                    name="g0",
                    attributes={"model": k8s.V1DeviceAttribute(string="a100")},
                    capacity={"memory": k8s.V1DeviceCapacity(value="40Gi")},
                )
            ],
        ),
    )
    claim_obj = k8s.ResourceV1ResourceClaim(
        metadata=k8s.V1ObjectMeta(name="c", namespace="default"),
        spec=k8s.V1ResourceClaimSpec(
            devices=k8s.V1DeviceClaim(requests=[k8s.V1DeviceRequest(name="r", exactly=k8s.V1ExactDeviceRequest(device_class_name="gpu", count=1))])
        ),
    )
    parsed_slice = parse_slice(to_manifest(slice_obj))
    assert parsed_slice == slice_("s", [gpu("g0")])
    parsed_claim = parse_claim(to_manifest(claim_obj))
    assert parsed_claim == claim("c", req())
    assert names(allocate([parsed_claim], [parsed_slice])) == [["g0"]]
