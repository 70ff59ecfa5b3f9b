"""Simulation benchmark: N pod arrivals over a simulated day, played by ``simulate``.

    python benchmarks/simulate.py [--arrivals 10000] [--hours 24] [--json]
    python benchmarks/simulate.py --snapshot 9061 [--json]
    python benchmarks/simulate.py --arrivals 30000 --cell [--json]

Arrivals follow a day-shaped rate (quiet nights, a midday peak); each pod runs for an
exponentially distributed time (mean 20 minutes) and asks for one of the ``mixed``
scaler benchmark's shapes; a tenth (``--cell``: all) are spot-tolerant batch jobs in a cell
pool, where each pod takes a node of its own. The
target is the whole day in under a minute of wall time.

``--snapshot N``: N pods present at time 0, as a snapshot of a GPU cluster is (35% ask for
eight GPUs, 20% for one, the rest for CPU only), under the default configuration (one pool
of every instance type, ``maxBootsPerLoop: 10``). Checked independently, from the
simulated cluster itself: every pod is bound, and no node holds more than its allocatable.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nodemanager.cluster.workload import parse_workload
from nodemanager.config import parse_config
from nodemanager.model import Resources
from nodemanager.simulator import Simulation

CONFIG = """
controllerId: bench
cloud: {provider: simulated, simulated: {bootDelay: 40s, seed: 1}}
cluster: {source: simulated, simulated: {registerDelay: 20s}}
nodes: {maxBootsPerLoop: 20}
pools:
  - name: general
    instanceTypes: ["m6i.*", "c6i.*", "r6i.*", "m5.*", "c5.*", "r5.*"]
    capacityTypes: [on-demand]
    standby: [{instanceType: m6i.large, count: 1}]
  - name: batch
    packing: cell
    instanceTypes: ["c6i.*", "m6i.*"]
    capacityTypes: [spot, on-demand]
    labels: {workload: batch}
    taints: [{key: workload, value: batch, effect: NoSchedule}]
"""

SNAPSHOT_CONFIG = """
controllerId: snapshot
cloud: {provider: simulated}
cluster: {source: simulated}
pools:
  - name: general
"""

SHAPES = [("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("2", "4Gi"), ("1", "8Gi"), ("4", "8Gi")]


def workload(arrivals: int, hours: float, seed: int, cell: bool = False) -> str:
    rng = random.Random(seed)
    span = hours * 3600
    entries = []
    t = 0.0
    for i in range(arrivals):
        # a day-shaped rate: the gaps shrink around midday
        phase = math.sin(math.pi * (t % 86400) / 86400) + 0.3
        t += rng.expovariate(arrivals / span * phase / 0.93)
        t = min(t, span)
        cpu, memory = rng.choice(SHAPES)
        duration = max(30, int(rng.expovariate(1 / 1200)))
        batch = cell or rng.random() < 0.1
        spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
        if batch:
            spec |= {"nodeSelector": {"workload": "batch"}, "tolerations": [{"key": "workload", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]}
        entries.append({"name": f"p{i}", "at": round(t, 1), "duration": duration, "pod": {"spec": spec}})
    return json.dumps({"pods": entries})


def snapshot(pods: int, seed: int) -> str:
    rng = random.Random(seed)
    entries = []
    for i in range(pods):
        draw = rng.random()
        if draw < 0.35:
            requests = {"cpu": "32", "memory": "200Gi", "nvidia.com/gpu": "8"}
        elif draw < 0.55:
            requests = {"cpu": str(rng.choice([4, 8])), "memory": f"{rng.choice([16, 32, 64])}Gi", "nvidia.com/gpu": "1"}
        else:
            requests = {"cpu": f"{rng.choice([250, 500, 1000, 2000, 4000])}m", "memory": f"{rng.choice([512, 1024, 2048, 4096, 8192])}Mi"}
        limits = {k: v for k, v in requests.items() if k == "nvidia.com/gpu"}  # an extended resource needs its limit
        entries.append({"name": f"s{i}", "pod": {"spec": {"containers": [{"name": "c", "resources": {"requests": requests, "limits": limits}}]}}})
    return json.dumps({"pods": entries})


def verify(sim: Simulation) -> dict[str, int]:
    """From the simulated cluster: pods not bound, and nodes holding more than their allocatable."""
    load: dict[str, Resources] = defaultdict(Resources)
    for state in sim.cluster.pods.values():
        if state.pod.node_name:
            load[state.pod.node_name] = load[state.pod.node_name] + state.pod.requests
    allocatable = {name: node.allocatable for name, node in sim.controller.state.nodes.items()}
    unbound = sum(1 for state in sim.cluster.pods.values() if not state.pod.node_name and not state.pod.of_node)
    return {"unbound": unbound, "overfull_nodes": sum(1 for name, used in load.items() if name not in allocatable or not used.fits(allocatable[name]))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arrivals", type=int, default=10_000)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cell", action="store_true", help="every pod a batch job in the cell pool (a node of its own)")
    parser.add_argument("--snapshot", type=int, metavar="N", help="N pods present at time 0 (GPU-heavy), default configuration")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    config, catalog = parse_config(SNAPSHOT_CONFIG if args.snapshot else CONFIG, "benchmark", Path("."))
    text = snapshot(args.snapshot, args.seed) if args.snapshot else workload(args.arrivals, args.hours, args.seed, args.cell)
    sim = Simulation(config, catalog, parse_workload(text, "benchmark"), clairvoyant=False)
    started = time.perf_counter()
    report = sim.run()
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    clairvoyant = sim.clairvoyant_usd()
    packing = time.perf_counter() - started
    result = {
        **({"snapshot_pods": args.snapshot, **verify(sim)} if args.snapshot else {"arrivals": args.arrivals}),
        "simulated_hours": round(report["simulated_seconds"] / 3600, 2),
        "wall_seconds": round(seconds, 2),
        "pods_bound": report["pods"]["bound"],
        "pending_seconds": report["pods"]["pending_seconds"],
        "nodes_booted": report["nodes"]["booted"],
        "nodes_peak": report["nodes"]["peak"],
        "cost_usd": report["cost"]["usd"],
        "lower_bound_usd": report["cost"]["lower_bound_usd"],
        "clairvoyant_usd": round(clairvoyant, 4),
        "clairvoyant_seconds": round(packing, 2),
        "cost_breakdown": report["cost"]["breakdown"],
        "utilization": report["utilization"],
        "evicted": report["pods"]["evicted"],
        "decisions": report["decisions"],
    }
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
