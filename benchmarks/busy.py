"""Busy-cluster benchmark: one decision for new pods on a cluster that is already running.

    python benchmarks/busy.py [--nodes 1500] [--pods 40000] [--new 2000] [--mix] [--json]

``--nodes`` Ready m6i.2xlarge nodes (bundled us-east-1 catalog) hold ``--pods`` running pods
of web and app shapes, spread evenly (about two thirds of each node's CPU). ``--new`` pods of the
``mixed`` scaler benchmark's shapes wait; without ``--mix`` they all fit on the existing
nodes, with ``--mix`` half of them need new nodes (they ask for more memory than any
existing node has free). Timed: one ``compute``. Checked independently: every new pod is
bound once, to an existing node or to a node the decision boots, and no node ends over
its allocatable.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import disruption
from scaler import mixed_pods

from nodemanager.config.blocks import MAX_BOOTS
from nodemanager.config.schema import NodeDefaults, Pool
from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, ScalerSettings

GI = 2**30
RUNNING = [(200, 512 * 2**20), (300, 1 * GI), (100, 256 * 2**20)]  # 40,000 of them fill about two thirds of 1,500 nodes
FITS_CPU = 2000  # milli-cpu every node has free besides them (the mixed shapes' largest class asks for up to 6000)


def run(nodes: int, pods: int, new: int, mix: bool, seed: int) -> dict[str, object]:
    catalog, running = disruption.cluster(nodes, pods, seed, RUNNING)
    rng = random.Random(seed + 1)
    shapes = mixed_pods(new, rng)
    # With --mix, half of them too big in memory for what any node has left; without, all of
    # them fit existing nodes (none asks for more CPU than every node has left).
    shapes = [(c, m if i % 2 else 24 * GI) for i, (c, m) in enumerate(shapes)] if mix else [(min(c, FITS_CPU), m) for c, m in shapes]
    waiting = [Pod("bench", f"new{i}", f"n{i}", Resources({"cpu": c, "memory": m}), created_at=float(i)) for i, (c, m) in enumerate(shapes)]
    pool = Pool(name="general", instance_types=["m6i.*", "c6i.*", "r6i.*"], capacity_types=[CapacityType.ON_DEMAND])

    def scaler() -> BindingNodeScaler:
        return BindingNodeScaler(ScalerSettings((pool,), NodeDefaults(default_instance_type=disruption.NODE_TYPE, max_boots_per_loop=MAX_BOOTS)), catalog)

    snapshot = ClusterSnapshot(tuple(running.pods) + tuple(waiting), running.nodes)
    cold = scaler()
    started = time.perf_counter()
    decision = cold.compute(snapshot, 0.0)
    seconds = time.perf_counter() - started
    # A running service decided on this cluster in its last loop, before the new pods came:
    # what it knows of each node is kept, as in ``nodemanager run``.
    steady = scaler()
    steady.compute(ClusterSnapshot(tuple(running.pods), running.nodes), 0.0)
    started = time.perf_counter()
    steady_decision = steady.compute(snapshot, 0.0)
    steady_seconds = time.perf_counter() - started
    checks = [check(catalog, running, waiting, d) for d in (decision, steady_decision)]
    return {
        "nodes": nodes,
        "running_pods": pods,
        "new_pods": new,
        "mix": mix,
        "seconds": round(seconds, 3),
        "steady_seconds": round(steady_seconds, 3),
        **checks[0],
        "unplaced": max(c["unplaced"] for c in checks),
        "overfull_nodes": max(c["overfull_nodes"] for c in checks),
    }


def check(catalog: object, running: object, waiting: list[Pod], decision: object) -> dict[str, int]:
    """Independently of the scaler: every new pod bound once, to a node that exists or that
    the decision boots, and no node over its allocatable."""
    capacity = {n.name: n.allocatable for n in running.nodes} | {s.name: catalog[s.instance_type].allocatable for s in decision.start}
    load: dict[str, Resources] = defaultdict(Resources)
    for pod in running.pods:
        load[pod.node_name] = load[pod.node_name] + pod.requests
    unplaced = 0
    for pod in waiting:
        target = decision.bindings.get(pod.key)
        if target not in capacity:
            unplaced += 1
            continue
        load[target] = load[target] + pod.requests
    overfull = sum(1 for name, used in load.items() if not used.fits(capacity[name]))
    existing = {n.name for n in running.nodes}
    on_existing = sum(1 for p in waiting if decision.bindings.get(p.key) in existing)
    return {"on_existing_nodes": on_existing, "new_nodes": len(decision.start), "unplaced": unplaced, "overfull_nodes": overfull}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1500)
    parser.add_argument("--pods", type=int, default=40_000)
    parser.add_argument("--new", type=int, default=2000)
    parser.add_argument("--mix", action="store_true")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.nodes, args.pods, args.new, args.mix, args.seed)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
