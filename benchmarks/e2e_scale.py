"""Scale on a real API server: nodemanager over the real control plane (``tests/e2e``), kwok
playing the kubelets, a Deployment of ``--pods`` pending pods, until every pod runs.

Reports the time from each pod's creation to its bind (p50, p99, max; from the pods'
``PodScheduled`` conditions, as the API server recorded them), the wall time until all
ran, the nodes booted, nodemanager's API request rate while scaling and once settled
(counted at its HTTP client), its peak memory (the Python heap, tracemalloc) and ``/status``
latency meanwhile. An independent check then reads every pod and Node back from the API
server: every pod Running on a Node that exists, no Node's pods asking more than it has.

    python benchmarks/e2e_scale.py --version 1.37 --mode scheduler --pods 1000 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests" / "e2e")]

from controlplane import ControlPlane  # noqa: E402
from kubernetes import client  # noqa: E402
from world import World, api_client  # noqa: E402

from nodemanager.config import parse_config  # noqa: E402
from nodemanager.model.quantity import resource_amount  # noqa: E402

PROVIDER = """
apiVersion: nodemanager/v1
controllerId: scale
cluster: {{source: kubernetes, kubernetes: {{mode: {mode}}}}}
nodes: {{idleGrace: 60s, maxBootsPerLoop: 100}}
pools: [{{name: general, instanceTypes: ["m5.*", "c5.*"], zones: [us-east-1a, us-east-1b, us-east-1c]}}]
"""


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


class _Counted:
    """Counts the requests an ApiClient sends (nodemanager's, nobody else's)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.count = 0
        self._lock = threading.Lock()
        original = api.rest_client.request

        def request(*args, **kwargs):  # type: ignore[no-untyped-def]
            with self._lock:
                self.count += 1
            return original(*args, **kwargs)

        api.rest_client.request = request  # type: ignore[method-assign]


def verify(core: client.CoreV1Api, namespace: str, pods: int) -> list[str]:
    """Read back from the API server: what is wrong (nothing, when all is well)."""
    problems = []
    nodes = {n.metadata.name: n for n in core.list_node().items}
    asked: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    listed = core.list_pod_for_all_namespaces().items
    mine = [p for p in listed if p.metadata.namespace == namespace]
    if len(mine) != pods:
        problems.append(f"{len(mine)} pods, not {pods}")
    for pod in listed:
        if pod.spec.node_name:
            for c in pod.spec.containers:
                requests = (c.resources and c.resources.requests) or {}
                asked[pod.spec.node_name][0] += resource_amount("cpu", requests.get("cpu", "0"))
                asked[pod.spec.node_name][1] += resource_amount("memory", requests.get("memory", "0"))
    for pod in mine:
        if pod.status.phase != "Running" or pod.spec.node_name not in nodes:
            problems.append(f"{pod.metadata.name}: {pod.status.phase} on {pod.spec.node_name!r}")
    for name, (cpu, memory) in asked.items():
        node = nodes.get(name)
        if node is None:
            continue
        allocatable = node.status.allocatable
        if cpu > resource_amount("cpu", allocatable["cpu"]) or memory > resource_amount("memory", allocatable["memory"]):
            problems.append(f"node {name}: its pods ask {cpu}m and {memory} bytes, more than it has")
    return problems


def run(version: str, mode: str, pods: int, timeout: float) -> dict[str, object]:
    root = Path(tempfile.mkdtemp(prefix="nodemanager-scale-"))
    plane = ControlPlane(version, root, scheduler=True).start()
    try:
        config, catalog = parse_config(PROVIDER.format(mode=mode), "provider.yaml", root)
        tracemalloc.start()
        w = World(plane, config, catalog)
        counted = _Counted(w.cluster._api)
        namespace = "scale"
        admin = api_client(plane)
        core, apps = client.CoreV1Api(admin), client.AppsV1Api(admin)
        core.create_namespace({"metadata": {"name": namespace}})
        scheduler = "nodemanager" if mode == "scheduler" else "default-scheduler"
        spec = {
            "schedulerName": scheduler,
            "containers": [{"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}],
        }
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "scale"},
            "spec": {"replicas": pods, "selector": {"matchLabels": {"app": "scale"}}, "template": {"metadata": {"labels": {"app": "scale"}}, "spec": spec}},
        }
        status_ms: list[float] = []

        def all_running() -> bool:
            began = time.perf_counter()
            w.controller.status()
            status_ms.append((time.perf_counter() - began) * 1000)
            listed = core.list_namespaced_pod(namespace).items
            return len(listed) == pods and all(p.status.phase == "Running" for p in listed)

        began = time.monotonic()
        apps.create_namespaced_deployment(namespace, body)
        done = w.run_until(all_running, timeout, every=1.0)
        took = time.monotonic() - began
        scaling_requests = counted.count
        before, settled_from = counted.count, time.monotonic()
        w.run_for(30, every=1.0)
        steady_rate = (counted.count - before) / (time.monotonic() - settled_from)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        waits = []
        for pod in core.list_namespaced_pod(namespace).items:
            scheduled = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled" and c.status == "True"), None)
            if scheduled is not None:
                waits.append((scheduled.last_transition_time - pod.metadata.creation_timestamp).total_seconds())
        problems = verify(core, namespace, pods)
        report = {
            "version": version,
            "mode": mode,
            "pods": pods,
            "all_running": done,
            "seconds_to_all_running": round(took, 1),
            "bind_seconds": {"p50": _percentile(waits, 0.5), "p99": _percentile(waits, 0.99), "max": max(waits, default=0.0)},
            "nodes_booted": len(w.live_instances()),
            "api_requests_per_second": {"scaling": round(scaling_requests / took, 1), "steady": round(steady_rate, 2)},
            "peak_python_heap_mib": round(peak / 2**20, 1),
            "status_ms": {"p50": round(statistics.median(status_ms), 1), "max": round(max(status_ms), 1)},
            "verified": not problems,
            "problems": problems[:10],
        }
        w.close()
        return report
    finally:
        plane.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="1.37")
    parser.add_argument("--mode", choices=["scheduler", "provisioner"], default="scheduler")
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run(args.version, args.mode, args.pods, args.timeout)
    print(json.dumps(report, indent=None if args.json else 2))
    return 0 if report["verified"] and report["all_running"] else 1


if __name__ == "__main__":
    sys.exit(main())
