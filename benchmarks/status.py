"""Status endpoint benchmark: many concurrent ``GET /status``, and a slowloris, against a
busy controller.

    python benchmarks/status.py [--clients 2000] [--slow 1000] [--seconds 15] [--json]

A controller over the simulated cloud and cluster, 40 nodes and 400 pods placed (its
/status document is about 45 KB), serves on 127.0.0.1. From a process of their own:
1. ``--clients`` connections opened at once, each asking for /status (from 40 loopback
   addresses, 127.0.0.10 up: many clients, none past the cap per address).
2. ``--slow`` connections from 16 other loopback addresses each send a request one byte a
   second and reconnect when closed, for ``--seconds``; meanwhile /healthz and /readyz are
   probed in turn, and /status asked every half second, from 127.0.0.1.
Reported: the answers (200, 503 or an error name) and latencies of each. Checked
independently: every 200 /status body parses as JSON and names the controller and its nodes.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cloud.catalog import Catalog
from nodemanager.clock import VirtualClock
from nodemanager.config import parse_config
from nodemanager.controller.virtual import VirtualDriver
from nodemanager.simulator import Simulation, percentile
from nodemanager.status.server import StatusServer

CONFIG = """
controllerId: bench
cloud: {provider: simulated, simulated: {bootDelay: 30s}}
cluster: {source: simulated, simulated: {registerDelay: 10s}}
pools: [{name: general, instanceTypes: ["m6i.large"], capacityTypes: [on-demand]}]
"""
WORKLOAD = [{"name": "web", "count": 400, "pod": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "150m", "memory": "256Mi"}}}]}}]


def busy_controller():  # a controller with a fleet, via the simulator's own wiring
    from nodemanager.cluster.workload import parse_workload

    config, catalog = parse_config(CONFIG, "bench", Path("."))
    assert isinstance(catalog, Catalog)
    simulation = Simulation(config, catalog, parse_workload(json.dumps({"pods": WORKLOAD}), "bench"))
    assert isinstance(simulation.clock, VirtualClock)
    simulation.controller.recover()
    VirtualDriver(simulation.controller, simulation.clock, config.loops.intervals()).run_for(300)
    return simulation.controller


SLOW_SOURCES = [f"127.0.1.{n}" for n in range(1, 17)]


def ask(port: int, start: threading.Event, out: list, source: str = "127.0.0.1", path: str = "/status") -> None:
    start.wait()
    began = time.perf_counter()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
        connection.request("GET", path)
        reply = connection.getresponse()
        body = reply.read()
        connection.close()
        out.append((reply.status, time.perf_counter() - began, body))
    except OSError as exc:
        out.append((type(exc).__name__, time.perf_counter() - began, b""))


def clients_run(port: int, clients: int) -> list[tuple[str, float, bool]]:
    """In their own process (the server's GIL is not theirs), on one event loop (2,000
    threads would time their own scheduling): status, latency, and whether the body is a
    whole /status document naming the controller and its nodes."""

    async def one(i: int) -> tuple[object, float, bytes]:
        began = time.perf_counter()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(f"127.0.0.{10 + i % 40}", 0))
            writer.write(b"GET /status HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
            reply = await asyncio.wait_for(reader.read(-1), 30)
            writer.close()
            head, _, body = reply.partition(b"\r\n\r\n")
            return int(head.split()[1]), time.perf_counter() - began, body
        except (OSError, TimeoutError, IndexError, ValueError) as exc:
            return type(exc).__name__, time.perf_counter() - began, b""

    async def all_at_once() -> list[tuple[object, float, bytes]]:
        return list(await asyncio.gather(*(one(i) for i in range(clients))))

    return [(str(status), seconds, _valid(status, body)) for status, seconds, body in asyncio.run(all_at_once())]


def _valid(status: object, body: bytes) -> bool:
    return status == 200 and (doc := json.loads(body))["controller"]["id"] == "bench" and len(doc["nodes"]) > 0


def slowloris_run(port: int, slow: int, seconds: float) -> dict[str, list]:
    """``slow`` connections trickling requests while probes and /status are timed."""
    stop = threading.Event()
    opened = [0]

    def trickle(source: str, count: int) -> None:
        held: list[socket.socket | None] = [None] * count
        while not stop.is_set():
            for i in range(count):
                try:
                    if held[i] is None:
                        s = socket.socket()
                        s.bind((source, 0))
                        s.settimeout(2)
                        s.connect(("127.0.0.1", port))
                        held[i] = s
                        opened[0] += 1
                    held[i].sendall(b"G")
                except OSError:
                    if held[i] is not None:
                        held[i].close()
                    held[i] = None  # closed by the server: open another
            stop.wait(1.0)
        for s in held:
            if s is not None:
                s.close()

    per_source = -(-slow // len(SLOW_SOURCES))
    trickles = [threading.Thread(target=trickle, args=(src, min(per_source, slow - k * per_source))) for k, src in enumerate(SLOW_SOURCES)]
    for t in trickles:
        t.start()
    time.sleep(2.0)  # let them connect
    probes: list = []
    statuses: list = []
    go = threading.Event()
    go.set()
    end = time.monotonic() + seconds
    next_status = 0.0
    while time.monotonic() < end:
        ask(port, go, probes, path="/healthz")
        ask(port, go, probes, path="/readyz")
        if time.monotonic() >= next_status:
            ask(port, go, statuses)
            next_status = time.monotonic() + 0.5
        time.sleep(0.02)
    stop.set()
    for t in trickles:
        t.join()
    return {
        "probes": [(str(s), t) for s, t, _ in probes],
        "status": [(str(s), t, _valid(s, b)) for s, t, b in statuses],
        "slow_connections_opened": opened[0],
    }


def _latencies(values: list[float]) -> dict[str, float]:
    return {q: round(percentile(values, p), 3) for q, p in (("p50", 50), ("p99", 99), ("max", 100))}


def run(clients: int, slow: int = 0, seconds: float = 15.0) -> dict[str, object]:
    controller = busy_controller()
    server = StatusServer("127.0.0.1:0", controller.status, lambda: True, controller.metrics)
    server.start()
    port = str(server.address[1])
    try:
        began = time.perf_counter()
        child = subprocess.run([sys.executable, __file__, "--client-of", port, "--clients", str(clients)], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - began
        loris = None
        if slow:
            loris = json.loads(
                subprocess.run(
                    [sys.executable, __file__, "--client-of", port, "--slow", str(slow), "--seconds", str(seconds)], capture_output=True, text=True, check=True
                ).stdout
            )
    finally:
        server.stop()
    out = json.loads(child.stdout)
    result: dict[str, object] = {
        "clients": clients,
        "nodes": len(controller.state.nodes),
        "document_bytes": len(json.dumps(controller.status(), indent=2, sort_keys=True, default=str)),
        "answers": dict(Counter(s for s, _, _ in out)),
        "valid_documents": sum(1 for _, _, v in out if v),
        "wall_seconds": round(wall, 3),
        "latency_seconds": _latencies([t for s, t, _ in out if s == "200"]),
    }
    if loris is not None:
        result["slowloris"] = {
            "connections": slow,
            "seconds": seconds,
            "slow_connections_opened": loris["slow_connections_opened"],
            "probe_answers": dict(Counter(s for s, _ in loris["probes"])),
            "probe_latency_seconds": _latencies([t for _, t in loris["probes"]]),
            "status_answers": dict(Counter(s for s, _, _ in loris["status"])),
            "status_valid_documents": sum(1 for _, _, v in loris["status"] if v),
            "status_latency_seconds": _latencies([t for _, t, _ in loris["status"]]),
        }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--slow", type=int, default=1000, help="slowloris connections (0: none)")
    parser.add_argument("--seconds", type=float, default=15.0, help="how long the slowloris lasts")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--client-of", type=int, help=argparse.SUPPRESS)  # the clients' own process
    args = parser.parse_args()
    if args.client_of:
        out = slowloris_run(args.client_of, args.slow, args.seconds) if "--slow" in sys.argv else clients_run(args.client_of, args.clients)
        print(json.dumps(out))
        return 0
    result = run(args.clients, args.slow, args.seconds)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
