"""Cloud outage benchmark: ``nodemanager run`` against a moto EC2 server that goes away.

    python benchmarks/outage.py [--down 60] [--json]

A moto server on 127.0.0.1 is the EC2 endpoint; ``nodemanager run`` (a process of its own,
simulated cluster) keeps a cell pool for a workload: 4 pods at the start, 4 more arriving
while the endpoint is down. Phases:

1. **outage**: ``--down`` seconds after the first pods run, the endpoint stops (connections
   refused), then comes back with its state.
2. **reset**: the endpoint forgets everything (moto's reset: instances gone, new subnet ids).

Throughout, ``/status`` is probed every quarter second. Reported: probes answered and their
latencies, the warnings the log has per phase, how long after the endpoint's return every
pod was bound again, boot attempts after the reset, and the most node records ``/status``
listed. Checked independently from the endpoint itself (its instances), not the service's
own view: after each phase every pod has a live instance of its own, and no node name was
launched twice.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import boto3
from moto.server import ThreadedMotoServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cloud.base import CONTROLLER_TAG, NODE_TAG
from nodemanager.simulator import percentile

PODS = 8  # 4 at the start, 4 during the outage
CONFIG = """
controllerId: outage
cloud:
  provider: aws
  aws: {{region: us-east-1, endpointURL: "http://127.0.0.1:{ec2_port}", refreshPrices: false}}
cluster:
  source: simulated
  simulated: {{workload: {workload}, registerDelay: 1s}}
nodes:
  defaultInstanceType: m5.large
  bootImageSpec: {{owners: [amazon], filters: {{name: ["amzn2-ami-hvm-*-gp2"]}}}}
  healthyTimeout: 20s
  maxBootsPerLoop: 4
pools:
  - name: general
    packing: cell
    instanceTypes: [m5.large]
    capacityTypes: [on-demand]
loops: {{pool: 2s, heartbeat: 2s, reaper: 2s, orphanGC: 10s, passDeadline: 10s}}
status: {{listen: "127.0.0.1:{status_port}"}}
"""
WORKLOAD = """pods:
  - {{name: early, count: 4, pod: {{containers: [{{name: c, resources: {{requests: {{cpu: 500m}}}}}}]}}}}
  - {{name: late, count: 4, at: {late}s, pod: {{containers: [{{name: c, resources: {{requests: {{cpu: 500m}}}}}}]}}}}
"""
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prober(threading.Thread):
    """GET /status every quarter second: (when, HTTP status or error, seconds, document)."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.done, self.probes, self.last = port, threading.Event(), [], {}

    def run(self) -> None:
        while not self.done.wait(0.25):
            began = time.monotonic()
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                connection.request("GET", "/status")
                reply = connection.getresponse()
                body = reply.read()
                connection.close()
                self.probes.append((began, reply.status, time.monotonic() - began))
                doc = json.loads(body)
                if "nodes" in doc:
                    self.last = doc
            except OSError as exc:
                self.probes.append((began, type(exc).__name__, time.monotonic() - began))


def until(predicate, seconds: float) -> float | None:
    """Seconds until ``predicate()`` held, or None if it did not within ``seconds``."""
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        if predicate():
            return time.monotonic() - began
        time.sleep(0.25)
    return None


def all_bound(prober: Prober) -> bool:
    doc = prober.last
    return bool(doc) and not doc["pods"]["waiting"] and sum(len(n["pods"]) for n in doc["nodes"] if n["state"] != "terminated") == PODS


def run(down: float) -> dict[str, object]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
    ec2_port, status_port = free_port(), free_port()
    server = moto_server(ec2_port)
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{ec2_port}", aws_access_key_id="x", aws_secret_access_key="x")
    work = Path(tempfile.mkdtemp(prefix="nm-outage-"))
    warm = 15.0  # seconds after the start the endpoint goes down
    (work / "workload.yaml").write_text(WORKLOAD.format(late=warm + min(5.0, down / 2)))
    (work / "provider.yaml").write_text(CONFIG.format(ec2_port=ec2_port, status_port=status_port, workload=work / "workload.yaml"))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **CREDENTIALS}
    log_path = work / "service.log"
    with log_path.open("w") as log_file:
        service = subprocess.Popen([sys.executable, "-m", "nodemanager.cli", "run", "--config", str(work / "provider.yaml")], env=env, stderr=log_file)
    prober = Prober(status_port)
    marks: dict[str, int] = {}
    result: dict[str, object] = {"down_seconds": down}
    try:
        started = time.monotonic()
        until(lambda: _answers(status_port), 30)
        prober.start()
        time.sleep(max(0.0, warm - (time.monotonic() - started)))
        result["bound_before_outage"] = all_bound(prober) or sum(len(n["pods"]) for n in prober.last.get("nodes", []))
        marks["outage"] = _lines(log_path)
        server.stop()
        outage_began = time.monotonic()
        time.sleep(down)
        server = moto_server(ec2_port)  # the same state: moto keeps it in this process
        returned = time.monotonic()
        marks["returned"] = _lines(log_path)
        result["outage_probes"] = _probe_figures([p for p in prober.probes if outage_began <= p[0] < returned])
        result["converged_after_return_s"] = _round(until(lambda: all_bound(prober), 60))
        result["instances_after_outage"] = _check(ec2)
        marks["reset"] = _lines(log_path)
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{ec2_port}/moto-api/reset", method="POST"), timeout=10).read()
        reset_at = time.monotonic()
        most_records = 0

        def settled_again() -> bool:
            nonlocal most_records
            most_records = max(most_records, len(prober.last.get("nodes", [])))
            return all_bound(prober) and len(_live(ec2)) == PODS

        result["converged_after_reset_s"] = _round(until(settled_again, 120))
        result["reset_probes"] = _probe_figures([p for p in prober.probes if p[0] >= reset_at])
        result["most_node_records"] = most_records
        result["instances_after_reset"] = _check(ec2)
    finally:
        prober.done.set()
        service.send_signal(signal.SIGTERM)
        try:
            result["exit_status"] = service.wait(timeout=20)
        except subprocess.TimeoutExpired:
            service.kill()
            result["exit_status"] = "killed"
        server.stop()
    lines = log_path.read_text().splitlines()
    phases = {"before": lines[: marks.get("outage", 0)], "outage": lines[marks.get("outage", 0) : marks.get("returned", 0)]}
    phases["reset"] = lines[marks.get("reset", len(lines)) :]
    result["log"] = {phase: _log_figures(text) for phase, text in phases.items()}
    result["tracebacks"] = sum("Traceback" in line for line in lines)
    return result


def moto_server(port: int) -> ThreadedMotoServer:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    with contextlib.redirect_stdout(sys.stderr):  # it announces itself on stdout, where the figures go
        server.start()
    return server


def _answers(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1).read()
        return True
    except OSError:
        return False


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _probe_figures(probes: list[tuple[float, object, float]]) -> dict[str, object]:
    latencies = [seconds for _, status, seconds in probes if status == 200]
    return {
        "probes": len(probes),
        "answers": dict(Counter(str(status) for _, status, _ in probes)),
        "latency_seconds": {q: round(percentile(latencies, p), 4) for q, p in (("p50", 50), ("p99", 99), ("max", 100))} if latencies else None,
    }


def _log_figures(lines: list[str]) -> dict[str, object]:
    warnings = [line for line in lines if " WARNING " in line or " ERROR " in line]
    return {
        "lines": len(lines),
        "warnings": len(warnings),
        "unreachable": sum("unreachable" in line for line in warnings),
        "boot_failures": sum("boot failed" in line or "boot of" in line for line in warnings),
        "booting": sum("booting " in line for line in lines),
    }


def _live(ec2) -> list[dict]:
    ours = [{"Name": f"tag:{CONTROLLER_TAG}", "Values": ["outage"]}, {"Name": "instance-state-name", "Values": ["pending", "running"]}]
    reply = ec2.describe_instances(Filters=ours)
    return [i for r in reply["Reservations"] for i in r["Instances"]]


def _check(ec2) -> dict[str, object]:
    """From the endpoint: live instances of ours, and whether any node name has two."""
    names = Counter(next(t["Value"] for t in i["Tags"] if t["Key"] == NODE_TAG) for i in _live(ec2))
    return {"live": sum(names.values()), "names_launched_twice": sorted(n for n, k in names.items() if k > 1)}


def verify(result: dict[str, object]) -> list[str]:
    """What the run claims, checked: every probe answered fast, the pool converged, nothing
    leaked or doubled, a line per pass rather than per retry, no traceback."""
    problems = []
    for phase in ("outage_probes", "reset_probes"):
        figures = result[phase]
        assert isinstance(figures, dict)
        if set(figures["answers"]) != {"200"}:
            problems.append(f"{phase}: not every probe answered 200: {figures['answers']}")
        elif figures["latency_seconds"]["max"] > 0.1:
            problems.append(f"{phase}: a probe took {figures['latency_seconds']['max']}s (over 100 ms)")
    for key in ("instances_after_outage", "instances_after_reset"):
        figures = result[key]
        assert isinstance(figures, dict)
        if figures["live"] != PODS or figures["names_launched_twice"]:
            problems.append(f"{key}: {figures}")
    for key in ("converged_after_return_s", "converged_after_reset_s"):
        if result[key] is None:
            problems.append(f"{key}: the pool did not converge")
    if result["tracebacks"]:
        problems.append(f"{result['tracebacks']} traceback(s) in the log")
    if result["exit_status"] != 0:
        problems.append(f"exit status {result['exit_status']} after SIGTERM")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--down", type=float, default=60.0, help="seconds the endpoint is down")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.down)
    result["problems"] = verify(result)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
