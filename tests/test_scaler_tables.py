"""The reference's scenario tables (Kip §10.1 and §10.2) as table tests of compute().

Pods "A" / "B" ask for instance type a.large / b.large; spot pods say capacity-type spot.
Idle grace is 0 here, as in Kip, so unneeded nodes stop in the same pass.
"""

import pytest
from builders import SPOT, cell_pool, node, pod, scaler

from nodemanager.config.schema import Standby
from nodemanager.model import CapacityPolicy, NodeState, PodPhase
from nodemanager.scaler import ClusterSnapshot

ON = CapacityPolicy.ON_DEMAND
SP = CapacityPolicy.SPOT


def A(name, **kw):
    return pod(name, itype="a.large", policy=kw.pop("policy", ON), **kw)


def B(name, **kw):
    return pod(name, itype="b.large", policy=kw.pop("policy", ON), **kw)


def run(s, pods=(), nodes=(), unavailable=None, now=100.0):
    d = s.compute(ClusterSnapshot(tuple(pods), tuple(nodes), unavailable or {}), now)
    starts = sorted((n.instance_type, n.capacity_type.value) for n in d.start)
    stops = sorted(o.name for o in d.stop)
    return starts, stops, d


a, b = ("a.large", "on-demand"), ("b.large", "on-demand")
a_spot = ("a.large", "spot")

NO_STANDBY = [
    pytest.param([], [], [], [], id="nothing"),
    pytest.param([A("p1")], [], [a], [], id="one-pod-A"),
    pytest.param([A("p1"), B("p2")], [], [a, b], [], id="pods-A-and-B"),
    pytest.param([A("p1"), B("p2")], [node("nA")], [b], [], id="pods-A-B-node-A"),
    pytest.param([A("p1"), A("p2")], [node("nA")], [a], [], id="two-pods-A-one-node"),
    pytest.param([], [node("nA")], [], ["nA"], id="lone-node-stops"),
    pytest.param([], [node("n1"), node("n2")], [], ["n1", "n2"], id="two-idle-nodes-stop"),
    pytest.param([], [node("nA"), node("nB", "b.large")], [], ["nA", "nB"], id="idle-A-and-B-stop"),
    pytest.param([A("p1"), A("p2")], [node("nA"), node("nB", "b.large")], [a], ["nB"], id="two-A-pods-nodes-A-B"),
]


@pytest.mark.parametrize(("pods", "nodes", "start", "stop"), NO_STANDBY)
def test_on_demand_scaling_no_standby(pods, nodes, start, stop):
    starts, stops, _ = run(scaler(cell_pool()), pods, nodes)
    assert (starts, stops) == (start, stop)


STANDBY = [
    pytest.param([], [], [a, a], [], id="empty-fills-pool"),
    pytest.param([A("p1")], [node("n1"), node("n2")], [a], [], id="pod-takes-one-pool-refilled"),
    pytest.param([], [node("n1"), node("n2"), node("n3")], [], ["n3"], id="three-idle-one-stops"),
    pytest.param([B("p1")], [node("n1")], [a, b], [], id="pod-B-and-one-A"),
]


@pytest.mark.parametrize(("pods", "nodes", "start", "stop"), STANDBY)
def test_on_demand_scaling_with_standby(pods, nodes, start, stop):
    pool = cell_pool(standby=[Standby(instance_type="a.large", count=2), Standby(instance_type="a.large", count=0)])
    starts, stops, _ = run(scaler(pool), pods, nodes)
    assert (starts, stops) == (start, stop)


SPOT_CASES = [
    pytest.param([], [], [], [], id="nothing"),
    pytest.param([A("p1", policy=SP)], [], [a_spot], [], id="spot-pod"),
    pytest.param([A("p1", policy=SP), A("p2")], [], [a, a_spot], [], id="spot-and-on-demand"),
    pytest.param([A("p1", policy=SP)], [node("s1", capacity=SPOT)], [], [], id="spot-pod-spot-node"),
    pytest.param([A("p1", policy=SP)], [node("o1")], [a_spot], ["o1"], id="spot-pod-on-demand-node"),
    pytest.param([A("p1", policy=SP), A("p2", policy=SP)], [node("s1", capacity=SPOT), node("s2", capacity=SPOT)], [], [], id="two-and-two"),
    pytest.param([A("p1", phase=PodPhase.FAILED)], [], [], [], id="failed-pod-no-node"),
    pytest.param([], [node("s1", capacity=SPOT)], [], ["s1"], id="idle-spot-stops"),
    pytest.param([A("p1", policy=SP)], [node("s1", capacity=SPOT), node("s2", capacity=SPOT)], [], ["s2"], id="one-pod-two-nodes"),
    pytest.param([A("p1", policy=SP), B("p2", policy=SP)], [], [a_spot, ("b.large", "spot")], [], id="spot-A-and-B"),
]


@pytest.mark.parametrize(("pods", "nodes", "start", "stop"), SPOT_CASES)
def test_spot_scaling(pods, nodes, start, stop):
    starts, stops, _ = run(scaler(cell_pool()), pods, nodes)
    assert (starts, stops) == (start, stop)


def test_spot_pod_whose_offering_is_unavailable_everywhere_starts_nothing():
    unavailable = {("a.large", SPOT, z): 1e9 for z in ("zone-1a", "zone-1b")}
    starts, stops, d = run(scaler(cell_pool()), [A("p1", policy=SP)], [], unavailable)
    assert (starts, stops) == ([], [])
    assert "unavailable" in d.waiting["default/p1"]
    assert "default/p1" not in d.unschedulable  # it could fit; it waits instead


def test_unavailable_spot_does_not_block_on_demand():
    unavailable = {("a.large", SPOT, z): 1e9 for z in ("zone-1a", "zone-1b")}
    starts, _, _ = run(scaler(cell_pool()), [A("p1")], [], unavailable)
    assert starts == [a]


def test_unavailable_zone_falls_back_to_the_next_zone_in_the_same_computation():
    _, _, d = run(scaler(cell_pool()), [A("p1", policy=SP)], [], {("a.large", SPOT, "zone-1a"): 1e9})
    assert [(n.instance_type, n.zone) for n in d.start] == [("a.large", "zone-1b")]


def test_expired_unavailability_is_ignored():
    _, _, d = run(scaler(cell_pool()), [A("p1", policy=SP)], [], {("a.large", SPOT, "zone-1a"): 50.0}, now=100.0)
    assert [n.zone for n in d.start] == ["zone-1a"]


def test_pod_pinned_to_a_zone_gets_a_node_there():
    _, _, d = run(scaler(cell_pool()), [A("p1", zone="zone-1b")])
    assert [n.zone for n in d.start] == ["zone-1b"]


def test_spot_pod_whose_zone_is_unavailable_gets_nothing():
    starts, _, _ = run(scaler(cell_pool()), [A("p1", policy=SP, zone="zone-1b")], [], {("a.large", SPOT, "zone-1b"): 1e9})
    assert starts == []


# -- node_scaler_test.go ----------------------------------------------------------------


def test_unbinds_and_rebinds():
    stale = node("n1", state=NodeState.CREATING, bound=("gone",))
    starts, stops, d = run(scaler(cell_pool()), [A("p1")], [stale])
    assert (starts, stops) == ([], [])
    assert d.bindings == {"default/p1": "n1"}


def test_matching_pod_to_standby_pool():
    pool = cell_pool(standby=[Standby(instance_type="a.large", count=1)])
    starts, stops, d = run(scaler(pool), [A("p1")], [node("n1")])
    assert d.bindings == {"default/p1": "n1"}
    assert (starts, stops) == ([a], [])


def test_full_standby_pool_starts_and_stops_nothing():
    pool = cell_pool(standby=[Standby(instance_type="a.large", count=2), Standby(instance_type="b.large", count=1)])
    starts, stops, _ = run(scaler(pool), [], [node("n1"), node("n2"), node("n3", "b.large")])
    assert (starts, stops) == ([], [])


@pytest.mark.parametrize(
    ("standby", "node_kw", "matches"),
    [
        pytest.param(Standby(instance_type="a.large", count=1), {}, True, id="same"),
        pytest.param(Standby(instance_type="a.large", count=1, spot=True), {}, False, id="spot-flag-differs"),
        pytest.param(Standby(instance_type="b.large", count=1), {}, False, id="type-differs"),
        pytest.param(Standby(instance_type="a.large", count=1, zone="zone-1b"), {}, False, id="zone-differs"),
    ],
)
def test_node_matches_standby_spec(standby, node_kw, matches):
    starts, stops, _ = run(scaler(cell_pool(standby=[standby])), [], [node("n1", **node_kw)])
    assert (stops == []) is matches
    assert (starts == []) is matches


def test_binding_to_a_pod_no_longer_waiting_is_dropped():
    running_elsewhere = A("p1", phase=PodPhase.RUNNING, node="other")
    _, stops, d = run(scaler(cell_pool()), [running_elsewhere], [node("n1", bound=("p1",))])
    assert d.bindings == {}
    assert stops == ["n1"]
