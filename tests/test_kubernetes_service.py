"""The service in real time on the API stub: watch threads with streams held open, leader
election scheduled by apscheduler, two replicas of which one acts, /status on both."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from kube_stub import KubeStub
from test_cli_service import free_port, readyz

from cloud.base import InstanceState
from cloud.catalog import Catalog
from nodemanager.config.load import parse_config
from nodemanager.service import Service

CONFIG = """
controllerId: live
cloud: {{provider: simulated, simulated: {{bootDelay: 0.2s}}}}
cluster:
  source: kubernetes
  kubernetes:
    mode: scheduler
    kubeconfig: {kubeconfig}
    # kube's lease and renew times: a leader starved of CPU on a loaded machine (the whole
    # suite on two cores) still renews in time, so the follower never takes over here.
    leaderElection: {{leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 0.25s}}
nodes: {{defaultInstanceType: m5.large, idleGrace: 60s}}
pools:
  - {{name: cells, packing: cell, instanceTypes: [m5.large], capacityTypes: [on-demand]}}
loops: {{pool: 0.25s, heartbeat: 1s, reaper: 1s, orphanGC: 30s}}
status: {{listen: "127.0.0.1:{port}"}}
"""


# Every kind the service lists and watches (the leader's and the follower's caches alike).
WATCHED = {
    "pods",
    "nodes",
    "leases",
    "daemonsets",
    "persistentvolumeclaims",
    "persistentvolumes",
    "storageclasses",
    "namespaces",
    "services",
    "replicationcontrollers",
    "replicasets",
    "statefulsets",
    "poddisruptionbudgets",
}


def eventually(check: Callable[[], object], seconds: float = 20.0) -> object:
    """Wait for real threads to get somewhere (polling, never a fixed sleep)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"not true within {seconds}s: {check}")


def status(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as reply:
        return json.loads(reply.read())


@pytest.fixture
def live_stub() -> Iterator[KubeStub]:
    server = KubeStub().start()  # real time
    server.hold_watches = True  # streams stay open, as a real server's do
    yield server
    server.stop()


def service(stub: KubeStub, tmp_path: Path, name: str, catalog: Catalog) -> tuple[Service, int]:
    kubeconfig = tmp_path / f"kubeconfig-{name}"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "stub", "cluster": {"server": stub.host}}],
                "users": [{"name": "nm", "user": {"token": stub.token}}],
                "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "nm"}}],
                "current-context": "stub",
            }
        )
    )
    port = free_port()
    config, catalog = parse_config(CONFIG.format(kubeconfig=kubeconfig, port=port), name, tmp_path)
    return Service(config, catalog, name), port


def test_two_replicas_one_leader_binds_the_other_reports_it(live_stub: KubeStub, tmp_path: Path, catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    first, first_port = service(live_stub, tmp_path, "first", catalog)
    first.start()
    try:
        eventually(lambda: first.elector and first.elector.leading())
        second, second_port = service(live_stub, tmp_path, "second", catalog)
        second.start()
        try:
            for i in range(2):
                live_stub.create_pod(f"job-{i}", cpu="1", memory="1Gi")
            registered: set[str] = set()

            def kubelets() -> bool:  # register a Node for each instance the leader booted
                try:
                    instances = first.cloud.list_instances()
                except RuntimeError:  # the cloud changed while listed (a boot thread): next time
                    return False
                for instance in instances:
                    if instance.state is InstanceState.RUNNING and instance.instance_id not in registered:
                        registered.add(instance.instance_id)
                        live_stub.register_node(f"ip-{len(registered)}.ec2.internal", f"aws:///{instance.zone}/{instance.instance_id}", cpu="2", memory="8Gi")
                return all(p["spec"].get("nodeName") for p in live_stub.items("pods"))

            eventually(kubelets)
            leader_doc, follower_doc = status(first_port), status(second_port)
            assert leader_doc["controller"]["leader"] is True
            assert follower_doc["controller"]["leader"] is False
            assert follower_doc["controller"]["leader_election"]["holder"] == first.elector.identity  # type: ignore[union-attr]
            assert follower_doc["nodes"] == []
            assert second.cloud.list_instances() == []  # the follower never acted
            # Each kind's watch thread starts on its own: under load the last may start after the pods are bound.
            eventually(lambda: {c.resource for c in live_stub.calls if c.verb == "watch"} >= WATCHED)
            watches = [c for c in live_stub.calls if c.verb == "watch"]
            assert {c.resource for c in watches} == WATCHED
            live_stub.drop_watches()  # every stream dies mid-way; the threads reconnect
            live_stub.create_pod("after-drop", cpu="1", memory="1Gi")
            eventually(kubelets)
            assert len([c for c in live_stub.calls if c.verb == "watch"]) > len(watches)
        finally:
            second.stop()
    finally:
        first.stop()
    assert live_stub.get("leases", "nodemanager", "nodemanager")["spec"]["holderIdentity"] == ""  # type: ignore[index]  # released on stop
    assert live_stub.token not in caplog.text


def test_an_api_server_outage_makes_readyz_unready_with_one_warning(live_stub: KubeStub, tmp_path: Path, catalog: Catalog, caplog, monkeypatch) -> None:
    """The API server gone: /readyz turns 503 once it has not answered for the grace (here
    1 s, 30 s by default), and the log says so once, not once per watch and renewal."""
    from nodemanager import service as service_module

    monkeypatch.setattr(service_module, "UNREADY_AFTER", 1.0)
    nm, port = service(live_stub, tmp_path, "alone", catalog)
    nm.start()
    try:
        eventually(lambda: readyz(port) == 200 and nm.elector is not None and nm.elector.leading())
        caplog.clear()
        with caplog.at_level("WARNING"):
            live_stub.stop()
            eventually(lambda: readyz(port) == 503, 15)
            assert nm.reachability is not None
            eventually(lambda: nm.reachability.failures >= 5, 15)  # the watches and the lease keep retrying
            assert readyz(port) == 503
        unreachable = [r for r in caplog.records if "unreachable" in r.getMessage() and r.levelname == "WARNING"]
        assert len(unreachable) == 1, [r.getMessage() for r in unreachable]
        assert status(port)["controller"]["api_server"]["outages"] == 1
    finally:
        nm.stop()
