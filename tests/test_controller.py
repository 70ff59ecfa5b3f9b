"""NodeController scenarios (Kip §10.3) on the simulated cloud and cluster, in virtual time."""

from __future__ import annotations

import dataclasses

import pytest
from builders import OD, SPOT, binpack_pool, cell_pool
from harness import Harness, arrive

from cloud.base import BootRequest
from cloud.errors import CloudError, Throttled
from cloud.simulated import SimulatedCloud
from nodemanager.cluster.base import EventType, Heartbeats, NodeEvent
from nodemanager.config.schema import Limits, Standby
from nodemanager.controller import NO_BINDING, NOT_YET, boot_token
from nodemanager.model import CapacityPolicy, NodeState

S = NodeState


# -- boot and dispatch --------------------------------------------------------------------


def test_pod_created_node_booted_and_dispensed_end_to_end():
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large")])
    h.run(1)  # first pool loop: decision and boot
    [(name, node)] = h.controller.state.nodes.items()
    assert node.state is S.CREATED
    assert node.instance_id is not None
    assert node.bound_pods == ("default/p1",)
    h.run(35)  # 20 s boot, 10 s kubelet, next loops
    assert h.bound() == {"default/p1": name}
    assert h.controller.state.nodes[name].state is S.CLAIMED
    assert h.cluster.first_bound["default/p1"] - 1000 <= 42


def test_standby_nodes_on_demand_and_spot_all_become_available():
    pool = cell_pool(standby=[Standby(instance_type="a.large", count=2), Standby(instance_type="b.large", count=1, spot=True)])
    h = Harness(pool)
    h.run(60)
    nodes = sorted((n.instance_type, n.capacity_type, n.state) for n in h.controller.state.nodes.values())
    assert nodes == [("a.large", OD, S.AVAILABLE), ("a.large", OD, S.AVAILABLE), ("b.large", SPOT, S.AVAILABLE)]
    assert h.controller.status()["pools"][0]["standby"] == {"wanted": 3, "present": 3}


def test_binpack_node_takes_many_pods_and_is_kept_after_they_finish():
    h = Harness(binpack_pool(), arrivals=[arrive(f"p{i}", duration=60, cpu="500m", memory="512Mi") for i in range(3)], idle_grace=45)
    h.run(40)
    assert len(set(h.bound().values())) == 1
    [name] = h.controller.state.nodes
    assert h.controller.state.nodes[name].state is S.CLAIMED
    h.run(60)  # pods finished
    assert h.controller.state.nodes[name].state is S.AVAILABLE
    h.run(60)  # past the idle grace
    assert h.controller.state.nodes[name].state is S.TERMINATED


def test_used_cell_node_is_cleaned_and_terminated():
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large", duration=30)])
    h.run(40)
    [name] = h.controller.state.nodes
    h.run(40)
    assert h.controller.state.nodes[name].state is S.TERMINATED
    assert h.live_instances() == []


# -- failures while booting ----------------------------------------------------------------


def test_insufficient_capacity_falls_back_to_the_next_offering():
    pool = cell_pool(launch={"method": "runInstances"})
    h = Harness(pool, arrivals=[arrive("p1", itype="a.large", policy=CapacityPolicy.SPOT)], capacity={"a.large/spot/zone-1a": 0})
    h.run(1)
    unavailable = h.controller.state.keeper.dump(h.clock.now())
    assert [(u["instance_type"], u["capacity_type"], u["zone"]) for u in unavailable] == [("a.large", "spot", "zone-1a")]
    assert list(h.states().values()) == [S.TERMINATED]
    assert h.controller.metrics.boot_failures.labels("insufficient_capacity")._value.get() == 1
    h.run(50)
    [live] = [n for n in h.controller.state.nodes.values() if n.state is not S.TERMINATED]
    assert (live.instance_type, live.capacity_type, live.zone) == ("a.large", SPOT, "zone-1b")  # spot recorded as spot
    assert h.bound() == {"default/p1": live.name}


def test_a_fleet_launch_falls_back_within_the_same_call_and_the_node_takes_what_it_got():
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large", policy=CapacityPolicy.SPOT)], capacity={"a.large/spot/zone-1a": 0})
    h.run(1)
    [node] = h.controller.state.nodes.values()
    assert node.state is S.CREATED  # no failed boot, no second decision
    assert (node.instance_type, node.capacity_type, node.zone) == ("a.large", SPOT, "zone-1b")
    assert node.labels["topology.kubernetes.io/zone"] == "zone-1b"
    unavailable = h.controller.state.keeper.dump(h.clock.now())
    assert [(u["instance_type"], u["capacity_type"], u["zone"]) for u in unavailable] == [("a.large", "spot", "zone-1a")]
    assert h.controller.metrics.boot_failures.labels("insufficient_capacity")._value.get() == 0
    assert h.controller.metrics.launch_fallbacks.labels("cells")._value.get() == 1
    [launched] = [m for kind, key, reason, m in h.cluster.recorded if (kind, key, reason) == ("Node", node.name, "Launched")]
    assert launched == "as a.large in zone-1b, the fleet's choice among 2 offerings"
    h.run(50)
    assert h.bound() == {"default/p1": node.name}


def test_a_fleet_launch_that_launches_nothing_marks_every_offering_it_tried():
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large", policy=CapacityPolicy.SPOT)], capacity={"a.large/spot/*": 0})
    h.run(1)
    assert list(h.states().values()) == [S.TERMINATED]
    unavailable = h.controller.state.keeper.dump(h.clock.now())
    assert sorted(u["zone"] for u in unavailable) == ["zone-1a", "zone-1b"]
    assert h.cloud.boot_calls == 1
    assert h.controller.metrics.boot_failures.labels("insufficient_capacity")._value.get() == 1


def test_offering_out_everywhere_makes_the_pod_wait_with_the_reason_then_recover():
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large", policy=CapacityPolicy.ON_DEMAND)], capacity={"a.large/on-demand/*": 0})
    h.run(20)
    assert h.bound() == {}
    [waiting] = h.controller.status()["pods"]["waiting"]
    assert "unavailable" in waiting["reason"]
    h.cloud.capacity.clear()
    h.run(200)  # the unavailability expires after 3 minutes
    assert list(h.bound()) == ["default/p1"]


def test_boot_timeout_terminates_and_places_the_pods_again():
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large")], register_delay=10_000, boot_timeout=120)
    h.run(1)
    [first] = h.controller.state.nodes
    h.run(140)
    assert h.controller.state.nodes[first].state is S.TERMINATED
    assert h.controller.metrics.terminations.labels("boot_timeout")._value.get() == 1
    others = [n for n in h.controller.state.nodes.values() if n.name != first]
    assert [n.bound_pods for n in others] == [("default/p1",)]


def test_throttled_boot_is_retried_with_the_same_token():
    h = Harness(cell_pool(), arrivals=[arrive(f"p{i}", itype="a.large") for i in range(5)], throttle_rate=0.4, seed=3)
    h.run(120)
    assert len(h.bound()) == 5
    names = [i.node_name for i, _ in h.cloud.all_instances()]
    assert len(names) == len(set(names)) == 5  # one instance per node: no double launch
    assert h.controller.metrics.boot_failures.labels("throttled")._value.get() > 0


def test_boot_token_is_stable_and_distinct():
    assert boot_token("c", "n1", 5.0) == boot_token("c", "n1", 5.0)
    assert boot_token("c", "n1", 5.0) != boot_token("c", "n2", 5.0) != boot_token("d", "n1", 5.0)
    assert boot_token("c", "n1", 5.0) != boot_token("c", "n1", 86405.0)  # a name used again later: another boot
    assert len(boot_token("c", "n1", 5.0)) <= 64  # EC2's ClientToken limit


def test_boot_cap_holds_per_loop():
    h = Harness(cell_pool(), arrivals=[arrive(f"p{i}", itype="a.large") for i in range(25)], max_boots=10)
    h.run(1)
    assert len(h.controller.state.nodes) == 10
    h.run(7)
    assert len(h.controller.state.nodes) == 20
    h.run(100)
    assert len(h.bound()) == 25


# -- health -------------------------------------------------------------------------------


def test_node_without_heartbeat_is_replaced():
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large")], healthy_timeout=90)
    h.run(40)
    [sick] = h.controller.state.nodes
    h.cluster.silence(sick)
    h.run(95)
    assert h.controller.state.nodes[sick].state in (S.TERMINATING, S.TERMINATED)
    assert h.controller.state.marked.get(sick, ("", ""))[1] in ("unhealthy", "") or h.controller.state.nodes[sick].state is S.TERMINATED
    assert h.controller.metrics.terminations.labels("unhealthy")._value.get() == 1
    h.run(60)
    assert h.bound()["default/p1"] != sick  # placed again on a new node


def test_of_many_ready_nodes_only_the_silent_one_is_marked_unhealthy() -> None:
    """The heartbeat loop finds the one node gone silent among nodes that keep beating (it
    looks node by node only when the oldest heartbeat is too old)."""
    h = Harness(cell_pool(), arrivals=[arrive(f"p{i}", itype="a.large") for i in range(3)], healthy_timeout=90)
    h.run(40)
    names = sorted(h.controller.state.nodes)
    assert len(names) == 3
    h.cluster.silence(names[1])
    h.run(95)
    assert {n for n in names if h.controller.state.nodes[n].state in (S.TERMINATING, S.TERMINATED)} == {names[1]}
    assert h.controller.metrics.terminations.labels("unhealthy")._value.get() == 1


def test_a_node_that_lost_its_pool_labels_is_labelled_again_by_the_heartbeat_loop() -> None:
    h = Harness(cell_pool(labels={"team": "ml"}), arrivals=[arrive("p1", itype="a.large")])
    h.run(40)
    [name] = h.controller.state.nodes
    assert h.cluster.nodes[name].labels["team"] == "ml"  # labelled at registration
    h.cluster._set_node(dataclasses.replace(h.cluster.nodes[name], labels={}))  # say, an operator removed them (a Node update)
    h.run(30)
    assert h.cluster.nodes[name].labels["team"] == "ml"
    assert h.controller.state.nodes[name].state is not S.TERMINATING  # nothing else is done to it


def test_the_nodes_the_scaler_plans_with_are_kept_until_a_record_a_mark_or_a_node_changes() -> None:
    """The planning picture of every record is made again only when something it is made of
    changed; each change below is applied to the cache alone, so only it can tell."""
    h = Harness(binpack_pool(), arrivals=[arrive("p1")])
    h.run(40)
    c = h.controller
    [name] = c.state.nodes
    now = h.clock.now()
    first = c.state.snapshot(now, c.disruption.reserved).nodes
    c.state.cache.apply([Heartbeats(now + 5, (name,))])
    assert c.state.snapshot(now, c.disruption.reserved).nodes is first  # a heartbeat changes nothing the scaler plans with

    registered = c.state.cache.node(name)
    assert registered is not None
    c.state.cache.apply([NodeEvent(EventType.MODIFIED, dataclasses.replace(registered, unschedulable=True))])  # kubectl cordon
    [cordoned] = c.state.snapshot(now, c.disruption.reserved).nodes
    assert cordoned.unschedulable

    c.state.mark_for_termination(name, "test", "test")
    assert [n.state for n in c.state.snapshot(now, c.disruption.reserved).nodes] == [S.TERMINATING]

    c.state.marked.clear()
    c.state.update_node(name, labels={"team": "ml"})
    [relabelled] = c.state.snapshot(now, c.disruption.reserved).nodes
    assert relabelled.labels == {"team": "ml"}
    assert relabelled.state is not S.TERMINATING


def test_healthy_nodes_are_left_alone():
    h = Harness(cell_pool(standby=[Standby(instance_type="a.large", count=2)]))
    h.run(600)
    assert sorted(h.states().values()) == [S.AVAILABLE, S.AVAILABLE]
    assert h.controller.metrics.terminations.labels("unhealthy")._value.get() == 0


def test_dead_instance_leaves_the_cluster_and_its_pods_move():
    h = Harness(binpack_pool(), arrivals=[arrive("p1"), arrive("p2")])
    h.run(40)
    [node] = h.controller.state.nodes.values()
    h.cloud.terminate([node.instance_id])  # dies under us
    h.run(80)
    gone = h.controller.state.nodes.get(node.name)
    assert gone is None or gone.state is S.TERMINATED  # terminated, perhaps already purged
    assert set(h.bound()) == {"default/p1", "default/p2"}
    assert node.name not in h.bound().values()


# -- the dispenser ----------------------------------------------------------------------------


def test_dispenser_replies():
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large")])
    d = h.controller.dispenser
    assert d.request_node("default/nobody") == NO_BINDING
    h.run(1)
    assert d.request_node("default/p1") == NOT_YET  # bound to a node still booting
    h.run(35)
    [name] = h.controller.state.nodes
    assert h.controller.state.nodes[name].state in (S.AVAILABLE, S.CLAIMED)
    if h.controller.state.nodes[name].state is S.CLAIMED:  # the pool loop already dispatched p1: undo that for this test
        return
    h.controller.state.nodes[name] = h.controller.state.nodes[name].with_changes(bound_pods=("default/p1",))
    reply = d.request_node("default/p1")
    assert reply.node is not None
    assert reply.node.state is S.CLAIMED
    assert d.request_node("default/p1") == NOT_YET  # a cell node is claimed once
    h.controller.state.nodes[name] = h.controller.state.nodes[name].with_changes(bound_pods=())
    d.return_node(name, unused=True)
    assert h.controller.state.nodes[name].state is S.AVAILABLE  # unused: serves again (Kip could not)


def test_bind_conflict_forgets_and_places_again():
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large")])
    h.run(29)  # node Available at the next loop
    real_bind = h.cluster.bind
    calls = []

    def conflicting(pod, node):
        calls.append((pod, node))
        if len(calls) == 1:
            from nodemanager.cluster.base import BindError

            raise BindError(pod, node, "409 Conflict: pod is being updated")
        real_bind(pod, node)

    h.cluster.bind = conflicting  # type: ignore[method-assign]
    h.run(20)
    assert len(calls) == 2
    assert h.bound() == {"default/p1": calls[1][1]}


# -- orphans and restarts -------------------------------------------------------------------


def test_orphan_is_terminated_on_the_second_strike_only():
    h = Harness(cell_pool())
    h.run(1)
    stray = h.cloud.boot(BootRequest("stray", "cells", "a.large", OD, "zone-1a", "stray-token", 20 * 2**30))
    h.run(60)  # first GC pass after the stray appeared: suspect only
    assert stray.instance_id in h.live_instances()
    h.run(60)
    assert stray.instance_id not in h.live_instances()
    assert h.controller.metrics.terminations.labels("orphan")._value.get() == 1


def test_restart_adopts_instances_and_resumes():
    h = Harness(binpack_pool(), arrivals=[arrive(f"p{i}", cpu="500m") for i in range(6)])
    h.run(1)
    launched = h.live_instances()
    assert launched
    h.new_controller()  # the process died right after booting; a new one starts
    assert {n.instance_id for n in h.controller.state.nodes.values()} == set(launched)
    assert all(n.state is S.CREATED for n in h.controller.state.nodes.values())
    h.run(60)
    assert len(h.bound()) == 6
    assert sorted(h.live_instances()) == sorted(launched)  # nothing launched again


class Crash(BaseException):
    """The process dies: not an error anything may catch."""


@pytest.mark.heavy
@pytest.mark.parametrize("seed", range(6))
def test_restart_at_random_points_during_a_200_pod_scale_up(seed):
    import random

    rng = random.Random(seed)
    pods = [arrive(f"p{i}", cpu=rng.choice(["250m", "500m", "1", "2"]), memory=rng.choice(["256Mi", "1Gi", "2Gi"])) for i in range(200)]
    h = Harness(binpack_pool(limits=Limits(nodes=60)), arrivals=pods, max_boots=5)
    crash_on = set(rng.sample(range(1, 10), 4))  # crash inside these boot calls, after the cloud accepted
    kill_at = set(rng.sample(range(1, 30), 4))  # and between loops at these steps

    def maybe_crash(request, instance):
        if h.cloud.boot_calls in crash_on:
            raise Crash

    h.cloud.on_boot = maybe_crash
    restarts = boot_crashes = 0
    for step in range(400):
        try:
            h.run(rng.choice([1, 3, 7, 10]))
        except Crash:
            restarts += 1
            boot_crashes += 1
            h.new_controller()
            continue
        if step in kill_at:
            restarts += 1
            h.new_controller()
        if len(h.bound()) == 200:
            break
    h.cloud.on_boot = None
    h.run(300)  # settle: idle nodes stop, two orphan-GC passes
    assert restarts >= 4
    assert boot_crashes >= 1  # at least one instance was launched by a process that died before recording it
    assert len(h.bound()) == 200  # every pod is bound
    instances = h.cloud.all_instances()
    names = [i.node_name for i, _ in instances]
    assert len(names) == len(set(names))  # no node was launched twice
    live = {i.node_name for i in h.cloud.list_instances()}
    known = {n.name for n in h.controller.state.nodes.values() if n.state not in (S.TERMINATING, S.TERMINATED)}
    assert live == known  # no instance leaked
    used = set(h.bound().values())
    assert live == used  # and every live node is in use


class _BrokenBoots(SimulatedCloud):
    """A cloud that refuses every boot for a reason no offering explains (its subnet is gone)."""

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.refused = 0
        self.broken = True

    def boot(self, request):  # type: ignore[no-untyped-def]
        if self.broken:
            self.refused += 1
            raise CloudError("InvalidSubnetID.NotFound: The subnet ID 'subnet-1' does not exist")
        return super().boot(request)


def test_boots_failing_for_no_offerings_reason_back_off_per_pool_and_resume() -> None:
    """A cloud that forgot the pool's subnet: without a pause every loop booted again (244
    failures in 60 s, and a Terminated record each). Now the pool's boots pause 10 s, 20 s,
    40 s... per round of boots, and the waiting pods and /status say why; one success ends it."""
    h = Harness(cell_pool(), arrivals=[arrive(f"p{i}", itype="a.large") for i in range(5)], cloud=lambda clock: _BrokenBoots("test", clock, boot_delay=20.0))
    cloud = h.cloud
    assert isinstance(cloud, _BrokenBoots)
    h.run(60)
    assert 1 <= cloud.refused <= 5 * 3  # one loop's boots, then at most two more rounds in 60 s (10 s, then 20 s, paused)
    refused = cloud.refused
    doc = h.controller.status()
    [pool] = doc["pools"]
    assert pool["backoff"]["failures"] >= 2
    assert "InvalidSubnetID.NotFound" in pool["backoff"]["reason"]
    waiting = {w["pod"]: w["reason"] for w in doc["pods"]["waiting"]}
    assert any("boots paused until" in r for r in waiting.values()), waiting
    h.run(600)
    assert cloud.refused - refused <= 5 * 4  # rounds near 70, 150, 310 and 610 s: doubled each round, at most 5 minutes apart
    cloud.broken = False
    h.run(400)
    assert len(h.bound()) == 5
    assert h.controller.status()["pools"][0]["backoff"] is None


def test_boots_of_one_round_failing_together_pause_the_pool_once() -> None:
    """Four boots in flight when the cloud forgot its subnets failed one after another: each
    doubled the pause (10, 20, 40, 80 s), so the pool waited 80 s for one forgotten subnet."""
    from nodemanager.controller.boot_backoff import BootBackoff

    backoff = BootBackoff()
    pauses = [backoff.failed("general", 100.0 + i * 0.01, f"subnet {i} gone") for i in range(4)]
    assert [(p.failures, p.until) for p in pauses] == [(1, 110.0)] * 4
    assert pauses[-1].reason == "subnet 3 gone"
    assert backoff.failed("general", 111.0, "again").until == 131.0  # the next round, after the pause: doubled
    backoff.succeeded("general")
    assert backoff.failed("general", 200.0, "once more").until == 210.0
    assert backoff.get("general").describe().startswith("boots paused until 1970-01-01 00:03:30 UTC after 1 failed round(s)")  # a time a reader knows


def test_terminated_records_are_kept_a_minute_and_at_most_a_hundred() -> None:
    """A burst of failed boots left a Terminated record each for a minute: /status grew from
    36 to 256 nodes. Now only the newest hundred stay."""
    from dataclasses import replace

    from builders import node

    h = Harness(cell_pool())
    now = h.clock.now()
    for i in range(150):
        h.controller.state.nodes[f"gone-{i:03d}"] = replace(node(f"gone-{i:03d}"), state=NodeState.TERMINATED)
        h.controller.state.terminated_at[f"gone-{i:03d}"] = now - 30 + i * 0.1  # all within the minute
    h.controller.pool_loop()
    kept = sorted(n for n, rec in h.controller.state.nodes.items() if rec.state is NodeState.TERMINATED)
    assert kept == [f"gone-{i:03d}" for i in range(50, 150)]

    few = Harness(cell_pool())  # a record a minute gone goes, though few are kept; a Terminating one is marked
    for name, ended in (("old", now - 61), ("recent", now - 30)):
        few.controller.state.nodes[name] = replace(node(name), state=NodeState.TERMINATED)
        few.controller.state.terminated_at[name] = ended
    few.controller.state.nodes["leaving"] = replace(node("leaving"), state=NodeState.TERMINATING)  # as a restart recovers it: not marked
    few.controller.pool_loop()
    assert sorted(n for n, rec in few.controller.state.nodes.items() if rec.state is NodeState.TERMINATED) == ["recent"]
    assert few.controller.state.marked["leaving"] == ("terminating", "terminating")  # its termination is confirmed on the next reap


class _Unreachable(SimulatedCloud):
    """A cloud whose endpoint stops answering: every terminate fails once retries run out."""

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.down = False
        self.terminate_calls = 0

    def terminate(self, instance_ids):  # type: ignore[no-untyped-def]
        self.terminate_calls += 1
        self._reach()
        return super().terminate(instance_ids)

    def list_instances(self):  # type: ignore[no-untyped-def]
        self._reach()
        return super().list_instances()

    def _reach(self) -> None:
        if self.down:
            raise Throttled("cloud endpoint unreachable: Could not connect to the endpoint URL (retries exhausted)")


def test_an_unreachable_cloud_costs_a_reaper_pass_one_call_and_one_warning(caplog) -> None:
    """Through an outage each call spends its retries: a pass that tried every marked node
    held the controller for minutes and logged a warning per node. Now the first call that
    finds the cloud unreachable ends the pass's terminations, with one warning."""
    jobs = [arrive(f"p{i}", itype="a.large", duration=30) for i in range(4)]
    h = Harness(cell_pool(), arrivals=jobs, cloud=lambda clock: _Unreachable("test", clock, boot_delay=20.0))
    cloud = h.cloud
    assert isinstance(cloud, _Unreachable)
    h.run(45)  # four cell nodes, their jobs running
    cloud.down = True
    h.run(30)  # the jobs end: the nodes are marked for termination
    assert len(h.controller.state.marked) == 4
    cloud.terminate_calls = 0
    caplog.clear()
    with caplog.at_level("WARNING", logger="nodemanager"):
        h.controller.reaper_loop()
    assert cloud.terminate_calls == 1
    assert [r.getMessage() for r in caplog.records if "terminat" in r.getMessage()] == [
        "terminations wait for the next pass: cloud endpoint unreachable: Could not connect to the endpoint URL (retries exhausted)"
    ]
    cloud.down = False
    h.run(30)
    assert h.live_instances() == []  # the endpoint is back: every node goes within a pass


def test_nodes_are_not_replaced_for_an_outage_of_the_cloud_api() -> None:
    """The simulated cluster's kubelets stopped heartbeating when the cloud could not be
    listed, so every healthy node was replaced after an EC2 outage. Kubelets do not need EC2."""
    h = Harness(cell_pool(), arrivals=[arrive(f"p{i}", itype="a.large") for i in range(2)], cloud=lambda clock: _Unreachable("test", clock, boot_delay=20.0))
    cloud = h.cloud
    assert isinstance(cloud, _Unreachable)
    h.run(45)
    before = dict(h.bound())
    assert len(before) == 2
    cloud.down = True
    h.run(300)  # over three times the healthy timeout
    cloud.down = False
    h.run(30)
    assert h.bound() == before
    assert all(n.state is not S.TERMINATED for n in h.controller.state.nodes.values())


def test_a_node_is_not_judged_by_heartbeats_the_cluster_could_not_yet_deliver() -> None:
    """Through a cloud outage other loops held the controller for their retries and the pool
    loop (which reads the cluster) ran rarely: the heartbeat check saw old heartbeats and
    replaced healthy nodes. Silence counts only up to the cache's last sync with the cluster."""
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large")])
    h.run(45)
    [name] = h.controller.state.nodes
    h.clock.advance(200)  # over twice the healthy timeout without a pool pass
    h.controller.heartbeat_loop()
    assert name not in h.controller.state.marked
    h.run(30)  # the pool loop reads the heartbeats sent meanwhile
    assert h.controller.state.nodes[name].state is S.CLAIMED


def test_orphan_gc_calls_the_cloud_without_holding_the_controller() -> None:
    """Its listing and terminations retry through an outage: under the lock they held every
    other loop back for as long."""
    import threading

    held: list[bool] = []
    lock: list[object] = []  # the controller's, once it is built (recovery lists under it, as it must)

    class Watching(SimulatedCloud):
        def list_instances(self):  # type: ignore[no-untyped-def]
            if lock:
                probe = threading.Thread(target=lambda: held.append(not lock[0].acquire(timeout=0.5)) or lock[0].release())  # type: ignore[attr-defined]
                probe.start()
                probe.join()
            return super().list_instances()

    h = Harness(cell_pool(), cloud=lambda clock: Watching("test", clock, boot_delay=20.0))
    lock.append(h.controller.state.lock)
    h.controller.orphan_gc_loop()
    assert held == [False]  # another thread took the lock while the listing ran


def test_an_instance_that_vanishes_before_its_node_registers_is_replaced_within_two_gc_passes(caplog):
    """Terminated behind the controller's back while booting: not the whole bootTimeout
    (300 s) of waiting, but two orphan-GC listings without it, then a replacement, a warning
    and an event."""
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large")], boot_delay=250.0)
    h.run(5)
    [(name, node)] = list(h.controller.state.nodes.items())
    assert node.state is S.CREATED
    h.cloud.terminate([node.instance_id])  # someone else's hand, or a reclaim at launch
    with caplog.at_level("WARNING", logger="nodemanager.controller"):
        h.run(130)  # two orphan-GC passes (60 s)
    assert h.controller.state.nodes[name].state in (S.TERMINATING, S.TERMINATED)
    replacements = [n for n in h.controller.state.nodes.values() if n.name != name and n.state is not S.TERMINATED]
    assert len(replacements) == 1  # booted for the same pod
    assert any(f"instance {node.instance_id} of node {name} is gone" in r.getMessage() for r in caplog.records)
    assert ("Node", name, "InstanceVanished") in [e[:3] for e in h.cluster.recorded]
    assert h.controller.metrics.terminations.labels("vanished")._value.get() == 1


def test_an_instance_missing_from_one_listing_only_is_not_replaced():
    """A listing that misses an instance once (eventual consistency) is not enough."""
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large")], boot_delay=250.0)
    h.run(5)
    [(name, node)] = list(h.controller.state.nodes.items())
    real = h.cloud.list_instances
    calls = [0]

    def flaky() -> list:
        calls[0] += 1
        listed = real()
        return [i for i in listed if i.instance_id != node.instance_id] if calls[0] == 1 else listed

    h.cloud.list_instances = flaky
    h.run(130)
    assert h.controller.state.nodes[name].state is S.CREATED
    assert len(h.controller.state.nodes) == 1


def test_min_values_strict_makes_the_pod_wait_saying_why_and_best_effort_boots_saying_what_it_relaxed():
    strict = Harness(binpack_pool(launch={"minValues": {"instanceTypes": 9}}), arrivals=[arrive("p1", cpu="500m")])
    strict.run(20)
    assert strict.bound() == {}
    assert strict.controller.state.nodes == {}
    [waiting] = strict.controller.status()["pods"]["waiting"]
    assert "minValues not met" in waiting["reason"]
    relaxed = Harness(binpack_pool(launch={"minValues": {"instanceTypes": 9, "policy": "BestEffort"}}), arrivals=[arrive("p1", cpu="500m")])
    relaxed.run(40)
    assert list(relaxed.bound()) == ["default/p1"]
    [event] = [m for kind, key, reason, m in relaxed.cluster.recorded if reason == "TriggeredScaleUp" and key == "default/p1"]
    assert "minValues not met" in event
    assert "BestEffort" in event
