"""``OpenNodes``: the nodes a computation decided to boot that still have room, by zone and
by free CPU and memory, so a class of pods looks only at nodes that could take it.

Filling the nodes already planned is what keeps a mixed workload cheap (a node opened for
one group takes the pods of the next), but scanning every planned node for every class
costs pods × nodes. Here a class visits, in its zone (or every zone), only the nodes with
at least its CPU and memory free: those of the pool tried first (highest weight) first,
then the tightest CPU first (best fit). Nodes left without room for the smallest pod
waiting are dropped for good.
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
        self._keys: dict[tuple[int, str], list[tuple[int, str]]] = {}  # (pool rank, zone) -> sorted (free cpu, name)
        self._memory_keys: dict[tuple[int, str], list[tuple[int, str]]] = {}  # the same by free memory
        self._at: dict[str, tuple[int, str]] = {}  # name -> its key
        self._infos: dict[str, NodeInfo] = {}
        self._free_memory: dict[str, int] = {}
        self._moved: dict[str, NodeInfo] = {}  # updated since the last look: placed again then
        self._wheres: dict[str, list[list[tuple[int, str]]]] = {}  # zone ("" any) -> its (pool rank, zone) lists by rank, in order

    def __len__(self) -> int:
        self._settle()
        return len(self._infos)

    def _free_cpu(self, info: NodeInfo) -> int:
        return info.allocatable.cpu - info.requested.cpu

    def update(self, info: NodeInfo) -> None:
        """Add ``info`` or move it after its pods changed (dropped once it has no room)."""
        self._moved[info.name] = info

    def _settle(self) -> None:
        for info in self._moved.values():
            self._place(info)
        self._moved.clear()

    def _place(self, info: NodeInfo) -> None:
        self._drop(info.name)
        if not info.fit_count(self.smallest, 1):
            return
        key = (self._free_cpu(info), info.name)
        where = self._list_of(info)
        if where not in self._keys:
            self._keys[where] = []
            self._wheres.clear()
        bisect.insort(self._keys[where], key)
        self._at[info.name] = key
        self._infos[info.name] = info
        self._free_memory[info.name] = info.allocatable.memory - info.requested.memory
        bisect.insort(self._memory_keys.setdefault(where, []), (self._free_memory[info.name], info.name))

    def remove(self, name: str) -> None:
        self._moved.pop(name, None)
        self._drop(name)

    def _drop(self, name: str) -> None:
        key = self._at.pop(name, None)
        if key is None:
            return
        info = self._infos.pop(name)
        where = self._list_of(info)
        memory_keys = self._memory_keys[where]
        del memory_keys[bisect.bisect_left(memory_keys, (self._free_memory.pop(name), name))]
        keys = self._keys[where]
        del keys[bisect.bisect_left(keys, key)]

    def _list_of(self, info: NodeInfo) -> tuple[int, str]:
        return (self.pool_rank.get(info.pool, len(self.pool_rank)), info.zone)

    def for_request(self, cpu: int, memory: int, zone: str = "") -> Iterator[NodeInfo]:
        """Nodes (of ``zone``, or every zone) with at least ``cpu`` and ``memory`` free, least
        CPU free first. A snapshot: placing pods while iterating is safe."""
        self._settle()
        infos, free_memory, at = self._infos, self._free_memory, self._at
        for wheres in self._by_rank(zone):
            # Where few nodes have the memory (it is the scarce resource), take just those,
            # in CPU order: the walk in CPU order would step past every node short of it.
            roomy = [self._memory_keys[w][bisect.bisect_left(self._memory_keys[w], (memory, "")) :] for w in wheres]
            if sum(map(len, roomy)) * 4 < sum(len(self._keys[w]) for w in wheres):
                for _, name in sorted(at[name] for tail in roomy for _, name in tail if at[name][0] >= cpu):
                    if name in infos:
                        yield infos[name]
                continue
            for _, name in heapq.merge(*(keys[bisect.bisect_left(keys, (cpu, "")) :] for keys in (self._keys[w] for w in wheres))):
                if free_memory.get(name, -1) >= memory:
                    yield infos[name]

    def _by_rank(self, zone: str) -> list[list[tuple[int, str]]]:
        """The (pool rank, zone) lists of ``zone`` (or every zone), by pool rank in order: the
        same until a node opens in a new one."""
        found = self._wheres.get(zone)
        if found is None:
            ranks: dict[int, list[tuple[int, str]]] = {}
            for w in sorted(self._keys):
                if not zone or w[1] == zone:
                    ranks.setdefault(w[0], []).append(w)
            found = self._wheres[zone] = list(ranks.values())
        return found
