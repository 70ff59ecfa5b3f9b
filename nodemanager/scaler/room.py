"""Existing nodes by the CPU they had free when a fill began, and by the GPUs (or other
extended resources) they have free.

Placing the waiting pods on existing nodes tried every class on every node: with 9,000
distinct pods waiting next to 360 full nodes, 3 million checks per decision. Free room only
shrinks while a fill goes on, so a node that lacked a pod's CPU when it began still lacks
it: a class is tried only on the nodes that had room for its CPU then, a superset of those
that can take it (the same nodes pass the filters, so the same are chosen), and on none if
no node had its memory free (as kube, a search that finds nothing leaves the next one
starting where it would have). A node of a ``cell`` pool that holds its pod has room for
none (``NodeInfo.cell_taken``). Once a search finds no node passing, a look at every node's
room now (``look_again``) lets the classes that none has room for skip the search
(``may_take``): on a busy cluster whose nodes have filled, most of them.
"""

from __future__ import annotations

from bisect import bisect_right
from operator import attrgetter

from nodemanager.model import Pod
from nodemanager.model.resources import asks_for_batch, extended
from nodemanager.scheduling import NodeInfo
from nodemanager.scheduling.nodeinfo import untaken

_FREE_CPU = attrgetter("free_cpu")
_FREE_MEMORY = attrgetter("free_memory")
_FREE_PODS = attrgetter("free_pods")


class RoomIndex:
    def __init__(self, nodes: list[NodeInfo]) -> None:
        nodes = untaken(nodes)
        self._all = nodes
        self._nodes = sorted(nodes, key=_FREE_CPU, reverse=True)  # most free CPU first (a reversed sort keeps ties as given)
        self._less_free = [-i.free_cpu for i in self._nodes]  # ascending: minus the free CPU
        self._most_memory = max(map(_FREE_MEMORY, nodes), default=0)
        self._having: dict[str, list[tuple[int, NodeInfo]]] = {}  # extended resource -> (place in _nodes, node) of those with some free
        self._most_free: tuple[int, int, int] | None = None  # the most CPU, memory and pod slots any node had free at the last look
        self._estimated = any(i.batch_estimate for i in nodes)  # some node's batch room is counted per pod: no look tells
        self._looked_after = -1  # Run.moves at the last look

    def _nodes_having(self, name: str) -> list[tuple[int, NodeInfo]]:
        """The nodes that had some of ``name`` free when the fill began, in ``_nodes`` order
        (on a GPU cluster most GPU nodes are full: far fewer than the nodes with CPU free)."""
        found = self._having.get(name)
        if found is None:
            found = self._having[name] = [(place, i) for place, i in enumerate(self._nodes) if i.allocatable.get(name) - i.requested.get(name) > 0]
        return found

    def with_room_for(self, pod: Pod) -> list[NodeInfo]:
        """The nodes that had the pod's CPU free, none if no node had its memory free (all of
        them for a pod asking for batch resources, whose CPU and memory a node counts its own
        way), and have the other resources it asks for (GPUs: a full GPU node has CPU to spare)."""
        requests = pod.requests
        if asks_for_batch(requests):
            return self._all
        cpu, memory = requests.cpu_memory()
        if memory > 0 and memory > self._most_memory:
            return []
        names = extended(requests)
        if cpu > 0 and names:
            end = bisect_right(self._less_free, -cpu)
            nodes = [i for place, i in self._nodes_having(names[0]) if place < end]
        else:
            nodes = self._nodes[: bisect_right(self._less_free, -cpu)] if cpu > 0 else self._all
        for name in names:  # what they have free now (a fill takes some as it goes)
            amount = requests.get(name)
            nodes = [i for i in nodes if i.allocatable.get(name) - i.requested.get(name) >= amount]
        return nodes

    def look_again(self, moves: int) -> None:
        """Note the most CPU, memory and pod slots any node has free now, unless no pod was
        placed or taken off since the last look (``moves``: ``Run.moves``); none where a node's
        batch capacity is an estimate: its room is counted per pod."""
        nodes = self._all
        if moves == self._looked_after or self._estimated:
            return
        self._looked_after = moves
        self._most_free = (max(map(_FREE_CPU, nodes), default=0), max(map(_FREE_MEMORY, nodes), default=0), max(map(_FREE_PODS, nodes), default=0))

    def may_take(self, pod: Pod) -> bool:
        """False when no node had the pod's CPU, memory (what it asks for of each) and a pod
        slot free at the last look: room only shrinks while a fill goes on."""
        most = self._most_free
        if most is None or asks_for_batch(pod.requests):
            return True
        cpu, memory = pod.requests.cpu_memory()
        return most[2] > 0 and cpu <= max(most[0], 0) and memory <= max(most[1], 0)
