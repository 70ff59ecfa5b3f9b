"""Leader election on a coordination.k8s.io/v1 Lease in the API stub, and failover between
two controllers: never two leaders acting at once, and the follower takes over."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from builders import CATALOG, cell_pool
from kube_helpers import Kubelets, api_client, kube_config, source
from kube_stub import KubeStub
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cloud.base import InstanceState
from cloud.simulated import SimulatedCloud
from nodemanager.clock import VirtualClock
from nodemanager.cluster.kubernetes.leader import LeaderElector, micro_time
from nodemanager.config.cluster_schema import LeaderElection
from nodemanager.controller import InlineExecutor, NodeController
from nodemanager.service import LeaderGate

SETTINGS = LeaderElection(namespace="nodemanager", lease_name="nodemanager")  # 15 s lease, 10 s renew deadline, 2 s retry


def elector(stub: KubeStub, clock: VirtualClock, identity: str) -> LeaderElector:
    stub.tokens.add(identity)
    return LeaderElector(api_client(stub, identity), SETTINGS, identity, clock)


def lease(stub: KubeStub) -> dict:
    found = stub.get("leases", "nodemanager", "nodemanager")
    assert found is not None
    return found


def test_the_first_candidate_creates_the_lease_and_the_second_follows(stub: KubeStub, clock: VirtualClock) -> None:
    a, b = elector(stub, clock, "a"), elector(stub, clock, "b")
    assert a.tick()
    assert not b.tick()
    assert b.holder == "a"
    spec = lease(stub)["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["renewTime"].endswith(":00.000001Z")  # a whole second moved on by 1 µs: six digits survive the client
    rv = lease(stub)["metadata"]["resourceVersion"]
    clock.advance(2)
    assert a.tick()
    assert lease(stub)["metadata"]["resourceVersion"] != rv  # renewed
    assert b.describe() == {"enabled": True, "leading": False, "identity": "b", "holder": "a", "problem": None, "lease": "nodemanager/nodemanager"}


def test_a_missing_namespace_is_said_once_and_nobody_is_ready(stub: KubeStub, clock: VirtualClock, caplog: pytest.LogCaptureFixture) -> None:
    stub.namespaces = {"default", "kube-node-lease"}
    a = elector(stub, clock, "a")
    for _ in range(5):
        assert not a.tick()
        clock.advance(2)
    assert 'namespaces "nodemanager" not found' in (a.problem or "")
    assert a.describe()["problem"] == a.problem
    said = [r for r in caplog.records if "nodemanager" in r.getMessage() and r.name == "nodemanager.leader"]
    assert [r.levelname for r in said] == ["ERROR"]  # once, as an error, not a warning every 2 s
    stub.namespaces.add("nodemanager")
    assert a.tick()
    assert a.problem is None


def test_a_clean_release_is_not_reported_as_a_lost_lease(stub: KubeStub, clock: VirtualClock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "nodemanager.leader")
    a = elector(stub, clock, "a")
    assert a.tick()
    a.release()
    messages = [r.getMessage() for r in caplog.records if r.name == "nodemanager.leader"]
    assert any("stopped leading (released the lease)" in m for m in messages)
    assert not any("no renewal" in m for m in messages)


def test_the_stub_refuses_a_microtime_without_six_digits(stub: KubeStub, clock: VirtualClock) -> None:
    """What the official client sends for a datetime on a whole second: the server says 400."""
    api = client.CoordinationV1Api(api_client(stub))
    body = {"metadata": {"name": "x"}, "spec": {"renewTime": datetime.fromtimestamp(clock.now(), UTC).isoformat()}}
    with pytest.raises(ApiException) as refused:
        api.create_namespaced_lease("nodemanager", body)
    assert refused.value.status == 400
    assert micro_time(clock.now() + 0.5).endswith(".500000Z")


def test_two_candidates_racing_for_an_expired_lease_get_one_leader(stub: KubeStub, clock: VirtualClock) -> None:
    old, a, b = elector(stub, clock, "old"), elector(stub, clock, "a"), elector(stub, clock, "b")
    assert old.tick()
    a.tick()
    b.tick()
    clock.advance(16)  # old is gone; both have watched the lease run out
    stale_rv = lease(stub)["metadata"]["resourceVersion"]
    # both read the same version; a writes first, so b's write carries a stale version: 409
    original = stub._existing

    def same_read(res, ns, name):  # type: ignore[no-untyped-def]
        found = original(res, ns, name)
        if res == "leases":
            found["metadata"]["resourceVersion"] = stale_rv
        return found

    stub._existing = same_read  # type: ignore[method-assign]
    assert a.tick()
    stub._existing = original  # type: ignore[method-assign]
    assert not b.tick()
    assert lease(stub)["spec"]["holderIdentity"] == "a"
    assert lease(stub)["spec"]["leaseTransitions"] == 1


def test_a_leader_cut_off_stops_before_anyone_can_start(stub: KubeStub, clock: VirtualClock) -> None:
    a, b = elector(stub, clock, "a"), elector(stub, clock, "b")
    a.tick()
    b.tick()
    stub.blocked.add("a")  # a can no longer reach the API server
    a_stopped = b_started = None
    for second in range(1, 40):
        clock.advance(1)
        if second % 2 == 0:
            a.tick()
            b.tick()
        if a_stopped is None and not a.leading():
            a_stopped = second
        if b_started is None and b.leading():
            b_started = second
        assert not (a.leading() and b.leading())
    assert a_stopped == 10  # renew deadline after its last successful renewal began
    assert b_started == 16  # lease duration after b last saw the lease change, at its next try
    assert lease(stub)["spec"]["holderIdentity"] == "b"


def test_a_released_lease_is_taken_at_the_next_try(stub: KubeStub, clock: VirtualClock) -> None:
    a, b = elector(stub, clock, "a"), elector(stub, clock, "b")
    a.tick()
    b.tick()
    a.release()
    assert not a.leading()
    clock.advance(2)
    assert b.tick()


class Replica:
    def __init__(self, name: str, stub: KubeStub, cloud: SimulatedCloud, clock: VirtualClock) -> None:
        config = kube_config(cell_pool())
        self.name = name
        self.elector = elector(stub, clock, name)
        cluster = source(stub, cloud, clock, config, token=name)
        self.gate = LeaderGate(self.elector, lambda: NodeController(config, CATALOG, cloud, cluster, clock, executor=InlineExecutor()))


def test_failover_between_two_controllers(stub: KubeStub, clock: VirtualClock) -> None:
    cloud = SimulatedCloud("test", clock, boot_delay=20)
    replicas = [Replica("a", stub, cloud, clock), Replica("b", stub, cloud, clock)]
    kubelets = Kubelets(stub, cloud, clock)
    for i in range(4):
        stub.create_pod(f"job-{i}", cpu="1", memory="1Gi")
    acted: dict[str, list[int]] = {"a": [], "b": []}
    for second in range(1, 241):
        clock.advance(1)
        kubelets.step()
        if second == 60:
            stub.blocked.add("a")  # the leader is partitioned from the API server
            for i in range(4, 8):
                stub.create_pod(f"job-{i}", cpu="1", memory="1Gi")
        for replica in replicas:
            if second % 2 == 0:
                replica.elector.tick()
        leaders = [r for r in replicas if r.elector.leading()]
        assert len(leaders) <= 1, f"two leaders at {second}s"
        for replica in leaders:
            if replica.gate.acting():
                acted[replica.name].append(second)
                if second % 7 == 0:
                    replica.gate.controller.pool_loop()
                if second % 10 == 0:
                    replica.gate.controller.heartbeat_loop()
                    replica.gate.controller.reaper_loop()
    assert acted["a"]
    assert acted["b"]
    assert max(acted["a"]) < min(acted["b"])  # a stopped before b started
    assert min(acted["b"]) - 60 <= SETTINGS.lease_duration + SETTINGS.retry_period  # b took over promptly
    bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in stub.items("pods")}
    assert all(bound.values()), bound  # b bound the pods created after the failover too
    assert len({i.instance_id for i in cloud.list_instances() if i.state is not InstanceState.TERMINATED}) == 8  # nothing booted twice
    assert replicas[1].gate.terms == 1
    registered = [e["involvedObject"]["name"] for e in stub.items("events") if e["reason"] == "Registered"]
    assert len(registered) >= 4
    assert sorted(registered) == sorted(set(registered))  # the new leader does not announce the nodes it adopted again
