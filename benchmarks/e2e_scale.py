"""Scale on a real API server: nodemanager over the real control plane (``tests/e2e``), kwok
playing the kubelets, a Deployment of ``--pods`` pending pods, until every pod runs. The
controller's loops run once a second (as ``loops.pool: 1s`` would).

With ``--existing-nodes``, the Deployment comes as a burst on a busy cluster: that many
m5.xlarge nodes nodemanager booted earlier (it adopts them from their tags), already running
``--existing-pods`` pods between them (bound by name, 170m CPU and 512Mi each: about two
burst pods' room left on each node), and the burst's pods fill that room and new nodes.

Reports the time from each pod's creation to its bind (p50, p99, max; from the pods'
``PodScheduled`` conditions, as the API server recorded them), the wall time until all
ran, the nodes booted, nodemanager's API request rate while scaling and once settled
(counted at its HTTP client), the process's peak memory (resident; with ``--heap``, the Python
heap as tracemalloc counts it, which slows every pass two to three times) and ``/status``
latency meanwhile. An independent check then reads every pod and Node back from the API
server: every pod Running on a Node that exists, no Node's pods asking more than it has.

    python benchmarks/e2e_scale.py --version 1.37 --mode scheduler --pods 1000 --json
    python benchmarks/e2e_scale.py --existing-nodes 500 --existing-pods 10000 --pods 2000 --json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import resource
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests" / "e2e")]

from controlplane import ControlPlane  # noqa: E402
from kubernetes import client  # noqa: E402
from world import World, api_client, new_namespace  # noqa: E402

from cloud.base import BootRequest  # noqa: E402
from nodemanager.config import parse_config  # noqa: E402
from nodemanager.model import CapacityType  # noqa: E402
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


def busy(w: World, core: client.CoreV1Api, namespace: str, size: tuple[int, int], timeout: float) -> float:
    """``size``: so many Ready nodes of nodemanager's running so many pods (in ``namespace``,
    made here), nodemanager restarted over them; the seconds it took."""
    nodes, pods = size
    began = time.monotonic()
    zones = ("us-east-1a", "us-east-1b", "us-east-1c")
    for i in range(nodes):
        name = f"general-busy-{i:04d}"
        w.cloud.boot(BootRequest(name, "general", "m5.xlarge", CapacityType.ON_DEMAND, zones[i % 3], token=name, volume_bytes=0))
    deadline = time.monotonic() + timeout

    def ready() -> bool:
        w.registrar.step()
        return len(w.registrar.initialized) >= nodes

    while not ready():
        assert time.monotonic() < deadline, f"{len(w.registrar.initialized)} of {nodes} nodes Ready within {timeout} s"
        time.sleep(1.0)
    new_namespace(core, namespace)  # (pods made at once: it waits for the namespace's ServiceAccount)
    names = sorted(w.registrar.names.values())
    requests = {"cpu": "170m", "memory": "512Mi"}

    def create(i: int) -> None:
        spec = {"nodeName": names[i % len(names)], "containers": [{"name": "app", "image": "app:1", "resources": {"requests": requests}}]}
        core.create_namespaced_pod(namespace, {"metadata": {"name": f"busy-{i}", "labels": {"app": "busy"}}, "spec": spec})

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(create, range(pods)))
    w.restart()  # a new nodemanager: it adopts the nodes from their tags and lists the pods
    w.step()
    return time.monotonic() - began


def run(version: str, burst: Burst) -> dict[str, object]:
    """On a control plane of its own, stopped after."""
    plane = ControlPlane(version, Path(tempfile.mkdtemp(prefix="nodemanager-scale-")), scheduler=True).start()
    try:
        return measure(plane, burst)
    finally:
        plane.stop()


@dataclasses.dataclass(frozen=True)
class Burst:
    """What ``measure`` plays: ``pods`` pending pods (a Deployment), after ``existing_pods``
    running on ``existing_nodes`` (none: an empty cluster)."""

    mode: str
    pods: int
    timeout: float
    existing_nodes: int = 0
    existing_pods: int = 0
    heap: bool = False  # the Python heap's peak too (tracemalloc: slower passes)
    settle: float = 30.0  # seconds the steady request rate is counted over, after


def measure(plane: ControlPlane, burst: Burst) -> dict[str, object]:
    """The run on a started control plane, in namespaces of its own (deleted after, with what
    they hold, so that no pod of theirs waits for a later controller)."""
    root = Path(tempfile.mkdtemp(prefix="nodemanager-scale-"))
    config, catalog = parse_config(PROVIDER.format(mode=burst.mode), "provider.yaml", root)
    if burst.heap:
        tracemalloc.start()
    w = World(plane, config, catalog)
    core = client.CoreV1Api(api_client(plane))
    namespace, existing = f"scale-{uuid.uuid4().hex[:6]}", f"existing-{uuid.uuid4().hex[:6]}"
    try:
        setup = busy(w, core, existing, (burst.existing_nodes, burst.existing_pods), burst.timeout) if burst.existing_nodes else 0.0
        return {
            "version": plane.version,
            **_burst(w, core, namespace, burst),
            "existing": {"nodes": burst.existing_nodes, "pods": burst.existing_pods, "setup_seconds": round(setup, 1)},
        }
    finally:
        for made in (namespace, existing):  # Terminating at once: no new pod can be made in it
            with contextlib.suppress(client.ApiException):
                core.delete_namespace(made)
        w.close()


def _burst(w: World, core: client.CoreV1Api, namespace: str, burst: Burst) -> dict[str, object]:
    pods = burst.pods
    counted = _Counted(w.cluster.core.api_client)
    passes: list[float] = []
    w.controller.timers["pool"].observe = passes.append
    core.create_namespace({"metadata": {"name": namespace}})
    scheduler = "nodemanager" if burst.mode == "scheduler" else "default-scheduler"
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
    client.AppsV1Api(core.api_client).create_namespaced_deployment(namespace, body)
    done = w.run_until(all_running, burst.timeout, every=1.0)
    took = time.monotonic() - began
    scaling_requests, scaling_passes = counted.count, list(passes)
    before, settled_from = counted.count, time.monotonic()
    w.run_for(burst.settle, every=1.0)
    steady_rate = (counted.count - before) / (time.monotonic() - settled_from)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    waits = []
    for pod in core.list_namespaced_pod(namespace).items:
        scheduled = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled" and c.status == "True"), None)
        if scheduled is not None:
            waits.append((scheduled.last_transition_time - pod.metadata.creation_timestamp).total_seconds())
    problems = verify(core, namespace, pods)
    return {
        "mode": burst.mode,
        "pods": pods,
        "all_running": done,
        "seconds_to_all_running": round(took, 1),
        "bind_seconds": {"p50": _percentile(waits, 0.5), "p99": _percentile(waits, 0.99), "max": max(waits, default=0.0)},
        "nodes_booted": len(w.live_instances()) - burst.existing_nodes,
        "api_requests_per_second": {"scaling": round(scaling_requests / took, 1), "steady": round(steady_rate, 2)},
        "peak_rss_mib": round(rss_mib, 1),
        **({"peak_python_heap_mib": round(peak / 2**20, 1)} if burst.heap else {}),
        "pool_pass_ms": {"p50": round(1000 * statistics.median(scaling_passes), 1), "max": round(1000 * max(scaling_passes), 1)},
        "status_ms": {"p50": round(statistics.median(status_ms), 1), "max": round(max(status_ms), 1)},
        "verified": not problems,
        "problems": problems[:10],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="1.37")
    parser.add_argument("--mode", choices=["scheduler", "provisioner"], default="scheduler")
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--existing-nodes", type=int, default=0, help="a busy cluster first: this many nodes (default: none)")
    parser.add_argument("--existing-pods", type=int, default=0, help="running this many pods between them")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--heap", action="store_true", help="also the peak Python heap (tracemalloc: every pass two to three times slower)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    burst = Burst(args.mode, args.pods, args.timeout, args.existing_nodes, args.existing_pods, args.heap)
    report = run(args.version, burst)
    print(json.dumps(report, indent=None if args.json else 2))
    return 0 if report["verified"] and report["all_running"] else 1


if __name__ == "__main__":
    sys.exit(main())
