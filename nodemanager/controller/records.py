"""The controller's node records, indexed as they change.

A few loops look, every pass, only at the nodes in some states (booting, being removed) or
at the nodes holding bindings, and each bind asks which node holds the pod's binding. With
thousands of settled nodes, walking every record for them was a tenth of a busy simulation;
the records keep those names as they change instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from itertools import count
from typing import TypeVar

from nodemanager.model import Node, NodeState
from nodemanager.model.journal import Journal

_V = TypeVar("_V")
_STAMPS = count(1)  # one sequence for every instance: a stamp names one state of one set of records


class NodeRecords(dict[str, Node]):
    """Node records by name (a dict: reads cost what a dict's do), changed only by item
    assignment and ``del``, which keep the names in each state and those with bound pods."""

    def __init__(self) -> None:
        super().__init__()
        self._states: dict[NodeState, set[str]] = {state: set() for state in NodeState}
        self._bound: set[str] = set()
        self._binding: dict[str, set[str]] = {}  # pod key -> the records holding its binding (one, unless a decision erred)
        self._order: dict[str, int] = {}  # a record's place among the records (a dict's order)
        self._next = count()
        self.stamp = next(_STAMPS)  # new whenever a record is set or removed
        self.census = next(_STAMPS)  # new whenever a record comes, goes or changes its pool, state, type, capacity type, zone or allocatable
        self.changes = Journal()  # the names of the records set or removed

    def __setitem__(self, name: str, node: Node) -> None:
        old = self.get(name)
        if old is None:
            self._order[name] = next(self._next)
        else:
            self._states[old.state].discard(name)
        super().__setitem__(name, node)
        self.stamp = next(_STAMPS)
        self.changes.add(name)
        if old is None or _counted(old) != _counted(node):
            self.census = self.stamp
        self._states[node.state].add(name)
        if old is None or old.bound_pods is not node.bound_pods:
            if old is not None:
                self._unbind(name, old.bound_pods)
            for key in node.bound_pods:
                self._binding.setdefault(key, set()).add(name)
        if node.bound_pods:
            self._bound.add(name)
        else:
            self._bound.discard(name)

    def __delitem__(self, name: str) -> None:
        node = self[name]
        super().__delitem__(name)
        self.census = self.stamp = next(_STAMPS)
        self.changes.add(name)
        self._states[node.state].discard(name)
        self._bound.discard(name)
        self._unbind(name, node.bound_pods)
        del self._order[name]

    def _unbind(self, name: str, pods: Iterable[str]) -> None:
        for key in pods:
            holders = self._binding.get(key)
            if holders is not None:
                holders.discard(name)
                if not holders:
                    del self._binding[key]

    def _refuse(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("node records change by assignment and del only (they keep an index)")

    pop = popitem = clear = update = setdefault = __ior__ = _refuse  # type: ignore[assignment]

    def in_states(self, *states: NodeState) -> list[str]:
        """Names of the records in ``states``, in the records' order."""
        names: Iterable[str] = self._states[states[0]] if len(states) == 1 else set().union(*(self._states[s] for s in states))
        return sorted(names, key=self._order.__getitem__) if names else []  # (mostly none: loops ask at every pass)

    def names_in(self, state: NodeState) -> AbstractSet[str]:
        """The names of the records in ``state``, in no order (the index itself: read it
        before the records change again)."""
        return self._states[state]

    def pruned(self, kept: dict[str, _V]) -> dict[str, _V]:
        """``kept``, a memo by node name, without the names of records gone, once they may
        be many (past twice the records, and a few: each pruning is a pass over it)."""
        if len(kept) <= 2 * len(self) + 16:
            return kept
        return {name: entry for name, entry in kept.items() if name in self}

    def with_bindings(self) -> list[str]:
        """Names of the records holding bound pods, by name."""
        return sorted(self._bound)

    def binding_of(self, pod: str) -> str | None:
        """The record holding ``pod``'s binding (one at most; of more, the first by name)."""
        holders = self._binding.get(pod)
        return min(holders) if holders else None


def _counted(node: Node) -> tuple:
    """What the node counts, the fleet's cost and a simulation's utilization are made of."""
    return (node.pool, node.state, node.instance_type, node.capacity_type, node.zone, node.allocatable)
