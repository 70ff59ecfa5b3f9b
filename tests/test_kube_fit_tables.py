"""Cases from kube-scheduler's own NodeResourcesFit tables, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources/fit_test.go (at commit
24fbb13eafec665e6f4b64961930774babd8b6d1): TestEnoughRequests, TestNotEnoughRequests and
TestStorageRequests, every case (pod-level resources included; the two cases of an extended
resource a DeviceClass stands for are kept, marked as not modelled). The node is kube's (10m of cpu, 20 bytes of memory, 32 pods,
5 ``example.com/aaa``, 20 bytes of ephemeral storage, 5 ``hugepages-2Mi``; one pod for
TestNotEnoughRequests) with one pod already there; the expectations (fits, or which resources
are insufficient) are kube's. The arguments are kube's ``NodeResourcesFitArgs``
(``ignoredResources``, ``ignoredResourceGroups``), given as ``pluginArgs.NodeResourcesFit``."""

from __future__ import annotations

import pytest

from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scheduling import CycleState
from nodemanager.scheduling.interfaces import FrameworkHandle
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.plugins.resources import NodeResourcesFit

A, B = "example.com/aaa", "example.com/bbb"
IO_A, IO_B = "kubernetes.io/something", "subdomain.kubernetes.io/something"
DRA_RESOURCE = "extended.resource.dra.io/something"  # a DeviceClass's extendedResourceName in kube's test
HUGE = "hugepages-2Mi"
ALLOCATABLE = {"cpu": "10m", "memory": "20", "pods": "32", A: "5", "ephemeral-storage": "20", HUGE: "5"}


def _requests(cpu: int = 0, memory: int = 0, storage: int = 0, **scalar: int) -> dict:
    """One container's requests as kube's ``newResourcePod`` writes them (milli-cpu, bytes)."""
    out = {"cpu": f"{cpu}m", "memory": str(memory), "ephemeral-storage": str(storage)}
    out.update({_NAMES[k]: str(v) for k, v in scalar.items()})
    return out


_NAMES = {"a": A, "b": B, "io_a": IO_A, "io_b": IO_B, "huge": HUGE, "dra": DRA_RESOURCE}
NOT_DRA = pytest.mark.skip(
    reason="not modelled: an extended resource a DeviceClass stands for (the DRAExtendedResource gate) is not allocated from DRA devices"
)


def _pod(*containers: dict, init: tuple[dict, ...] = (), overhead: dict | None = None, node: str = "", pod_level: dict | None = None) -> Pod:
    spec: dict = {"containers": [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(containers)]}
    if pod_level:  # kube's newPodLevelResourcesPod
        spec["resources"] = {"requests": pod_level}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "resources": {"requests": r}} for i, r in enumerate(init)]
    if overhead:
        spec["overhead"] = overhead
    if node:
        spec["nodeName"] = node
    return Pod.from_manifest({"metadata": {"name": "existing" if node else "p", "namespace": "default"}, "spec": spec})


def _pod_level(cpu: int, memory: int, huge: int | None = None) -> dict:
    """Pod-level requests (milli-cpu, bytes, ``hugepages-2Mi``)."""
    return {"cpu": f"{cpu}m", "memory": str(memory), **({HUGE: str(huge)} if huge is not None else {})}


R, PL = _requests, _pod_level
CASES = [
    # (kube's name, pod, the node's pod, args, kube's insufficient resources: none means it fits)
    ("no resources requested always fits", _pod(), R(10, 20), {}, ()),
    ("too many resources fails", _pod(R(1, 1)), R(10, 20), {}, ("cpu", "memory")),
    ("too many resources fails due to init container cpu", _pod(R(1, 1), init=(R(3, 1),)), R(8, 19), {}, ("cpu",)),
    ("too many resources fails due to highest init container cpu", _pod(R(1, 1), init=(R(3, 1), R(2, 1))), R(8, 19), {}, ("cpu",)),
    ("too many resources fails due to init container memory", _pod(R(1, 1), init=(R(1, 3),)), R(9, 19), {}, ("memory",)),
    ("too many resources fails due to highest init container memory", _pod(R(1, 1), init=(R(1, 3), R(1, 2))), R(9, 19), {}, ("memory",)),
    ("init container fits because it's the max, not sum, of containers and init containers", _pod(R(1, 1), init=(R(1, 1),)), R(9, 19), {}, ()),
    ("multiple init containers fit because it's the max, not sum, of containers and init containers", _pod(R(1, 1), init=(R(1, 1), R(1, 1))), R(9, 19), {}, ()),
    ("both resources fit", _pod(R(1, 1)), R(5, 5), {}, ()),
    ("one resource memory fits", _pod(R(2, 1)), R(9, 5), {}, ("cpu",)),
    ("one resource cpu fits", _pod(R(1, 2)), R(5, 19), {}, ("memory",)),
    ("equal edge case", _pod(R(5, 1)), R(5, 19), {}, ()),
    ("equal edge case for init container", _pod(R(4, 1), init=(R(5, 1),)), R(5, 19), {}, ()),
    ("extended resource fits", _pod(R(a=1)), R(), {}, ()),
    ("extended resource fits for init container", _pod(R(), init=(R(a=1),)), R(), {}, ()),
    ("extended resource capacity enforced", _pod(R(1, 1, a=10)), R(a=0), {}, (A,)),
    ("extended resource capacity enforced for init container", _pod(R(), init=(R(1, 1, a=10),)), R(a=0), {}, (A,)),
    ("extended resource allocatable enforced", _pod(R(1, 1, a=1)), R(a=5), {}, (A,)),
    ("extended resource allocatable enforced for init container", _pod(R(), init=(R(1, 1, a=1),)), R(a=5), {}, (A,)),
    ("extended resource allocatable enforced for multiple containers", _pod(R(1, 1, a=3), R(1, 1, a=3)), R(a=2), {}, (A,)),
    ("extended resource allocatable admits multiple init containers", _pod(R(), init=(R(1, 1, a=3), R(1, 1, a=3))), R(a=2), {}, ()),
    ("extended resource allocatable enforced for multiple init containers", _pod(R(), init=(R(1, 1, a=6), R(1, 1, a=3))), R(a=2), {}, (A,)),
    ("extended resource allocatable enforced for unknown resource", _pod(R(1, 1, b=1)), R(), {}, (B,)),
    ("extended resource allocatable enforced for unknown resource for init container", _pod(R(), init=(R(1, 1, b=1),)), R(), {}, (B,)),
    ("kubernetes.io resource capacity enforced", _pod(R(1, 1, io_a=10)), R(), {}, (IO_A,)),
    ("kubernetes.io resource capacity enforced for init container", _pod(R(), init=(R(1, 1, io_b=10),)), R(), {}, (IO_B,)),
    ("hugepages resource capacity enforced", _pod(R(1, 1, huge=10)), R(huge=0), {}, (HUGE,)),
    ("hugepages resource capacity enforced for init container", _pod(R(), init=(R(1, 1, huge=10),)), R(huge=0), {}, (HUGE,)),
    ("hugepages resource allocatable enforced for multiple containers", _pod(R(1, 1, huge=3), R(1, 1, huge=3)), R(huge=2), {}, (HUGE,)),
    ("skip checking ignored extended resource", _pod(R(1, 1, b=1)), R(), {"ignoredResources": [B]}, ()),
    ("resources + pod overhead fits", _pod(R(1, 1), overhead={"cpu": "3m", "memory": "13"}), R(5, 5), {}, ()),
    ("requests + overhead does not fit for memory", _pod(R(1, 1), overhead={"cpu": "1m", "memory": "15"}), R(5, 5), {}, ("memory",)),
    ("skip checking ignored extended resource via resource groups", _pod(R(1, 1, b=1, io_a=1)), R(), {"ignoredResourceGroups": ["example.com"]}, (IO_A,)),
    ("skip checking extended resource request with quantity zero via resource groups", _pod(R(1, 1, a=0)), R(a=6), {}, ()),
    ("skip checking resource request with quantity zero", _pod(R(a=1)), R(20, 30, a=1), {}, ()),
    # pod-level resources (``spec.resources``), on by default since Kubernetes 1.34
    ("both pod-level and container-level resources fit", _pod(R(1, 1), pod_level=PL(1, 2)), R(5, 5), {}, ()),
    ("pod-level cpu resource not fit", _pod(R(1, 1), pod_level=PL(7, 2)), R(5, 5), {}, ("cpu",)),
    ("pod-level memory resource not fit", _pod(R(1, 1), pod_level=PL(3, 2)), R(5, 19), {}, ("memory",)),
    ("pod-level hugepages resource fit", _pod(pod_level=PL(3, 2, huge=5)), R(), {}, ()),
    ("both pod-level and container-level hugepages resource fit", _pod(R(1, 1, huge=3), pod_level=PL(3, 2, huge=5)), R(), {}, ()),
    ("pod-level hugepages resource not fit", _pod(pod_level=PL(3, 2, huge=10)), R(), {}, (HUGE,)),
    (
        "one pod-level cpu resource fits and all init and non-init containers resources fit",
        _pod(R(1, 1), init=(R(1, 1),), pod_level=PL(3, 2)),
        R(5, 19),
        {},
        ("memory",),
    ),
    # extended resources with the DRAExtendedResource gate on (where a device plugin backs them) or off
    ("extended resource backed by device plugin", _pod(R(a=1)), R(), {}, ()),
    pytest.param("extended resource backed by DRA", _pod(R(1, 1, dra=1)), R(), {}, (), marks=NOT_DRA, id="extended resource backed by DRA"),
    ("extended resource backed by DRA, nil draManager", _pod(R(1, 1, a=1)), R(), {}, ()),
    ("extended resource backed by DRA not enabled", _pod(R(1, 1, dra=1)), R(), {}, (DRA_RESOURCE,)),
    ("extended resource NOT backed by DRA", _pod(R(1, 1, b=1)), R(), {}, (B,)),
    pytest.param(
        "extended resource was backed by Device Plugin (Allocatable: 0)",
        _pod(R(dra=1)),
        R(dra=0),
        {},
        (),
        marks=NOT_DRA,
        id="extended resource was backed by Device Plugin (Allocatable: 0)",
    ),
    ("extended resource was backed by Device Plugin (Allocatable: 0), global cache", _pod(R(a=1)), R(a=0), {}, ()),
    # TestStorageRequests
    ("empty storage requested, and pod fits", _pod(R(1, 1)), R(2, 10), {}, ()),
    ("storage ephemeral local storage request exceeds allocatable", _pod(R(storage=25)), R(2, 2), {}, ("ephemeral-storage",)),
    ("ephemeral local storage is sufficient", _pod(R(storage=5)), R(2, 2, storage=10), {}, ()),
    ("pod fits", _pod(R(storage=10)), R(2, 2), {}, ()),
]


def _node(existing: dict, allocatable: dict) -> NodeInfo:
    info = NodeInfo("node", "pool", "m.large", CapacityType.ON_DEMAND, "z", Resources.parse(allocatable), {})
    info.add_pod(_pod(existing, node="node"))
    return info


@pytest.mark.parametrize(("name", "pod", "existing", "args", "insufficient"), CASES, ids=[getattr(c, "id", None) or c[0] for c in CASES])
def test_enough_requests_as_kube_decides(name: str, pod: Pod, existing: dict, args: dict, insufficient: tuple) -> None:
    plugin = NodeResourcesFit(FrameworkHandle(), args)
    state = CycleState()
    assert plugin.pre_filter(state, pod) is None
    verdict = plugin.filter(state, pod, _node(existing, ALLOCATABLE))
    if not insufficient:
        assert verdict is None, f"{name}: {verdict}"
        return
    assert verdict is not None, name
    assert set(verdict.message.split(", ")) == {f"Insufficient {r}" for r in insufficient}, name


@pytest.mark.parametrize(
    ("name", "pod", "existing"),
    [
        ("even without specified resources, predicate fails when there's no space for additional pod", _pod(), R(10, 20)),
        ("even if both resources fit, predicate fails when there's no space for additional pod", _pod(R(1, 1)), R(5, 5)),
        ("even for equal edge case, predicate fails when there's no space for additional pod", _pod(R(5, 1)), R(5, 19)),
        ("even for equal edge case, predicate fails when there's no space for additional pod due to init container", _pod(R(5, 1), init=(R(5, 1),)), R(5, 19)),
    ],
)
def test_not_enough_requests_as_kube_decides(name: str, pod: Pod, existing: dict) -> None:
    """TestNotEnoughRequests: a node of one pod that has one is full, whatever fits."""
    plugin = NodeResourcesFit(FrameworkHandle())
    state = CycleState()
    plugin.pre_filter(state, pod)
    verdict = plugin.filter(state, pod, _node(existing, {"cpu": "10m", "memory": "20", "pods": "1"}))
    assert verdict is not None, name
    assert verdict.message == "Too many pods", name


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"ignoredResources": "example.com/bbb"}, "ignoredResources"),
        ({"ignoredResourceGroups": ["example.com/bbb"]}, "ignoredResourceGroups[0]"),
        ({"scoringStrategy": {"type": "MostAllocated"}}, "scoringStrategy"),
    ],
)
def test_bad_arguments_are_refused_naming_the_field(args: dict, problem: str) -> None:
    from nodemanager.errors import InvalidManifest

    with pytest.raises(InvalidManifest) as refused:
        NodeResourcesFit(FrameworkHandle(), args)
    assert refused.value.field == problem


def test_the_scaler_boots_for_a_pod_asking_for_an_ignored_resource_as_if_it_did_not() -> None:
    """A resource the fit filter ignores is no reason to find no node: the pod is planned
    without it (and stays unschedulable where the profile does not ignore it)."""
    import dataclasses

    from builders import binpack_pool, scaler

    from nodemanager.config.schema import NodeDefaults
    from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, ScalerSettings
    from nodemanager.scheduling.profile import DEFAULT_PROFILE

    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "256Mi", B: "1"}}}]}
    pod = Pod.from_manifest({"metadata": {"name": "licensed", "namespace": "default"}, "spec": spec})
    pools = (binpack_pool(),)
    template = scaler(*pools)
    assert pod.key in template.compute(ClusterSnapshot((pod,), ()), 0.0).unschedulable
    for args in ({"ignoredResources": [B]}, {"ignoredResourceGroups": ["example.com"]}):
        profile = dataclasses.replace(DEFAULT_PROFILE, plugin_args={"NodeResourcesFit": args})
        settings = ScalerSettings(pools, NodeDefaults(default_instance_type="a.large", name_tag="nm"), profile)
        d = BindingNodeScaler(settings, template.catalog).compute(ClusterSnapshot((pod,), ()), 0.0)
        assert d.unschedulable == {}
        assert d.bindings[pod.key] == d.start[0].name
