"""Disruption benchmark: one consolidation pass over a busy cluster.

    python benchmarks/disruption.py [--nodes 1000] [--pods 10000] [--json]

A cluster of ``--nodes`` Ready m6i.xlarge nodes (bundled us-east-1 catalog) holding
``--pods`` pods of web and app shapes, spread evenly, so each node is about half full: consolidation has plenty to find. Timed: the planner's pass as the
disruption controller runs it (multi-node bisection over the candidates, cheapest to
disrupt first, then single nodes). Checked independently: every pod of the removed nodes
is bound by the what-if to a node that is not removed (or to a replacement), and no
node ends over its allocatable.
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

from cloud.catalog import Catalog
from nodemanager.config.blocks import MAX_BOOTS
from nodemanager.config.schema import NodeDefaults, Pool
from nodemanager.model import CapacityType, Node, NodeName, NodeState, Pod, PodPhase, Resources
from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, ScalerSettings
from nodemanager.scaler.consolidation import Planner

MI = 2**20
NODE_TYPE = "m6i.2xlarge"  # 8 vCPU: ten of these pods fill about 60% of its CPU
SHAPES = [(250, 512 * MI), (500, 1024 * MI), (250, 256 * MI), (1000, 2048 * MI)]


def cluster(nodes: int, pods: int, seed: int, shapes: list[tuple[int, int]] = SHAPES) -> tuple[Catalog, ClusterSnapshot]:
    catalog = Catalog.bundled()
    itype = catalog[NODE_TYPE]
    zones = sorted(itype.zones)
    infra = [
        Node(
            NodeName(f"n{i:04d}"), "general", NODE_TYPE, CapacityType.ON_DEMAND, zones[i % len(zones)], allocatable=itype.allocatable, state=NodeState.AVAILABLE
        )
        for i in range(nodes)
    ]
    rng = random.Random(seed)
    placed = []
    used = [Resources() for _ in infra]
    for i in range(pods):
        cpu, memory = rng.choice(shapes)
        requests = Resources({"cpu": cpu, "memory": memory})
        # round robin, on the next node with room: the cluster starts valid
        at = next(j % nodes for j in range(i, i + nodes) if (used[j % nodes] + requests).fits(itype.allocatable))
        used[at] = used[at] + requests
        placed.append(Pod("bench", f"p{i}", f"u{i}", requests, phase=PodPhase.RUNNING, node_name=infra[at].name))
    return catalog, ClusterSnapshot(tuple(placed), tuple(infra))


def verify(snapshot: ClusterSnapshot, removed: set[str], bindings: dict[str, str], capacity: dict[str, Resources]) -> int:
    """Pods of removed nodes left without a node that stays, plus pods on overfull nodes."""
    load: dict[str, Resources] = defaultdict(Resources)
    bad = 0
    for pod in snapshot.pods:
        target = bindings.get(pod.key) if pod.node_name in removed else pod.node_name
        if target is None or target in removed or target not in capacity:
            bad += 1
            continue
        load[target] = load[target] + pod.requests
    return bad + sum(1 for name, used in load.items() if not used.fits(capacity[name]))


def run(nodes: int, pods: int, seed: int) -> dict[str, object]:
    catalog, snapshot = cluster(nodes, pods, seed)
    pool = Pool(name="general", instance_types=["m6i.*", "c6i.*", "r6i.*"], capacity_types=[CapacityType.ON_DEMAND])
    scaler = BindingNodeScaler(ScalerSettings((pool,), NodeDefaults(default_instance_type=NODE_TYPE, max_boots_per_loop=MAX_BOOTS)), catalog)
    price = catalog[NODE_TYPE].price(CapacityType.ON_DEMAND, snapshot.nodes[0].zone) or 0.0
    planner = Planner(lambda what_if: scaler.compute(what_if, 0.0), lambda _node: price, lambda _node: 0)
    candidates = sorted(snapshot.nodes, key=lambda n: n.name)
    started = time.perf_counter()
    found, _ = planner.best(snapshot, candidates, 10)
    seconds = time.perf_counter() - started
    result: dict[str, object] = {"nodes": nodes, "pods": pods, "seconds": round(seconds, 3), "evaluations": planner.evaluations}
    if found is not None:
        again = scaler.compute(
            ClusterSnapshot(
                tuple(p if p.node_name not in found.nodes else Pod(p.namespace, p.name, p.uid, p.requests) for p in snapshot.pods),
                tuple(
                    Node(n.name, n.pool, n.instance_type, n.capacity_type, n.zone, n.allocatable, NodeState.TERMINATING) if n.name in found.nodes else n
                    for n in snapshot.nodes
                ),
            ),
            0.0,
        )
        result |= {
            "removed_nodes": len(found.nodes),
            "replacements": [r.instance_type for r in found.replacements],
            "pods_moved": found.pods,
            "savings_per_hour": round(found.savings, 4),
            "misplaced": verify(
                snapshot,
                set(found.nodes),
                dict(again.bindings),
                {**{n.name: n.allocatable for n in snapshot.nodes}, **{s.name: catalog[s.instance_type].allocatable for s in again.start}},
            ),
        }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.nodes, args.pods, args.seed)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
