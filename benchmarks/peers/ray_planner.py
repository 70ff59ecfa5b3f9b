"""Ray's autoscaler planner on one problem, for ``benchmarks/scaler.py --ray PYTHON``.

Run by a Python that has ``ray`` installed (it is not one of nodemanager's dependencies):
reads a problem as JSON on stdin, ``{"node_types": {name: {"resources": {...},
"max_workers": n}}, "demands": [{...}, ...]}``, and asks Ray's resource demand scheduler
which nodes to add for the demands (``get_nodes_for`` with its default utilization scorer,
as the autoscaler's ``ResourceDemandScheduler`` asks it when no nodes exist yet). Prints
the seconds ``get_nodes_for`` took, the nodes by type, the demands Ray left unfulfilled, and
what Ray put on each node (it packs each node it adds with the demands still pending, in
``get_bin_pack_residual``, watched here), so a verifier can check the plan.
Ray does not know prices: it picks, node by node, the type its scorer says the pending
demands would use best.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections import Counter

import ray
from ray.autoscaler._private import resource_demand_scheduler as planner
from ray.autoscaler._private.node_provider_availability_tracker import NodeAvailabilitySummary


def main() -> int:
    problem = json.load(sys.stdin)
    demands, node_types = problem["demands"], problem["node_types"]
    type_of = {id(t["resources"]): name for name, t in node_types.items()}
    fills = []  # (type, [(demand, count), ...]) per node Ray added, in order
    packer = planner.get_bin_pack_residual

    def watched(nodes: list, pending: list, strict_spread: bool = False) -> tuple:
        residual, left = packer(nodes, pending, strict_spread)
        placed = Counter(map(_key, pending)) - Counter(map(_key, residual))
        fills.append((type_of[id(nodes[0])], [[dict(k), n] for k, n in placed.items()]))
        return residual, left

    planner.get_bin_pack_residual = watched
    scorer = functools.partial(planner._default_utilization_scorer, node_availability_summary=NodeAvailabilitySummary(node_availabilities={}))
    started = time.perf_counter()
    nodes, residual = planner.get_nodes_for(node_types, {}, "", len(demands), demands, scorer)
    seconds = time.perf_counter() - started  # (watching costs a count of each node's pods: included, a little against Ray)
    out = {"ray": ray.__version__, "seconds": seconds, "nodes": dict(nodes), "unfulfilled": len(residual), "fills": fills}
    print(json.dumps(out))
    return 0


def _key(demand: dict) -> tuple:
    return tuple(sorted(demand.items()))


if __name__ == "__main__":
    sys.exit(main())
