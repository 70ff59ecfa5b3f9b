"""Status endpoint benchmark: many concurrent ``GET /status`` against a busy controller.

    python benchmarks/status.py [--clients 500] [--json]

A controller over the simulated cloud and cluster, 40 nodes and 400 pods placed (its
/status document is about 45 KB), serves on 127.0.0.1; ``--clients`` threads each open a
connection at once and ask for /status, from a process of their own. Reported: how many got 200, 503 (the server's
limit of connections handled at once) or no answer, and the latencies. Checked
independently: every 200 body parses as JSON and names the controller and its nodes.
"""

from __future__ import annotations

import argparse
import http.client
import json
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


def ask(port: int, start: threading.Event, out: list) -> None:
    start.wait()
    began = time.perf_counter()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", "/status")
        reply = connection.getresponse()
        body = reply.read()
        connection.close()
        out.append((reply.status, time.perf_counter() - began, body))
    except OSError as exc:
        out.append((type(exc).__name__, time.perf_counter() - began, b""))


def clients_run(port: int, clients: int) -> list[tuple[str, float, bool]]:
    """In their own process (the server's GIL is not theirs): status, latency, and whether
    the body is a whole /status document naming the controller and its nodes."""
    start, out = threading.Event(), []
    threads = [threading.Thread(target=ask, args=(port, start, out)) for _ in range(clients)]
    for t in threads:
        t.start()
    start.set()
    for t in threads:
        t.join()
    checked = []
    for status, seconds, body in out:
        valid = status == 200 and (doc := json.loads(body))["controller"]["id"] == "bench" and len(doc["nodes"]) > 0
        checked.append((str(status), seconds, bool(valid)))
    return checked


def run(clients: int) -> dict[str, object]:
    controller = busy_controller()
    server = StatusServer("127.0.0.1:0", controller.status, lambda: True, controller.metrics)
    server.start()
    try:
        began = time.perf_counter()
        child = subprocess.run(
            [sys.executable, __file__, "--client-of", str(server.address[1]), "--clients", str(clients)], capture_output=True, text=True, check=True
        )
        wall = time.perf_counter() - began
    finally:
        server.stop()
    out = json.loads(child.stdout)
    latencies = [t for s, t, _ in out if s == "200"]
    return {
        "clients": clients,
        "nodes": len(controller.nodes),
        "document_bytes": len(json.dumps(controller.status(), indent=2, sort_keys=True, default=str)),
        "answers": dict(Counter(s for s, _, _ in out)),
        "valid_documents": sum(1 for _, _, v in out if v),
        "wall_seconds": round(wall, 3),
        "latency_seconds": {q: round(percentile(latencies, p), 3) for q, p in (("p50", 50), ("p99", 99), ("max", 100))},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--client-of", type=int, help=argparse.SUPPRESS)  # the clients' own process
    args = parser.parse_args()
    if args.client_of:
        print(json.dumps(clients_run(args.client_of, args.clients)))
        return 0
    result = run(args.clients)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
