"""The simulated cloud and cluster (products of their own) and workload files."""

import contextlib
import gc
import weakref
from collections.abc import Iterator

import pytest
from builders import since_holds
from harness import arrive
from hypothesis import given, settings
from hypothesis import strategies as st

from cloud.base import CONTROLLER_TAG, NODE_TAG, BootRequest, InstanceState
from cloud.errors import InsufficientCapacity, NotFound, Throttled
from cloud.simulated import Listing, SimulatedCloud
from nodemanager.clock import VirtualClock
from nodemanager.cluster.base import BindError, EventType, Heartbeats, NodeEvent, PodEvent
from nodemanager.cluster.simulated import SimulatedCluster, relisted
from nodemanager.cluster.workload import WorkloadError, parse_workload
from nodemanager.model import CapacityType, PodPhase, Resources

OD, SPOT = CapacityType.ON_DEMAND, CapacityType.SPOT


def req(name: str, itype: str = "m5.large", capacity: CapacityType = OD, zone: str = "us-east-1a", token: str | None = None) -> BootRequest:
    return BootRequest(name, "pool", itype, capacity, zone, token or f"tok-{name}", 20 * 2**30)


# -- cloud ---------------------------------------------------------------------------------


def test_boot_is_idempotent_by_token_and_tags_the_instance():
    clock = VirtualClock()
    cloud = SimulatedCloud("ctl", clock, boot_delay=30)
    first = cloud.boot(req("n1"))
    again = cloud.boot(req("n1"))
    assert first.instance_id == again.instance_id
    assert len(cloud.list_instances()) == 1
    assert first.tags[CONTROLLER_TAG] == "ctl"
    assert first.tags[NODE_TAG] == "n1"


def test_instances_run_after_the_boot_delay_and_terminate():
    clock = VirtualClock()
    cloud = SimulatedCloud("ctl", clock, boot_delay=30)
    i = cloud.boot(req("n1"))
    assert cloud.describe(i.instance_id).state is InstanceState.PENDING
    clock.advance(30)
    assert cloud.describe(i.instance_id).state is InstanceState.RUNNING
    cloud.terminate([i.instance_id, "i-unknown"])
    assert cloud.describe(i.instance_id).state is InstanceState.TERMINATED
    assert cloud.list_instances() == []
    clock.advance(3601)
    with pytest.raises(NotFound):
        cloud.describe(i.instance_id)


def test_instances_are_billed_as_ec2_bills_them_from_running_a_minute_at_least() -> None:
    """EC2's user guide ("Instance lifecycle"): ``pending`` is not billed, each second of
    ``running`` is, with a one-minute minimum, and billing stops at ``shutting-down``. The old
    report billed from the launch: the boot delay of every instance, and pending ones too."""
    clock = VirtualClock()
    cloud = SimulatedCloud("ctl", clock, boot_delay=30)
    never_ran = cloud.boot(req("n1"))
    short = cloud.boot(req("n2"))
    long = cloud.boot(req("n3"))
    cloud.boot(req("n4"))
    clock.advance(20)
    cloud.terminate([never_ran.instance_id])  # terminated while pending
    clock.advance(20)  # 40 s: the others ran 10 s
    cloud.terminate([short.instance_id])
    clock.advance(960)  # 1,000 s
    cloud.terminate([long.instance_id])
    clock.advance(5)
    billed = {i.node_name: seconds for i, seconds in cloud.billed()}
    assert billed == {"n1": 0.0, "n2": 60.0, "n3": 970.0, "n4": 975.0}
    assert [i.node_name for i in cloud.running()] == ["n4"]


def test_a_spot_instance_ec2_reclaims_in_its_first_hour_is_not_billed() -> None:
    """EC2's user guide ("Billing for interrupted Spot Instances", Linux): interrupted by EC2
    in the first hour, no charge; after it, the seconds used; stopped or terminated by the
    owner, the seconds used either way."""
    clock = VirtualClock()
    cloud = SimulatedCloud("ctl", clock, boot_delay=30)
    early, late, ours = (cloud.boot(req(n, capacity=SPOT)) for n in ("early", "late", "ours"))
    clock.advance(30 + 1500)  # 25 minutes running
    cloud.warn(early.instance_id)
    cloud.terminate([ours.instance_id])  # the owner's own termination is billed
    clock.advance(120)
    cloud.list_instances()  # (failures and reclaims are looked at when the cloud is asked)
    clock.advance(7200)
    cloud.warn(late.instance_id)
    clock.advance(120)
    cloud.list_instances()
    billed = {i.node_name: (i.state, seconds) for i, seconds in cloud.billed()}
    assert billed == {"early": (InstanceState.TERMINATED, 0.0), "late": (InstanceState.TERMINATED, 1620.0 + 7320.0), "ours": (InstanceState.TERMINATED, 1500.0)}


def test_instances_are_listed_in_id_order() -> None:
    cloud = SimulatedCloud("ctl", VirtualClock(), boot_delay=0)
    ids = [cloud.boot(req(f"n{i}")).instance_id for i in range(40)]  # past 0xf and 0x1f: the ids' width never changes
    cloud.terminate(ids[3:30:4])
    listed = [i.instance_id for i in cloud.list_instances()]
    assert listed == sorted(listed) == [i for n, i in enumerate(ids) if not (3 <= n < 30 and (n - 3) % 4 == 0)]


CLOUD_STEPS = st.lists(st.tuples(st.sampled_from(["boot", "terminate", "warn", "advance", "advance"]), st.integers(0, 45)), max_size=30)


def _played(steps: list[tuple[str, int]]) -> Iterator[tuple[VirtualClock, SimulatedCloud, list[str]]]:
    """A simulated cloud (30 s boots) through ``steps``: boots, terminations, reclaimed spot
    instances and time passing; yields after each step, with the ids booted so far."""
    clock = VirtualClock()
    cloud = SimulatedCloud("ctl", clock, boot_delay=30)
    ids: list[str] = []
    for what, n in steps:
        if what == "boot":
            ids.append(cloud.boot(req(f"n{len(ids)}", capacity=SPOT if n % 2 else OD)).instance_id)
        elif what == "terminate" and ids:
            cloud.terminate([ids[n % len(ids)]])
        elif what == "warn" and ids:
            cloud.warn(ids[n % len(ids)])
        else:
            clock.advance(n)
        yield clock, cloud, ids


@settings(max_examples=40, deadline=None)
@given(CLOUD_STEPS)
def test_a_listing_is_what_describing_each_instance_says_now(steps: list[tuple[str, int]]) -> None:
    """Kept between calls, the listing follows boots, the boot delay running out, terminations
    and reclaimed spot instances: always the instances alive now, as describe sees each."""
    for _, cloud, ids in _played(steps):
        alive = [d for d in (cloud.describe(i) for i in ids) if d.state in (InstanceState.PENDING, InstanceState.RUNNING)]
        assert [(i.instance_id, i.state) for i in cloud.list_instances()] == [(d.instance_id, d.state) for d in alive]


@settings(max_examples=60, deadline=None)
@given(CLOUD_STEPS, st.lists(st.booleans(), min_size=30, max_size=30))
def test_the_cluster_keeps_the_running_instances_by_node_from_the_instances_that_changed(steps: list[tuple[str, int]], others: list[bool]) -> None:
    """The simulated kubelets run on the running instances: the cluster remakes that map
    from the instances a new listing says changed since the last (when another reader
    listed in between, from those that are not the very objects of its last listing), and
    it is what the whole listing says. A listing's ``since`` names every instance that
    changed since the listing before it."""
    cluster, last, linked = None, None, 0
    for (clock, cloud, _), other in zip(_played(steps), others, strict=False):
        cluster = cluster or SimulatedCluster(clock, cloud, [])
        if other:
            last = cloud.list_instances()  # (the cluster's next listing follows this one, not its own)
        instances = cloud.list_instances()
        assert isinstance(instances, Listing)
        if last is not None:
            assert instances.since is not None
            assert instances.since.links(last, instances)
            assert since_holds(instances.since, {i.instance_id: i for i in last}, {i.instance_id: i for i in instances})
        linked += cluster._listed[0] is last
        cluster._listed = relisted(cluster._listed, instances)
        last = instances
        assert cluster._listed[1] == {i.instance_id: i for i in instances}
        assert cluster._listed[2] == {i.node_name: i for i in instances if i.state is InstanceState.RUNNING}
    assert linked == sum(not other for other in others[1 : len(steps)])  # (the cloud's word was taken)


def test_a_listing_keeps_no_listing_before_it_alive() -> None:
    """Each listing says what changed since the one before it; a poller that keeps the
    newest listing keeps no older one alive (a day of polls kept every listing made)."""
    clock = VirtualClock()
    cloud = SimulatedCloud("ctl", clock, boot_delay=30)
    cloud.boot(req("n0"))
    first = weakref.ref(cloud.list_instances())
    for i in range(1, 4):
        cloud.boot(req(f"n{i}"))
        newest = cloud.list_instances()
    gc.collect()
    assert first() is None
    assert newest.since is not None
    assert set(newest.since.changed) == {newest[-1].instance_id}


def test_capacity_per_offering():
    cloud = SimulatedCloud("ctl", VirtualClock(), capacity={"m5.large/spot/*": 1, "c5.*/on-demand/us-east-1a": 0})
    cloud.boot(req("n1", capacity=SPOT))
    with pytest.raises(InsufficientCapacity) as err:
        cloud.boot(req("n2", capacity=SPOT))
    assert (err.value.instance_type, err.value.capacity_type, err.value.zone) == ("m5.large", SPOT, "us-east-1a")
    cloud.boot(req("n2", capacity=SPOT, zone="us-east-1b"))  # the limit is per offering: each zone has its own
    cloud.boot(req("n3"))  # on-demand m5.large is not limited
    with pytest.raises(InsufficientCapacity):
        cloud.boot(req("n4", itype="c5.large"))
    cloud.boot(req("n5", itype="c5.large", zone="us-east-1b"))


def test_failures_are_seeded_and_repeatable():
    def history(seed):
        clock = VirtualClock()
        cloud = SimulatedCloud("ctl", clock, boot_delay=0, seed=seed, death_per_hour=0.5, spot_interruption_per_hour=2.0, throttle_rate=0.2)
        outcome = []
        for i in range(40):
            try:
                cloud.boot(req(f"n{i}", capacity=SPOT if i % 2 else OD))
                outcome.append("ok")
            except Throttled:
                outcome.append("throttled")
        for _ in range(12):
            clock.advance(600)
            with contextlib.suppress(Throttled):
                cloud.list_instances()
        return outcome, [(e.at, e.kind, e.instance_id) for e in cloud.events if e.kind != "launched"]

    assert history(1) == history(1)
    assert history(1) != history(2)
    outcome, ended = history(1)
    assert "throttled" in outcome
    assert {"died", "spot-interrupted"} <= {kind for _, kind, _ in ended}


# -- cluster -------------------------------------------------------------------------------


def cluster_with(workload, register_delay=10.0):
    clock = VirtualClock()
    cloud = SimulatedCloud("ctl", clock, boot_delay=30)
    return clock, cloud, SimulatedCluster(clock, cloud, workload, register_delay=register_delay)


def arrival(name, at=0.0, duration=None, cpu="1"):
    return arrive(name, at, duration, cpu=cpu)  # a workload's pod: made again when evicted


def test_nodes_register_after_boot_and_register_delay_then_heartbeat():
    clock, cloud, cluster = cluster_with([])
    cloud.boot(req("n1"))
    assert cluster.poll() == []
    clock.advance(30)
    assert cluster.poll() == []  # running, kubelet starting
    clock.advance(10)
    [event] = cluster.poll()
    assert isinstance(event, NodeEvent)
    assert (event.type, event.node.name, event.node.ready, event.node.last_heartbeat) == (EventType.ADDED, "n1", True, 40)
    clock.advance(10)
    assert cluster.poll() == [Heartbeats(50, ("n1",))]
    [listed] = [e.node for e in cluster.list() if isinstance(e, NodeEvent)]
    assert listed.last_heartbeat == 50  # a listed (or changed) node carries its latest heartbeat


def test_kubelets_heartbeat_on_time_whatever_the_poll_rate_and_a_silenced_one_stops() -> None:
    clock, cloud, cluster = cluster_with([], register_delay=0)
    for name in ("n1", "n2", "n3"):
        cloud.boot(req(name))
    clock.advance(30)
    assert [e.node.name for e in cluster.poll() if isinstance(e, NodeEvent)] == ["n1", "n2", "n3"]  # registered at 30
    cluster.silence("n3")
    beats: list[tuple[float, str]] = []
    for _ in range(12):  # polls every 7 s: each node's heartbeat is due every 10 s, seen at the next poll
        clock.advance(7)
        if clock.now() == 58:
            cloud.throttle_rate = 1.0  # a poll that cannot list the instances: the kubelets still beat
        beats += [(e.at, name) for e in cluster.poll() if isinstance(e, Heartbeats) for name in e.names]
        cloud.throttle_rate = 0.0
    assert beats == [(t, n) for t in (44, 58, 72, 86, 100, 114) for n in ("n1", "n2")]


def test_pods_arrive_run_and_finish():
    clock, cloud, cluster = cluster_with([arrival("a", at=5, duration=60)], register_delay=0)
    cloud.boot(req("n1"))
    assert cluster.poll() == []
    clock.advance(30)
    events = cluster.poll()
    assert [type(e).__name__ for e in events] == ["NodeEvent", "PodEvent"]
    cluster.bind("default/a", "n1")
    [bound] = cluster.poll()
    assert (bound.pod.node_name, bound.pod.phase) == ("n1", PodPhase.RUNNING)
    clock.advance(60)
    done = [e for e in cluster.poll() if isinstance(e, PodEvent)]
    assert [(e.type, e.pod.phase) for e in done] == [(EventType.MODIFIED, PodPhase.SUCCEEDED), (EventType.DELETED, PodPhase.SUCCEEDED)]
    assert cluster.unfinished() == []


def test_bind_follows_the_api_server():
    clock, cloud, cluster = cluster_with([arrival("a"), arrival("b")], register_delay=0)
    cloud.boot(req("n1"))
    clock.advance(30)
    cluster.poll()
    with pytest.raises(BindError, match="not registered"):
        cluster.bind("default/a", "n2")
    with pytest.raises(BindError, match="not found"):
        cluster.bind("default/zz", "n1")
    cluster.bind("default/a", "n1")
    with pytest.raises(BindError, match="already bound"):
        cluster.bind("default/a", "n1")


def test_a_pod_no_controller_makes_again_is_gone_with_its_node():
    clock, cloud, cluster = cluster_with([arrive("bare", bare=True)], register_delay=0)
    i = cloud.boot(req("n1"))
    clock.advance(30)
    cluster.poll()
    cluster.bind("default/bare", "n1")
    cluster.poll()
    cloud.terminate([i.instance_id])
    events = cluster.poll()
    assert cluster.lost == ["default/bare"]
    assert "default/bare" not in cluster.pods
    assert [(e.type, e.pod.key) for e in events if isinstance(e, PodEvent)] == [(EventType.DELETED, "default/bare")]


def test_pods_of_a_vanished_node_wait_again():
    clock, cloud, cluster = cluster_with([arrival("a")], register_delay=0)
    i = cloud.boot(req("n1"))
    clock.advance(30)
    cluster.poll()
    cluster.bind("default/a", "n1")
    cluster.poll()
    cloud.terminate([i.instance_id])
    events = cluster.poll()
    pod_events = [e for e in events if isinstance(e, PodEvent)]
    assert [(e.pod.node_name, e.pod.phase) for e in pod_events] == [("", PodPhase.PENDING)]
    assert any(isinstance(e, NodeEvent) and e.type is EventType.DELETED for e in events)


@pytest.mark.parametrize("resume", [False, True])
def test_evictions_are_counted_with_the_work_redone_and_the_wait_again(resume: bool) -> None:
    clock = VirtualClock()
    cloud = SimulatedCloud("ctl", clock, boot_delay=30)
    cluster = SimulatedCluster(clock, cloud, [arrival("a", duration=600), arrival("b")], register_delay=0, resume_evicted=resume)
    for name in ("n1", "n2"):
        cloud.boot(req(name))
    clock.advance(30)
    cluster.poll()
    cluster.bind("default/a", "n1")
    cluster.bind("default/b", "n1")
    clock.advance(100)
    cluster.drain("n1")  # both evicted: a had run 100 s of its 600, b (no duration) has no work to redo
    clock.advance(5)
    cluster.bind("default/a", "n2")
    clock.advance(50)
    cluster.drain("n2")  # a again, 50 s in
    clock.advance(20)
    cluster.bind("default/a", "n1")
    assert cluster.evictions == {"default/a": 2, "default/b": 1}
    assert cluster.work_redone == (0.0 if resume else 150.0)
    assert cluster.waited_again == [5.0, 20.0]  # b waits still: not bound again, not counted
    clock.advance(600)
    cluster.poll()
    assert "default/a" not in cluster.pods  # finished: 600 s again after its last bind, or what it had left
    assert cluster.first_bound["default/a"] == 30.0


def test_a_removed_node_sends_back_its_own_pods_only_in_the_order_they_came() -> None:
    workload = [arrival(n) for n in ("e", "a", "d", "b")] + [arrival("c", duration=20)]
    clock, cloud, cluster = cluster_with(workload, register_delay=0)
    cloud.boot(req("n1"))
    cloud.boot(req("n2"))
    clock.advance(30)
    cluster.poll()
    for pod, node in [("default/d", "n1"), ("default/a", "n1"), ("default/b", "n2"), ("default/c", "n1"), ("default/e", "n1")]:
        cluster.bind(pod, node)
    cluster.poll()
    clock.advance(20)
    assert [e.pod.key for e in cluster.poll() if isinstance(e, PodEvent) and e.type is EventType.DELETED] == ["default/c"]  # finished on n1
    cluster.remove_node("n1")
    back = [e for e in cluster.poll() if isinstance(e, PodEvent)]
    assert [(e.pod.key, e.pod.node_name) for e in back] == [("default/a", ""), ("default/d", ""), ("default/e", "")]  # as they arrived (by key at one instant)
    assert cluster.pods["default/b"].pod.node_name == "n2"
    cluster.bind("default/a", "n2")  # bound again elsewhere: it goes with that node next
    cluster.remove_node("n2")
    assert [e.pod.key for e in cluster.poll() if isinstance(e, PodEvent) and not e.pod.node_name] == ["default/a", "default/b"]


def counted(cluster: SimulatedCluster) -> tuple[int, int]:
    """The bound workload pods' requests, counted afresh."""
    bound = [s for s in cluster.pods.values() if s.pod.node_name and not s.pod.of_node]
    return sum(s.pod.requests.cpu for s in bound), sum(s.pod.requests.memory for s in bound)


def test_the_bound_pods_totals_and_run_times_follow_binds_finishes_and_removed_nodes() -> None:
    """A pod's time bound counts each of its runs; a finished pod's ends when its work did,
    not when the next poll saw it."""
    workload = [arrival("a", cpu="1"), arrival("b", cpu="500m"), arrival("c", cpu="2", duration=20), arrival("d", cpu="250m", duration=90)]
    clock, cloud, cluster = cluster_with(workload, register_delay=0)
    cloud.boot(req("n1"))
    cloud.boot(req("n2"))
    clock.advance(30)
    cluster.poll()
    seen = [cluster.bound_requests]
    for pod, node in [("default/a", "n1"), ("default/b", "n2"), ("default/c", "n1"), ("default/d", "n2")]:
        cluster.bind(pod, node)
        seen.append(cluster.bound_requests)
        assert seen[-1] == counted(cluster)
    clock.advance(25)
    cluster.poll()  # c finished (after 20 s)
    assert cluster.bound_requests == counted(cluster) == (1750, cluster.bound_requests[1])
    assert [p.name for p in cluster.workload_on("n1")] == ["a"]
    cluster.remove_node("n2")  # b and d wait again
    assert cluster.bound_requests == counted(cluster) == (1000, cluster.bound_requests[1])
    assert cluster.ran() == {"default/a": 25, "default/b": 25, "default/c": 20, "default/d": 25}
    cluster.bind("default/d", "n1")
    clock.advance(90)
    cluster.poll()  # d finished: its work again, from the start (90 s)
    assert cluster.bound_requests == counted(cluster)
    assert cluster.ran() == {"default/a": 115, "default/b": 25, "default/c": 20, "default/d": 115}
    assert seen[0] == (0, 0)
    assert [cpu for cpu, _ in seen] == [0, 1000, 1500, 3500, 3750]


# -- workload files ------------------------------------------------------------------------

WORKLOAD = """
pods:
  - name: web
    count: 3
    at: 1m
    duration: 30s
    pod:
      containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
  - name: batch
    pod:
      metadata: {namespace: jobs, annotations: {nodemanager.io/capacity-type: spot}}
      spec: {containers: [{name: c, resources: {requests: {cpu: "2"}}}]}
"""


def test_workload_entries_expand_in_arrival_order():
    arrivals = parse_workload(WORKLOAD)
    assert [(a.pod.key, a.at, a.duration) for a in arrivals] == [
        ("jobs/batch", 0.0, None),
        ("default/web-0", 60.0, 30.0),
        ("default/web-1", 60.0, 30.0),
        ("default/web-2", 60.0, 30.0),
    ]
    assert arrivals[1].pod.requests == Resources.parse({"cpu": "500m", "memory": "1Gi"})
    assert arrivals[0].pod.capacity_policy.value == "spot"


def test_a_kubernetes_list_of_pods_arrives_at_zero_and_waits():
    text = """
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x}, spec: {nodeName: old, containers: [{name: c}]}, status: {phase: Running}}
"""
    [a] = parse_workload(text)
    assert (a.at, a.duration, a.pod.node_name, a.pod.phase) == (0.0, None, "", PodPhase.PENDING)


def test_json_workload():
    assert len(parse_workload('{"pods": [{"name": "a", "pod": {"containers": [{"name": "c"}]}}]}')) == 1


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        ("pods: [{name: a, at: soon, pod: {containers: [{name: c}]}}]", ["pods[0].at: expected a duration such as 90s, 5m or 1h, got 'soon'"]),
        ("pods: [{name: a, duration: -5s, pod: {containers: [{name: c}]}}]", ["pods[0].duration: must not be negative, got '-5s'"]),
        ("pods: [{name: a, count: 0, pod: {containers: [{name: c}]}}]", ["pods[0].count: must be an integer >= 1, got 0"]),
        ("pods: [{pod: {containers: [{name: c}]}}]", ["pods[0].name: required"]),
        ("pods: [{name: a}]", ["pods[0].pod: expected a Pod manifest or spec"]),
        ("pods: [{name: a, pod: {containers: [{name: c}]}, colour: red}]", ["pods[0].colour: unknown key"]),
        ("pods: [{name: a, pod: {containers: [{name: c}]}}, {name: a, pod: {containers: [{name: c}]}}]", ["pods[1].name: duplicate name 'a' (also pods[0])"]),
        (
            "pods: [{name: a, pod: {containers: [{resources: {requests: {memory: lots}}}]}}]",
            ["pods[0].pod.spec.containers[0].resources.requests.memory: expected a quantity such as 500m, 2Gi or 1.5, got 'lots'"],
        ),
        ("pods: 3", ["expected a mapping with a 'pods' list, a Kubernetes List, or one Pod, Deployment"]),
        ("pods: [{name: a, pod: {containers: [{name: c}]}}", ["line 2, column"]),
    ],
)
def test_workload_errors_name_entry_and_field(text, problems):
    with pytest.raises(WorkloadError) as err:
        parse_workload(text)
    assert len(err.value.problems) == len(problems)
    for got, want in zip(err.value.problems, problems, strict=True):
        assert got.startswith(want)


def test_every_bad_entry_is_reported_at_once():
    with pytest.raises(WorkloadError) as err:
        parse_workload("pods: [{name: a, at: x, pod: {}}, {name: b, count: -1, pod: {}}, {name: c, pod: {containers: [{name: c}]}}]")
    assert [p.split(":")[0] for p in err.value.problems] == ["pods[0].at", "pods[1].count"]
