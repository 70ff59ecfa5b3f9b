"""``PodsByNode``: a cluster's live pods split into those waiting and those on each node.

Every computation starts by grouping the cluster's pods by node, and the disruption pass
weighs each candidate by the pods it holds. The cache keeps its pods grouped as they change,
each node's tuple the same object while that node's pods are, so a computation tells the
nodes that changed from the rest at a glance (see ``NodePictures``) and nobody walks every
pod to find a node's. A snapshot made by hand is grouped when first asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter

from nodemanager.model.pod import Pod
from nodemanager.model.since import Since

_KEY = attrgetter("key")
_OF_NODE = attrgetter("of_node")


@dataclass(frozen=True, eq=False)
class PodsByNode:
    pods: tuple[Pod, ...]  # what was grouped: a grouping stands for these very pods (by identity), no others
    waiting: tuple[Pod, ...]  # not on a node, in the order of ``pods``
    placed: Mapping[str, tuple[Pod, ...]]  # node -> its pods (DaemonSet and mirror pods too), in key order
    since: Since[tuple[Pod, ...]] | None = None  # what changed in ``placed`` from the grouping before, where its maker knows

    @classmethod
    def of(cls, pods: tuple[Pod, ...]) -> PodsByNode:
        """``pods`` grouped; pods that finished (Succeeded, Failed) are in neither part."""
        waiting: list[Pod] = []
        placed: dict[str, list[Pod]] = {}
        for pod in pods:
            if pod.is_terminal:
                continue
            if pod.node_name:
                placed.setdefault(pod.node_name, []).append(pod)
            else:
                waiting.append(pod)
        return cls(pods, tuple(waiting), {name: tuple(sorted(on, key=_KEY)) for name, on in placed.items()})

    def on(self, node: str) -> tuple[Pod, ...]:
        return self.placed.get(node, ())

    def held(self, node: str) -> tuple[Pod, ...]:
        """The pods ``node`` is there for: not its DaemonSet and mirror pods (its pods'
        tuple itself where it has none of those, as most nodes: told in C)."""
        on = self.placed.get(node, ())
        return tuple(p for p in on if not p.of_node) if any(map(_OF_NODE, on)) else on
