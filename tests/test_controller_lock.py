"""No loop holds the controller's lock across a call to the cloud or the API server.

Through an outage such a call waits or retries for many seconds; under the lock it held
every other loop back for as long: binding pods onto nodes that run, /status, the
interruption queue. The calls are made once the lock is released, and recorded under it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from builders import binpack_pool
from harness import Harness, arrive

from nodemanager.cluster.workload import parse_devices, parse_workload
from nodemanager.config import parse_config
from nodemanager.controller.lock import ControllerLock
from nodemanager.model import NodeState
from nodemanager.simulator import Simulation

HERE = Path(__file__).parent
LOCAL = {"current_image"}  # reads what the client last resolved: no call is made
CONFIG = """
controllerId: locks
cloud: {provider: simulated, simulated: {bootDelay: 30s, seed: 3, spotInterruptionPerHour: 1}}
cluster: {source: simulated, simulated: {registerDelay: 10s}}
nodes: {idleGrace: 2m}
pools:
  - name: gpu
    instanceTypes: ["g4dn.xlarge"]
    capacityTypes: [on-demand]
  - name: general
    instanceTypes: ["m6i.large", "m6i.xlarge"]
    capacityTypes: [spot]
    colocation: {enable: true}
"""


class Watched:
    """Stands in for a cloud, a cluster or a queue: notes each call and whether the calling
    thread held the controller's lock when it was made."""

    def __init__(self, inner: object, calls: list[tuple[str, bool]], held: Callable[[], bool], wrap: tuple[str, ...] = ()) -> None:
        self._inner, self._calls, self._held, self._wrap = inner, calls, held, wrap

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name in self._wrap:
            return Watched(value, self._calls, self._held)
        if not callable(value) or name in LOCAL:
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self._calls.append((name, self._held()))
            return value(*args, **kwargs)

        return call


def test_no_loop_calls_the_cloud_or_the_cluster_while_holding_the_controller(catalog) -> None:
    config, _ = parse_config(CONFIG, "t", HERE)
    text = (HERE / "data" / "gpu-workload.yaml").read_text().split("pods:")[0] + (
        "pods:\n"
        "  - name: infer\n    count: 2\n    duration: 20m\n    pod:\n      spec:\n"
        "        resourceClaims: [{name: gpu, resourceClaimTemplateName: any}]\n"
        "        containers: [{name: c, resources: {requests: {cpu: '1', memory: 2Gi}}}]\n"
        "  - name: web\n    count: 12\n    duration: 40m\n    usage: {cpu: 0.3, memory: 0.3}\n"
        "    pod: {spec: {nodeSelector: {nodemanager.io/pool: general}, containers: [{name: c, resources: {requests: {cpu: '1', memory: 2Gi}}}]}}\n"
        "  - name: late\n    count: 6\n    at: 50m\n    duration: 10m\n"
        "    pod: {spec: {nodeSelector: {nodemanager.io/pool: general}, containers: [{name: c, resources: {requests: {cpu: '500m', memory: 1Gi}}}]}}\n"
    )
    sim = Simulation(config, catalog, parse_workload(text), parse_devices(text))
    c = sim.controller
    calls: list[tuple[str, bool]] = []
    held = c.state.lock.held
    cloud, cluster = Watched(c.cloud, calls, held), Watched(c.cluster, calls, held)
    originals = {"cloud": c.cloud, "cluster": c.cluster}
    for part in (c, *vars(c).values()):  # the operator and every controller it gave them to
        for name, watched in (("cloud", cloud), ("cluster", cluster)):
            if getattr(part, name, None) is originals[name]:
                setattr(part, name, watched)
    c.state._post_event = cluster.record_event  # type: ignore[method-assign]
    c.interruption.queue = Watched(c.interruption.queue, calls, held)  # type: ignore[assignment]
    report = sim.run(until=3 * 3600)
    assert report["pods"]["bound"] == 20
    made = {name for name, _ in calls}
    # every kind of call the loops make was made: boots, binds, events, labels, drains,
    # terminations and their confirmation, Node deletions, device objects, claim
    # allocations, node metrics, the interruption queue, the cloud's listing
    assert {"boot", "bind_all", "record_event", "label_node", "drain", "terminate", "describe", "remove_node"} <= made
    assert {"devices", "allocate_claim", "node_metrics", "receive", "delete", "list_instances", "poll"} <= made
    assert sorted({name for name, held in calls if held}) == []


def test_a_drain_stuck_in_the_api_server_does_not_hold_back_binding() -> None:
    """The reaper waits on an eviction that does not return (the API server is overloaded);
    meanwhile the pool loop binds a new pod to another running node, and /status is fresh."""
    entered, release = threading.Event(), threading.Event()
    h = Harness(binpack_pool(), arrivals=[arrive("a", cpu="1500m", itype="a.large"), arrive("b", cpu="1500m", itype="a.large"), arrive("new", at=300.0)])
    h.run(120)
    node_a, node_b = h.bound()["default/a"], h.bound()["default/b"]
    assert node_a != node_b

    class Stuck:
        def __getattr__(self, name: str) -> Any:
            return getattr(h.cluster, name)

        def drain(self, name: str) -> Any:
            entered.set()
            release.wait(60)
            return h.cluster.drain(name)

    h.controller.reaper.cluster = Stuck()  # type: ignore[assignment]
    h.controller.state.mark_for_termination(node_b, "node left the cluster", "unhealthy")
    reaper = threading.Thread(target=h.controller.reaper_loop, daemon=True)
    reaper.start()
    try:
        assert entered.wait(10)
        h.clock.advance_to(1300.0)  # "new" arrives
        pool = threading.Thread(target=h.controller.pool_loop, daemon=True)
        pool.start()
        pool.join(10)
        assert not pool.is_alive()  # it did not wait for the reaper
        assert reaper.is_alive()  # still stuck in the eviction
        assert h.bound()["default/new"] == node_a
        assert "busy" not in h.controller.status()["controller"]
    finally:
        release.set()
        reaper.join(10)
    assert not reaper.is_alive()
    assert h.controller.state.nodes[node_b].state in (NodeState.TERMINATING, NodeState.TERMINATED)


def test_calls_asked_for_under_the_lock_are_made_after_its_release_in_order() -> None:
    lock = ControllerLock()
    made: list[tuple[str, bool]] = []
    with lock:
        with lock:
            lock.after_release(lambda: made.append(("a", lock.held())))
        assert made == []  # still held by the outer section
        lock.after_release(lambda: made.append(("b", lock.held())))
    assert made == [("a", False), ("b", False)]
    lock.after_release(lambda: made.append(("c", lock.held())))
    assert made[-1] == ("c", False)  # not held: at once


def test_a_call_that_fails_does_not_stop_the_others_and_is_logged(caplog) -> None:
    lock = ControllerLock()
    made: list[str] = []

    def boom() -> None:
        raise RuntimeError("endpoint down")

    with lock:
        lock.after_release(boom)
        lock.after_release(made.append, "after")
    assert made == ["after"]
    assert "endpoint down" in caplog.text


def test_a_call_that_takes_the_lock_again_queues_behind_the_others() -> None:
    """A recorded outcome takes the lock again; what it asks for joins the same list."""
    lock = ControllerLock()
    made: list[str] = []

    def record(what: str) -> None:
        with lock:
            lock.after_release(made.append, f"{what} recorded")
        made.append(f"{what} done")

    with lock:
        lock.after_release(record, "first")
        lock.after_release(made.append, "second")
    assert made == ["first done", "second", "first recorded"]
