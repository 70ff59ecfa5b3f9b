"""Cases from kube-scheduler's own tables for the allocation scores, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources/most_allocated_test.go
(TestMostAllocatedScoringStrategy, at commit 030880a5dc5449403c6d1f0aa146a7dc21d6c6dc).
The expectations are kube's; the weights (``scoringStrategy.resources``) are MostAllocated's
``resources`` argument here. Not ported, as not modelled: "Resources not set, pods scheduled
with error" (without ``resources`` nodemanager scores cpu and memory 1:1, kube's default
arguments, rather than failing)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nodemanager.errors import InvalidManifest
from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scheduling import CycleState
from nodemanager.scheduling.interfaces import FrameworkHandle
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.plugins import MostAllocated
from nodemanager.scheduling.plugins.resources import LeastAllocated

MI = 2**20


def pod(*containers: dict[str, str], name: str = "p") -> Pod:
    """kube's ``st.MakePod()``: ``Req(r)`` is a container asking for ``r``, ``Container(..)``
    one asking for nothing (``{}`` here); with neither the pod has no container."""
    spec = {"containers": [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(containers)]}
    return Pod.from_manifest({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def node(name: str, cpu: int, memory: int, *placed: Pod) -> NodeInfo:
    info = NodeInfo(name, "p", "m.large", CapacityType.ON_DEMAND, "z-a", Resources({"cpu": cpu, "memory": memory, "pods": 110}), {})
    for i, p in enumerate(placed):
        info.add_pod(replace(p, name=f"{p.name}-{name}-{i}"))
    return info


# kube's quantities "4000" (cpu) are 4000 cores in the test's units; the ratios are what count,
# so cpu is read here as millicores and memory as bytes, keeping every ratio.
CASES = [
    ("nothing scheduled, nothing requested", pod(), [node("node1", 4000, 10000), node("node2", 4000, 10000)], {"node1": 0, "node2": 0}),
    (
        "nothing scheduled, resources requested, differently sized nodes",
        pod({"cpu": "1", "memory": "2000"}, {"cpu": "2", "memory": "3000"}),
        [node("node1", 4000, 10000), node("node2", 6000, 10000)],
        {"node1": 62, "node2": 50},
    ),
    (
        "no resources requested, pods scheduled with resources",
        pod(),
        [
            node("node1", 10000, 20000, pod({"cpu": "3", "memory": "0"}), pod({"cpu": "3", "memory": "0"})),
            node("node2", 10000, 20000, pod({"cpu": "3", "memory": "0"}), pod({"cpu": "3", "memory": "5000"})),
        ],
        {"node1": 30, "node2": 42},
    ),
    (
        "resources requested, pods scheduled with resources",
        pod({"cpu": "1", "memory": "2000"}, {"cpu": "2", "memory": "3000"}),
        [node("node1", 10000, 20000, pod({"cpu": "3", "memory": "0"})), node("node2", 10000, 20000, pod({"cpu": "3", "memory": "5000"}))],
        {"node1": 42, "node2": 55},
    ),
    (
        "resources requested equal node capacity",
        pod({"cpu": "2", "memory": "4000"}, {"cpu": "3", "memory": "5000"}),
        [node("node1", 5000, 10000), node("node2", 10000, 9000)],
        {"node1": 95, "node2": 75},
    ),
    (
        # cpu requested (3 x the 100m default) is past the 250m allocatable: kube caps it at
        # the maximum (a full node scores 100 for it), where 0 would rank it below a half-full one
        "no resources requested, pods scheduled, nonzero request for resource",
        pod({}),
        [node("node1", 250, 1000 * MI, pod({}, name="a"), pod({}, name="b")), node("node2", 250, 1000 * MI)],
        {"node1": 80, "node2": 30},
    ),
]


@pytest.mark.parametrize(("name", "incoming", "nodes", "expected"), CASES, ids=[c.values[0] if hasattr(c, "values") else c[0] for c in CASES])
def test_most_allocated_as_kube_scores_it(name: str, incoming: Pod, nodes: list[NodeInfo], expected: dict[str, int]) -> None:
    plugin = MostAllocated(FrameworkHandle())
    assert {n.name: plugin.score(CycleState(), incoming, n)[0] for n in nodes} == expected, name


def test_most_allocated_weighs_the_resources_as_kube_does() -> None:
    """kube's second "nothing scheduled, resources requested, differently sized nodes" case:
    memory weighs 2, cpu 1 (node1: (75 * 1 + 50 * 2) / 3 = 58)."""
    plugin = MostAllocated(FrameworkHandle(), {"resources": [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}]})
    incoming = pod({"cpu": "1", "memory": "2000"}, {"cpu": "2", "memory": "3000"})
    nodes = [node("node1", 4000, 10000), node("node2", 6000, 10000)]
    assert {n.name: plugin.score(CycleState(), incoming, n)[0] for n in nodes} == {"node1": 58, "node2": 50}


@pytest.mark.parametrize(
    ("name", "resources", "field"),
    [
        ("resource with negative weight", [{"name": "memory", "weight": -1}, {"name": "cpu", "weight": 1}], "resources[0].weight"),
        ("resource with zero weight", [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 0}], "resources[1].weight"),
        ("resource weight larger than MaxNodeScore", [{"name": "memory", "weight": 101}], "resources[0].weight"),
    ],
)
def test_most_allocated_refuses_the_weights_kube_refuses(name: str, resources: list[dict[str, object]], field: str) -> None:
    with pytest.raises(InvalidManifest) as refused:
        MostAllocated(FrameworkHandle(), {"resources": resources})
    assert refused.value.field == field, name


XRES = "example.com/xyz"
EXTENDED = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": XRES, "weight": 1}]


def _sized(name: str, cpu: int, memory: int, xres: int = 0) -> NodeInfo:
    amounts = {"cpu": cpu, "memory": memory, "pods": 110, XRES: xres}
    return NodeInfo(name, "p", "m.large", CapacityType.ON_DEMAND, "z-a", Resources(amounts), {})


@pytest.mark.parametrize(
    ("name", "resources", "incoming", "nodes", "expected"),
    [
        (
            "bypass extended resource if the pod does not request",
            EXTENDED,
            pod({"cpu": "1", "memory": "2000"}, {"cpu": "2", "memory": "3000"}),
            [_sized("node1", 6000, 10000), _sized("node2", 6000, 10000, xres=4)],
            {"node1": 50, "node2": 50},
        ),
        (
            "honor extended resource if the pod request",
            EXTENDED,
            pod({"cpu": "3", "memory": "5000", XRES: "2"}),
            [_sized("node1", 6000, 10000, xres=4), _sized("node2", 6000, 10000, xres=10)],
            {"node1": 50, "node2": 40},
        ),
        (
            "if the node doesn't have a resource",
            [{"name": XRES, "weight": 2}, {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
            pod({"cpu": "3", "memory": "4000"}),
            [_sized("node1", 6000, 10000), _sized("node2", 6000, 10000, xres=4)],
            {"node1": 45, "node2": 45},
        ),
    ],
)
def test_most_allocated_scores_extended_resources_as_kube_does(name: str, resources: list, incoming: Pod, nodes: list[NodeInfo], expected: dict) -> None:
    """kube's extended-resource cases: a resource the pod does not request, or the node
    does not have, is left out of the weighted sum."""
    plugin = MostAllocated(FrameworkHandle(), {"resources": resources})
    scores, _ = plugin.score_nodes(CycleState(), incoming, nodes)
    assert scores == expected, name


def test_a_score_of_extended_resources_only_gives_zero_to_a_pod_that_asks_for_none() -> None:
    """kube: nothing weighed, score 0 (no division by a zero sum of weights)."""
    plugin = MostAllocated(FrameworkHandle(), {"resources": [{"name": XRES, "weight": 1}]})
    nodes = [_sized("node1", 6000, 10000, xres=4)]
    assert plugin.score_nodes(CycleState(), pod({"cpu": "1"}), nodes)[0] == {"node1": 0}
    assert plugin.score_nodes(CycleState(), pod({"cpu": "1", XRES: "1"}), nodes)[0] == {"node1": 25}


# -- LeastAllocated: kube's least_allocated_test.go (TestLeastAllocatedScoringStrategy, at
# commit 8519d3399f10be33a45da368a48ee763acbe3999), every case but "Resources not set, pods
# scheduled with error" (not modelled, as above).

MEMORY_TWICE = [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}]
CPU_ONLY_3 = {"cpu": "3", "memory": "0"}
LEAST_CASES = [
    ("nothing scheduled, nothing requested", None, pod(), [node("node1", 4000, 10000), node("node2", 4000, 10000)], {"node1": 100, "node2": 100}),
    (
        "nothing scheduled, resources requested, differently sized nodes",
        None,
        pod({"cpu": "1", "memory": "2000"}, {"cpu": "2", "memory": "3000"}),
        [node("node1", 4000, 10000), node("node2", 6000, 10000)],
        {"node1": 37, "node2": 50},
    ),
    (
        "no resources requested, pods scheduled",
        None,
        pod(),
        [node("node1", 4000, 10000, pod(name="a"), pod(name="b")), node("node2", 4000, 10000, pod(name="c"), pod(name="d"))],
        {"node1": 100, "node2": 100},
    ),
    (
        "no resources requested, pods scheduled with resources",
        None,
        pod(),
        [node("node1", 10000, 20000, pod(CPU_ONLY_3), pod(CPU_ONLY_3)), node("node2", 10000, 20000, pod(CPU_ONLY_3), pod({"cpu": "3", "memory": "5000"}))],
        {"node1": 70, "node2": 57},
    ),
    (
        "resources requested, pods scheduled with resources",
        None,
        pod({"cpu": "1", "memory": "2000"}, {"cpu": "2", "memory": "3000"}),
        [node("node1", 10000, 20000, pod(CPU_ONLY_3)), node("node2", 10000, 20000, pod({"cpu": "3", "memory": "5000"}))],
        {"node1": 57, "node2": 45},
    ),
    (
        "resources requested, pods scheduled with resources, differently sized nodes",
        None,
        pod({"cpu": "1", "memory": "2000"}, {"cpu": "2", "memory": "3000"}),
        [node("node1", 10000, 20000, pod(CPU_ONLY_3)), node("node2", 10000, 50000, pod({"cpu": "3", "memory": "5000"}))],
        {"node1": 57, "node2": 60},
    ),
    (
        "requested resources exceed node capacity",
        None,
        pod(CPU_ONLY_3),
        [node("node1", 4000, 10000, pod(CPU_ONLY_3)), node("node2", 4000, 10000, pod({"cpu": "3", "memory": "5000"}))],
        {"node1": 50, "node2": 25},
    ),
    (
        "zero node resources, pods scheduled with resources",
        None,
        pod(),
        [node("node1", 0, 0, pod(CPU_ONLY_3)), node("node2", 0, 0, pod({"cpu": "3", "memory": "5000"}))],
        {"node1": 0, "node2": 0},
    ),
    (
        "nothing scheduled, resources requested with different weight on CPU and memory, differently sized nodes",
        MEMORY_TWICE,
        pod({"cpu": "1", "memory": "2000"}, {"cpu": "2", "memory": "3000"}),
        [node("node1", 4000, 10000), node("node2", 6000, 10000)],
        {"node1": 41, "node2": 50},
    ),
    (
        "bypass extended resource if the pod does not request",
        EXTENDED,
        pod({"cpu": "1", "memory": "2000"}, {"cpu": "2", "memory": "3000"}),
        [_sized("node1", 6000, 10000), _sized("node2", 6000, 10000, xres=4)],
        {"node1": 50, "node2": 50},
    ),
    (
        "honor extended resource if the pod requests",
        EXTENDED,
        pod({"cpu": "3", "memory": "5000", XRES: "2"}),
        [_sized("node1", 6000, 10000, xres=4), _sized("node2", 6000, 10000, xres=10)],
        {"node1": 50, "node2": 60},
    ),
    (
        "if the node doesn't have a resource",
        [{"name": XRES, "weight": 2}, {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
        pod({"cpu": "3", "memory": "4000"}),
        [_sized("node1", 6000, 10000), _sized("node2", 6000, 10000, xres=4)],
        {"node1": 55, "node2": 55},
    ),
]


@pytest.mark.parametrize(("name", "resources", "incoming", "nodes", "expected"), LEAST_CASES, ids=[c[0] for c in LEAST_CASES])
def test_least_allocated_as_kube_scores_it(name: str, resources: list | None, incoming: Pod, nodes: list[NodeInfo], expected: dict[str, int]) -> None:
    plugin = LeastAllocated(FrameworkHandle(), {"resources": resources} if resources else None)
    assert plugin.score_nodes(CycleState(), incoming, nodes)[0] == expected, name


@pytest.mark.parametrize(
    ("name", "resources", "field"),
    [
        ("resource with negative weight", [{"name": "memory", "weight": -1}, {"name": "cpu", "weight": 1}], "resources[0].weight"),
        ("resource with zero weight", [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 0}], "resources[1].weight"),
        ("resource weight larger than MaxNodeScore", [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 101}], "resources[1].weight"),
    ],
)
def test_least_allocated_refuses_the_weights_kube_refuses(name: str, resources: list[dict[str, object]], field: str) -> None:
    with pytest.raises(InvalidManifest) as refused:
        LeastAllocated(FrameworkHandle(), {"resources": resources})
    assert refused.value.field == field, name
