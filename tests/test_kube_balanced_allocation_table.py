"""Cases from kube-scheduler's own BalancedAllocation table, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources/balanced_allocation_test.go
(TestNodeResourcesBalancedAllocation, at commit 00fdb4ffc64976886691c99434ab5b01fa54f8fe).
The expectations are kube's. Not modelled, and so not run: the two cases with a GPU in the
scored resources and the two with a DRA extended resource (the scored resources here are cpu
and memory); the case with the GPU on one node only scores cpu and memory, and is run."""

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
