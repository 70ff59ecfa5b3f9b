"""``OpenNodes``: the nodes a computation decided to boot that still have room, by zone and
by free CPU and memory, so a class of pods looks only at nodes that could take it.

Filling the nodes already planned is what keeps a mixed workload cheap (a node opened for
one group takes the pods of the next), but scanning every planned node for every class
costs pods × nodes. Here a class visits, in its zone (or every zone), only the nodes with
at least its CPU and memory free: those of the pool tried first (highest weight) first,
then the tightest first (best fit) in the resource fewer nodes have enough of. Nodes left
without room for the smallest pod waiting are dropped for good.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator, Mapping

from nodemanager.model import Resources
from nodemanager.scheduling.nodeinfo import NodeInfo


class OpenNodes:
    def __init__(self, smallest: Resources, pool_rank: Mapping[str, int]) -> None:
        self.smallest = smallest  # component-wise least request waiting: less room is none
        self.pool_rank = pool_rank  # pools in the order pods try them
        # (pool rank, zone) -> sorted (free cpu, name) and sorted (free memory, name)
        self._by_cpu: dict[tuple[int, str], list[tuple[int, str]]] = {}
        self._by_memory: dict[tuple[int, str], list[tuple[int, str]]] = {}
        self._at: dict[str, tuple[tuple[int, str], tuple[int, str]]] = {}  # name -> its two keys
        self._infos: dict[str, NodeInfo] = {}

    def __len__(self) -> int:
        return len(self._infos)

    def update(self, info: NodeInfo) -> None:
        """Add ``info`` or move it after its pods changed (dropped once it has no room)."""
        self.remove(info.name)
        if not info.fit_count(self.smallest, 1):
            return
        free = info.allocatable - info.requested
        keys = ((free.cpu, info.name), (free.memory, info.name))
        where = self._list_of(info)
        bisect.insort(self._by_cpu.setdefault(where, []), keys[0])
        bisect.insort(self._by_memory.setdefault(where, []), keys[1])
        self._at[info.name] = keys
        self._infos[info.name] = info

    def remove(self, name: str) -> None:
        keys = self._at.pop(name, None)
        if keys is None:
            return
        where = self._list_of(self._infos.pop(name))
        for index, key in ((self._by_cpu[where], keys[0]), (self._by_memory[where], keys[1])):
            del index[bisect.bisect_left(index, key)]

    def _list_of(self, info: NodeInfo) -> tuple[int, str]:
        return (self.pool_rank.get(info.pool, len(self.pool_rank)), info.zone)

    def for_request(self, cpu: int, memory: int, zone: str = "") -> Iterator[NodeInfo]:
        """Nodes (of ``zone``, or every zone) with at least ``cpu`` and ``memory`` free, the
        tightest first in whichever resource fewer nodes have enough of (best fit on the
        scarce one, and no walk past nodes short of it). A snapshot: placing pods while
        iterating is safe."""
        infos, at = self._infos, self._at
        for rank in sorted({r for r, _ in self._by_cpu}):
            wheres = [w for w in self._by_cpu if w[0] == rank and (not zone or w[1] == zone)]
            tails = []
            for by, need in ((self._by_cpu, cpu), (self._by_memory, memory)):
                lists = [by[w] for w in wheres]
                tails.append([keys[bisect.bisect_left(keys, (need, "")) :] for keys in lists])
            cpu_tails, memory_tails = tails
            scan_memory = sum(map(len, memory_tails)) < sum(map(len, cpu_tails))
            other, need = (0, cpu) if scan_memory else (1, memory)
            for _, name in heapq.merge(*(memory_tails if scan_memory else cpu_tails)):
                keys = at.get(name)
                if keys is not None and keys[other][0] >= need:
                    yield infos[name]
