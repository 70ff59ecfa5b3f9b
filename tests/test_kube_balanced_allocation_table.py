"""Cases from kube-scheduler's own BalancedAllocation table, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources/balanced_allocation_test.go
(TestNodeResourcesBalancedAllocation, at commit 00fdb4ffc64976886691c99434ab5b01fa54f8fe).
The expectations are kube's. Not modelled, and so not run: the two cases with a DRA extended
resource (a device class standing for an extended resource)."""

from __future__ import annotations

import pytest

from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scheduling import CycleState
from nodemanager.scheduling.interfaces import FrameworkHandle
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.plugins.resources import BalancedAllocation
from nodemanager.scheduling.status import Code


def _pod(*containers: tuple[str, str], node: str = "", name: str = "p") -> Pod:
    spec: dict = {"containers": [{"name": f"c{i}", "resources": {"requests": {"cpu": c, "memory": m}}} for i, (c, m) in enumerate(containers)]}
    if node:
        spec["nodeName"] = node
    return Pod.from_manifest({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


CPU_AND_MEMORY = (("1000m", "2000"), ("2000m", "3000"))
CPU_ONLY = (("1000m", "0"), ("2000m", "0"))


def _nodes(sizes: dict[str, tuple[int, int]], placed: list[tuple[tuple, str]]) -> list[NodeInfo]:
    infos = {n: NodeInfo(n, "p", "", CapacityType.ON_DEMAND, "", Resources({"cpu": c, "memory": m, "pods": 110}), {}) for n, (c, m) in sizes.items()}
    for i, (containers, where) in enumerate(placed):
        if where in infos:
            infos[where].add_pod(_pod(*containers, node=where, name=f"placed-{i}"))
    return list(infos.values())


# kube's placed pods: cpuOnly on node1, cpuAndMemory on node2
PLACED = [(CPU_ONLY, "node1"), (CPU_AND_MEMORY, "node2")]
SMALL = {"node1": (4000, 10000), "node2": (6000, 10000)}
WIDE = {"node1": (3500, 40000), "node2": (3500, 40000)}
LARGE = {"node1": (10000, 20000), "node2": (10000, 20000)}
CASES = [
    # (kube's name, the pod's containers, nodes (milli-cpu, memory bytes), placed pods, kube's scores)
    ("nothing scheduled, resources requested, differently sized nodes", CPU_AND_MEMORY, SMALL, [], {"node1": 87, "node2": 100}),
    ("resources requested, pods scheduled with resources", CPU_AND_MEMORY, LARGE, PLACED, {"node1": 82, "node2": 95}),
    (
        "resources requested, pods scheduled with resources, differently sized nodes",
        CPU_AND_MEMORY,
        {"node1": (10000, 20000), "node2": (10000, 50000)},
        PLACED,
        {"node1": 82, "node2": 80},
    ),
    ("requested resources at node capacity", CPU_ONLY, {"node1": (6000, 10000), "node2": (6000, 10000)}, PLACED, {"node1": 50, "node2": 75}),
    ("node without the scalar resource should skip the scalar resource", CPU_AND_MEMORY, WIDE, [], {"node1": 63, "node2": 63}),
    (
        "resources requested, pods scheduled with resources if PreScore not called",
        CPU_AND_MEMORY,
        {"node1": (10000, 20000), "node2": (10000, 20000)},
        PLACED,
        {"node1": 82, "node2": 95},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_balanced_allocation_scores_as_kube_does(case: tuple) -> None:
    name, containers, sizes, placed, expected = case
    plugin = BalancedAllocation(FrameworkHandle())
    nodes = _nodes(sizes, placed)
    pod = _pod(*containers)
    if "PreScore not called" not in name:
        assert plugin.pre_score(CycleState(), pod, nodes) is None
    scores, _ = plugin.score_nodes(CycleState(), pod, nodes)
    assert scores == expected, name


def test_nothing_scheduled_nothing_requested_skip_in_prescore() -> None:
    """kube's first case: a best-effort pod is not scored."""
    plugin = BalancedAllocation(FrameworkHandle())
    nodes = _nodes({"node1": (4000, 10000), "node2": (4000, 10000)}, [])
    status = plugin.pre_score(CycleState(), Pod.from_manifest({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}), nodes)
    assert status is not None
    assert status.code is Code.SKIP


GPU = "nvidia.com/gpu"
WITH_GPU = {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": GPU, "weight": 1}]}


def _gpu_node(name: str, gpus: int, *placed: Pod) -> NodeInfo:
    info = NodeInfo(name, "p", "", CapacityType.ON_DEMAND, "", Resources({"cpu": 3500, "memory": 40000, "pods": 110, GPU: gpus}), {})
    for p in placed:
        info.add_pod(p)
    return info


def _gpu_pod(node: str = "", name: str = "p", **requests: str) -> Pod:
    spec: dict = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    return Pod.from_manifest({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def test_include_scalar_resource_on_a_node_for_balanced_resource_allocation() -> None:
    """kube's case of that name: cpu 3000/3500, memory 5000/40000 on both nodes; node1's
    GPUs 4/8 with the pod's, node2's 1/8 (std 0.300 and 0.345)."""
    cpu_memory_gpu = Pod.from_manifest(
        {
            "metadata": {"name": "g", "namespace": "default"},
            "spec": {
                "nodeName": "node1",
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "1000m", "memory": "2000"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "2000m", "memory": "3000", GPU: "3"}, "limits": {GPU: "3"}}},
                ],
            },
        }
    )
    nodes = [_gpu_node("node1", 8, cpu_memory_gpu), _gpu_node("node2", 8, _pod(*CPU_AND_MEMORY, node="node2", name="cm"))]
    plugin = BalancedAllocation(FrameworkHandle(), WITH_GPU)
    pod = _gpu_pod(memory="0", **{GPU: "1"})
    assert plugin.pre_score(CycleState(), pod, nodes) is None
    assert plugin.score_nodes(CycleState(), pod, nodes)[0] == {"node1": 70, "node2": 65}


def test_node_without_the_scalar_resource_should_skip_the_scalar_resource() -> None:
    """kube's case of that name, with the GPU among the scored resources: the pod asks for
    none, so it is left out and both nodes score as cpu and memory alone (63)."""
    nodes = [_gpu_node("node1", 8), _gpu_node("node2", 0)]
    plugin = BalancedAllocation(FrameworkHandle(), WITH_GPU)
    assert plugin.score_nodes(CycleState(), _pod(*CPU_AND_MEMORY), nodes)[0] == {"node1": 63, "node2": 63}
