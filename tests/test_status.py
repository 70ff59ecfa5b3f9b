"""The status endpoint, in process on 127.0.0.1 with a free port."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import socket
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from builders import cell_pool
from harness import Harness, arrive
from prometheus_client import generate_latest

from nodemanager.config.files import load_token, tls_context
from nodemanager.config.schema import Standby, Status, parse_listen
from nodemanager.model import NodeState
from nodemanager.status.server import StatusServer

SECRET = "s3cr3t-token-value"


def get(server: StatusServer, path: str, token: str | None = None) -> tuple[int, str, str]:
    host, port = server.address
    request = urllib.request.Request(f"http://{host}:{port}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type", ""), err.read().decode()


@pytest.fixture
def running():
    h = Harness(cell_pool(standby=[Standby(instance_type="a.large", count=1)]), arrivals=[arrive("p1", itype="a.large"), arrive("big", cpu="64")])
    h.run(45)
    return h


def serve(h: Harness, token: str | None = None, ready=None) -> StatusServer:
    server = StatusServer("127.0.0.1:0", h.controller.status, ready or (lambda: h.controller.state.ready), h.controller.metrics, token)
    server.start()
    return server


def test_status_document(running):
    server = serve(running)
    try:
        code, ctype, body = get(server, "/status")
    finally:
        server.stop()
    assert (code, ctype) == (200, "application/json")
    doc = json.loads(body)
    assert set(doc) >= {"controller", "loops", "nodes", "pods", "pools", "unavailable", "cost_per_hour", "config"}
    assert doc["controller"]["id"] == "test"
    assert doc["controller"]["leader"] is True
    assert set(doc["loops"]) == {"pool", "heartbeat", "reaper", "orphan_gc", "prices", "colocation", "disruption", "interruption", "reservations"}
    assert doc["loops"]["pool"]["count"] >= 6
    assert set(doc["loops"]["pool"]) == {"start", "end", "last_ms", "avg_ms", "count"}
    node = doc["nodes"][0]
    assert set(node) >= {"name", "instance_id", "instance_type", "capacity_type", "zone", "pool", "state", "pods", "created_at", "ready_at", "last_heartbeat"}
    claimed = [n for n in doc["nodes"] if n["pods"]]
    assert claimed[0]["pods"] == ["default/p1"]
    assert doc["pods"]["counts"]["unschedulable"] == 1
    [waiting] = doc["pods"]["waiting"]
    assert waiting["pod"] == "default/big"
    assert "no instance type can hold cpu=64" in waiting["reason"]
    assert doc["pools"][0]["standby"] == {"wanted": 1, "present": 1}
    assert doc["cost_per_hour"] > 0
    assert doc["config"]["nodes"]["healthyTimeout"] == "90s"


def test_metrics_names(running):
    server = serve(running)
    try:
        code, ctype, body = get(server, "/metrics")
    finally:
        server.stop()
    assert code == 200
    assert ctype.startswith("text/plain")
    for name in (
        'nodemanager_nodes{pool="cells",state="Claimed"} 1.0',
        "nodemanager_pending_pods 1.0",
        "nodemanager_unschedulable_pods 1.0",
        'nodemanager_boots_total{capacity_type="spot",instance_type="a.large",pool="cells"}',
        "nodemanager_loop_duration_seconds_count",
        "nodemanager_fleet_hourly_cost_dollars",
        "nodemanager_decisions_total",
    ):
        assert name in body, name


def test_health_readiness_and_unknown_paths(running):
    ready = {"now": False}
    server = serve(running, ready=lambda: ready["now"])
    try:
        assert get(server, "/healthz")[:1] == (200,)
        assert get(server, "/readyz")[0] == 503
        ready["now"] = True
        assert get(server, "/readyz")[0] == 200
        code, _, body = get(server, "/nope")
        assert code == 404
        assert "/status" in body
    finally:
        server.stop()


def test_bearer_token_guards_all_but_the_probes(running):
    server = serve(running, token=SECRET)
    try:
        assert get(server, "/healthz")[0] == 200
        assert get(server, "/readyz")[0] == 200  # a kubelet probe sends no token; it learns only ready or not
        for path in ("/status", "/metrics"):
            assert get(server, path)[0] == 401
            assert get(server, path, "wrong")[0] == 401
            assert get(server, path, SECRET)[0] == 200
    finally:
        server.stop()


def test_secrets_never_appear_in_status():
    from nodemanager.config import parse_config

    image = "nodes: {bootImageSpec: {imageIDs: [ami-1]}}\n"
    text = f"controllerId: x\ncloud: {{provider: aws, aws: {{region: us-east-1, userData: '{SECRET}'}}}}\n{image}pools: [{{name: a}}]\n"
    config, _ = parse_config(text, "t", Path("."))
    h = Harness(cell_pool())
    h.controller.state.config = config
    assert SECRET not in json.dumps(h.controller.status(), default=str)


def test_listens_on_loopback_by_default():
    assert Status().listen == "127.0.0.1:8080"
    assert parse_listen("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_listen("[::1]:9090") == ("::1", 9090)


def test_token_from_file_and_environment(tmp_path, monkeypatch):
    path = tmp_path / "token"
    path.write_text(SECRET + "\n")
    assert load_token(Status(bearer_token_file=str(path))) == SECRET
    monkeypatch.setenv("NM_TOKEN", SECRET)
    assert load_token(Status(bearer_token_env="NM_TOKEN")) == SECRET
    monkeypatch.delenv("NM_TOKEN")
    with pytest.raises(ValueError, match="NM_TOKEN is not set or blank"):
        load_token(Status(bearer_token_env="NM_TOKEN"))
    assert load_token(Status()) is None


def test_status_answers_while_a_loop_holds_the_controller(running: Harness) -> None:
    """In a cloud outage a loop holds the controller through calls that retry for many
    seconds; /status must still answer, with the last document and how old it is."""
    before = running.controller.status()
    server = serve(running)
    holding, release = threading.Event(), threading.Event()

    def stuck_loop() -> None:
        with running.controller.state.lock:
            holding.set()
            release.wait(30)

    loop = threading.Thread(target=stuck_loop, daemon=True)
    loop.start()
    holding.wait(5)
    try:
        code, _, body = get(server, "/status")
        assert code == 200
        doc = json.loads(body)
        assert doc["controller"]["busy"] is True
        assert doc["controller"]["as_of"] == before["controller"]["now"]
        assert [n["name"] for n in doc["nodes"]] == [n["name"] for n in before["nodes"]]
        assert get(server, "/healthz")[0] == 200
        assert get(server, "/metrics")[0] == 200
    finally:
        release.set()
        loop.join(5)
        server.stop()
    assert "busy" not in running.controller.status()["controller"]  # the lock is free again: a fresh document


def _slow_clients(host: str, port: int, count: int, sources: list[str]) -> list[socket.socket]:
    """``count`` connections from ``sources`` (loopback addresses), each having sent one
    byte of a request: a slowloris."""
    held = []
    for i in range(count):
        s = socket.socket()
        s.bind((sources[i % len(sources)], 0))
        s.settimeout(5)
        s.connect((host, port))
        s.sendall(b"G")
        held.append(s)
    return held


def test_slow_clients_cannot_keep_the_probes_or_status_from_answering(running, monkeypatch):
    """300 connections trickling a request byte by byte from four addresses (the old server
    gave each a thread of 64, and answered every probe 503): the probes and /status from
    another address still answer, and each slow connection is closed once the request
    deadline passes, however many bytes it trickles."""
    from nodemanager.status import server as status_server

    monkeypatch.setattr(status_server, "REQUEST_DEADLINE", 1.5)
    server = serve(running)
    host, port = server.address
    held = _slow_clients(host, port, 300, [f"127.0.0.{n}" for n in range(2, 6)])
    try:
        for s in held[:10]:
            s.sendall(b"E")  # trickling does not extend the deadline
        for _ in range(20):
            assert get(server, "/healthz")[0] == 200
            assert get(server, "/readyz")[0] == 200
        assert get(server, "/status")[0] == 200
        closed = 0
        for s in held[:10]:
            with contextlib.suppress(OSError):
                closed += s.recv(100) == b""  # closed by the server, unanswered
        assert closed == 10
    finally:
        for s in held:
            s.close()
        server.stop()


def test_connections_past_the_per_address_cap_get_503_at_once_others_are_served(running, monkeypatch):
    from nodemanager.status import server as status_server

    monkeypatch.setattr(status_server, "PER_CLIENT", 3)
    server = serve(running)
    host, port = server.address
    held = _slow_clients(host, port, 3, ["127.0.0.2"])
    try:
        [fourth] = _slow_clients(host, port, 1, ["127.0.0.2"])
        assert fourth.recv(200).startswith(b"HTTP/1.1 503")
        fourth.close()
        assert get(server, "/healthz")[0] == 200  # another address is not counted against it
        assert server.open["127.0.0.2"] == 3
    finally:
        for s in held:
            s.close()
        server.stop()


def test_head_is_answered_and_other_methods_refused(running):
    server = serve(running)
    host, port = server.address
    try:
        connection = http.client.HTTPConnection(host, port, timeout=5)
        connection.request("HEAD", "/status")
        reply = connection.getresponse()
        assert (reply.status, reply.read()) == (200, b"")
        assert int(reply.headers["Content-Length"]) > 100
        connection.request("POST", "/status", body=b"{}")
        reply = connection.getresponse()
        assert reply.status == 405
        assert reply.headers["Allow"] == "GET, HEAD"
        reply.read()
        connection.close()
    finally:
        server.stop()


def test_listening_on_ipv6_loopback(running):
    server = StatusServer("[::1]:0", running.controller.status, lambda: True, running.controller.metrics)
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    server.start()
    try:
        assert server.address[0] == "::1"
        with urllib.request.urlopen(f"http://[::1]:{server.address[1]}/healthz", timeout=5) as reply:
            assert reply.status == 200
    finally:
        server.stop()


def test_an_address_in_use_names_the_setting(running):
    first = serve(running)
    try:
        second = StatusServer(f"127.0.0.1:{first.address[1]}", running.controller.status, lambda: True, running.controller.metrics)
        with pytest.raises(OSError, match=r"status\.listen: cannot listen on 127\.0\.0\.1:\d+"):
            second.start()
    finally:
        first.stop()


def test_tls_from_a_certificate_and_key(running, tmp_path):
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    server = StatusServer("127.0.0.1:0", running.controller.status, lambda: True, running.controller.metrics, tls=tls_context(str(cert), str(key)))
    server.start()
    try:
        context = ssl.create_default_context(cafile=str(cert))
        context.check_hostname = False
        with urllib.request.urlopen(f"https://127.0.0.1:{server.address[1]}/status", timeout=5, context=context) as reply:
            assert json.loads(reply.read())["controller"]["id"] == "test"
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP is not answered
            urllib.request.urlopen(f"http://127.0.0.1:{server.address[1]}/healthz", timeout=5)
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("status", "refused"),
    [
        ("{listen: '0.0.0.0:8080'}", True),
        ("{listen: '10.0.0.5:8080'}", True),
        ("{listen: 'nodemanager.internal:8080'}", True),
        ("{listen: '0.0.0.0:8080', allowUnauthenticated: true}", False),
        ("{listen: '0.0.0.0:8080', bearerTokenEnv: TOKEN}", False),
        ("{listen: '127.0.0.1:8080'}", False),
        ("{listen: 'localhost:8080'}", False),
        ("{listen: '[::1]:8080'}", False),
    ],
)
def test_listening_beyond_loopback_needs_a_token_or_an_explicit_opt_out(status: str, refused: bool, monkeypatch) -> None:
    monkeypatch.setenv("TOKEN", "a-token-value")
    from nodemanager.config import parse_config
    from nodemanager.errors import ConfigError

    text = f"pools: [{{name: a}}]\nstatus: {status}\n"
    if refused:
        with pytest.raises(ConfigError, match=r"status\.listen: .* no token guards it"):
            parse_config(text, "p.yaml", Path("."))
    else:
        parse_config(text, "p.yaml", Path("."))


def test_concurrent_status_requests_share_one_build_and_none_is_older_than_max_age() -> None:
    """A flood of /status requests costs one build of the document, not one each; past
    ``max_age`` the next request builds a fresh one."""
    import asyncio

    from nodemanager.status.server import SharedBuild

    release, builds = threading.Event(), []

    def build() -> tuple[int, bytes]:
        builds.append(len(builds))
        release.wait(5)
        return 200, str(len(builds)).encode()

    async def flood(shared: SharedBuild, count: int) -> list[tuple[int, bytes]]:
        requests = [asyncio.ensure_future(shared.get()) for _ in range(count)]
        await asyncio.sleep(0)  # every request is waiting before the build ends
        release.set()
        return list(await asyncio.gather(*requests))

    async def scenario() -> None:
        shared = SharedBuild(build, max_age=3600)
        assert await flood(shared, 21) == [(200, b"1")] * 21
        assert len(builds) == 1
        assert await shared.get() == (200, b"1")  # within max_age: the same reply
        fresh = SharedBuild(build, max_age=0)
        assert [await fresh.get(), await fresh.get()] == [(200, b"2"), (200, b"3")]  # past max_age: rebuilt each time

    asyncio.run(scenario())


def test_node_gauges_follow_state_changes_and_drop_states_left_empty():
    """The node gauges are made again only when the records change, and a state no node is
    in any more leaves the metrics (not a stale count)."""
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large", duration=120.0), arrive("p2", at=30.0, itype="a.large", duration=120.0)])
    h.run(45)
    text = generate_latest(h.controller.metrics.registry).decode()
    assert 'nodemanager_nodes{pool="cells",state="Claimed"} 1.0' in text
    h.run(45)
    assert 'nodemanager_nodes{pool="cells",state="Claimed"} 2.0' in generate_latest(h.controller.metrics.registry).decode()
    h.run(300)  # the pods finished; the idle nodes were stopped after the idle grace
    text = generate_latest(h.controller.metrics.registry).decode()
    assert 'state="Claimed"' not in text
    assert "nodemanager_pending_pods 0.0" in text


def test_the_node_gauges_follow_the_records_when_status_asked_for_the_price_in_between():
    """The gauges and /status read one tally of the records: /status catching it up first
    must not leave the gauges behind."""
    h = Harness(cell_pool(), arrivals=[arrive("p1", itype="a.large", duration=600.0)])
    h.run(45)
    c = h.controller
    [name] = c.state.nodes
    assert 'nodemanager_nodes{pool="cells",state="Claimed"} 1.0' in generate_latest(c.metrics.registry).decode()
    c.state.mark_for_termination(name, "a test", "unhealthy")
    c.state.nodes[name] = dataclasses.replace(c.state.nodes[name], state=NodeState.TERMINATING)
    assert c.status()["cost_per_hour"] == 0.0  # the price caught up with the record first
    c.reporting.refresh_gauges()
    text = generate_latest(c.metrics.registry).decode()
    assert 'state="Claimed"' not in text
    assert 'nodemanager_nodes{pool="cells",state="Terminating"} 1.0' in text
    assert "nodemanager_fleet_hourly_cost_dollars 0.0" in text
