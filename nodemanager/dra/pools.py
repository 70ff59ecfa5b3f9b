"""Gathering a node's device pools from resource slices (v0.32 rules)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from nodemanager.dra.model import ResourceSlice
from nodemanager.errors import NodeManagerError
from nodemanager.model.selectors import terms_match


class AllocationError(NodeManagerError):
    """Invalid input to the allocator: fatal, the scheduler should not try other nodes."""


@dataclass
class DevicePool:
    driver: str
    name: str
    generation: int
    slices: list[ResourceSlice] = field(default_factory=list)

    @property
    def invalid(self) -> str:
        """Why the pool cannot be used ("" if it can): a device name twice in its slices."""
        seen: set[str] = set()
        for s in self.slices:
            for d in s.devices:
                if d.name in seen:
                    return f"duplicate device name {d.name}"
                seen.add(d.name)
        return ""

    @property
    def incomplete(self) -> bool:
        """Not every slice of the pool's generation has been seen (it is being updated)."""
        return len(self.slices) != self.slices[0].slice_count


def gather_pools(slices: Iterable[ResourceSlice], node_name: str, node_labels: Mapping[str, str]) -> list[DevicePool]:
    """The pools whose slices serve ``node_name``: the newest generation of each (driver, pool)."""
    pools: dict[tuple[str, str], DevicePool] = {}
    for s in slices:
        if s.node_name:
            if s.node_name != node_name:
                continue
        elif s.all_nodes:
            pass
        elif s.selector_error:
            raise AllocationError(f"resource slice {s.name}: invalid node selector: {s.selector_error}")
        elif s.node_selector is not None:
            if not terms_match(s.node_selector, node_labels, node_name) or not s.node_selector:
                continue
        else:
            continue  # a kind of slice this allocator does not know
        key = (s.driver, s.pool)
        pool = pools.get(key)
        if pool is None or s.generation > pool.generation:
            pools[key] = DevicePool(s.driver, s.pool, s.generation, [s])  # newer: replaces (no duplicate, v0.32)
        elif s.generation == pool.generation:
            pool.slices.append(s)
    return [pools[k] for k in sorted(pools)]
