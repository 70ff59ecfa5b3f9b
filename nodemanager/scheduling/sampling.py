"""How many feasible nodes kube-scheduler looks for before it stops filtering
(``numFeasibleNodesToFind`` with ``percentageOfNodesToScore`` unset: adaptive).

Below 100 nodes, all of them; above, 50% less one point per 125 nodes, at least 5%, and at
least 100 nodes. Each search starts where the last one stopped, so every node gets its turn.
"""

from __future__ import annotations

MIN_FEASIBLE_NODES = 100  # kube's minFeasibleNodesToFind
MIN_PERCENTAGE = 5  # kube's minFeasibleNodesPercentageToFind
BASE_PERCENTAGE = 50


def feasible_nodes_to_find(nodes: int) -> int:
    if nodes < MIN_FEASIBLE_NODES:
        return nodes
    percentage = max(BASE_PERCENTAGE - nodes // 125, MIN_PERCENTAGE)
    return max(nodes * percentage // 100, MIN_FEASIBLE_NODES)
