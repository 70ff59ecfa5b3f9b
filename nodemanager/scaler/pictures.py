"""``NodePictures``: each existing node as a computation starts from it, kept between
computations.

Every computation begins with a picture of each live node: its labels, taints and
allocatable (less the DaemonSet pods that will run there but do not yet), and the pods
placed on it with their requests summed. On a cluster of hundreds of nodes that picture
was most of a decision's work, and the disruption controller asks many what-ifs of the
same cluster. Between computations most nodes are unchanged: the same node record and the
same pod objects. Such a node's picture is lent as it is, not copied: a computation
changes only the few it places pods on, and names them to ``spoiled`` when it ends, so
those are brought up to date for the next (a copy of every node for every computation was
a tenth of a busy decision, with freeing them). A picture whose pods changed by a few is
brought up to date by those few, not built again from all its pods. The pods a computation
placed on a picture whose own pods are unchanged stay on it until the next computation
settles them: it keeps those that are exactly the pods still waiting for that node, which it
would place there again (``existing.keep_placed``), and takes the others off. Pods are compared by
identity (they are immutable: a change makes a new object); node records by what a picture
is made of (a change a picture does not read, such as Ready to Claimed, makes a new record).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Sequence

from cloud.catalog import Catalog
from nodemanager.model import Node, NodeState, Pod
from nodemanager.model.daemonset import daemon_overhead
from nodemanager.model.pod import as_regular
from nodemanager.scaler.pools import PoolView, node_node_info
from nodemanager.scheduling.nodeinfo import NodeInfo


class NodePictures:
    def __init__(self, catalog: Catalog, volume_bytes: int, daemon_sets: tuple, *, regular: bool = False) -> None:
        self.catalog = catalog
        self.volume_bytes = volume_bytes
        self.daemon_sets = daemon_sets  # the DaemonSets every picture allows for
        self.regular = regular  # batch pods' requests count as cpu and memory (no pool offers batch resources)
        # node name -> (the record, its pool's view, its pods, the picture, the picture without
        # pods): a node whose pods changed but not its record is pictured from the last, brought
        # up to date, or from a copy of the bare one (its labels, taints and allocatable stand).
        self._kept: dict[str, tuple[Node, PoolView | None, tuple[Pod, ...], NodeInfo, NodeInfo]] = {}
        self._spoiled: set[str] = set()  # nodes whose kept picture a computation changed
        # node -> the pods a computation placed on its picture, still on it, after its own
        # (which are unchanged): the computation now asking keeps or takes them off
        # (``settle``) before it looks at the picture.
        self.placed: dict[str, tuple[Pod, ...]] = {}

    def info(self, node: Node, view: PoolView | None, pods: Sequence[Pod]) -> NodeInfo:
        """A picture of ``node`` holding ``pods`` (in key order; the same tuple as last time
        when they are the same, as the cache gives them). Lent: a computation that changes
        it must name it to ``spoiled`` before the next computation starts."""
        kept = self._kept.get(node.name)
        if kept is not None and kept[1] is view and (kept[0] is node or _same_node(kept[0], node)):  # (identity first: no call)
            info = kept[3]
            if kept[2] is pods or _same_pods(kept[2], pods):
                if node.name not in self._spoiled:
                    return info
                placed = _placed_after(info, pods)  # (its own pods the very objects given: else brought up to them)
                if placed is not None:
                    if kept[2] is not pods:
                        self._kept[node.name] = (node, view, tuple(pods), info, kept[4])
                    if placed:
                        self.placed[node.name] = placed  # (still spoiled until settled)
                    else:
                        self._spoiled.discard(node.name)
                    return info
            if self._brought_up_to(info, pods):
                self._spoiled.discard(node.name)
                self._kept[node.name] = (node, view, tuple(pods), info, kept[4])
                return info
            bare = kept[4]
        else:
            bare = node_node_info(node, view, self.catalog, self.volume_bytes)
        info = bare.clone()
        if pods:
            info.add_pods([as_regular(p) for p in pods] if self.regular and any(p.batch for p in pods) else pods)
        if self.daemon_sets:
            # DaemonSet pods that will run here but do not yet keep their room.
            present = frozenset(p.daemon_set for p in pods if p.daemon_set)
            info.set_allocatable(info.allocatable - daemon_overhead(self.daemon_sets, info.labels, info.taints, present))
        self._kept[node.name] = (node, view, tuple(pods), info, bare)
        self._spoiled.discard(node.name)
        return info

    def _brought_up_to(self, info: NodeInfo, pods: Sequence[Pod]) -> bool:
        """``info`` brought up to holding ``pods``, in place, by the pods that came or went
        (or changed), where those are few: a node's picture was built again from all its pods
        whenever one came or went, most of the pictures of a busy cluster's decision. Not
        where a DaemonSet pod came or went (the room kept for those not yet there changes)
        or batch pods' requests are counted as cpu and memory (they are copies)."""
        if self.regular and any(map(_BATCH, pods)):
            return False
        # (pods told by identity, in sets made in C: a node holds dozens)
        held = dict(zip(map(id, info.pods.values()), info.pods.values(), strict=True))
        now = dict(zip(map(id, pods), pods, strict=True))
        gone = [held[i] for i in held.keys() - now.keys()]
        came = [now[i] for i in now.keys() - held.keys()]
        if len(gone) + len(came) > len(pods) // 2 + 1 or any(p.daemon_set for p in gone) or any(p.daemon_set for p in came):
            return False
        for pod in gone:
            info.remove_pod(pod.key)
        for pod in came:  # (sums of integers: the order they are counted in does not matter)
            info.add_pod(pod)
        if came:
            info.pods = dict(zip(map(_KEY, pods), pods, strict=True))  # in the order a picture built again has them
        return True

    def spoiled(self, names: Iterable[str]) -> None:
        """The pictures a computation changed: each is brought up to date (or made again)
        when next asked for."""
        self._spoiled.update(name for name in names if name in self._kept)

    def spoiled_names(self) -> set[str]:
        """The nodes whose kept pictures a computation changed (``spoiled``), not yet
        brought up to date."""
        return set(self._spoiled)

    def settle(self, keep: Iterable[str] = ()) -> None:
        """The pods an earlier computation placed (``placed``) taken off every picture but
        those of ``keep``, whose stay on as the computation asking places them again."""
        keep = set(keep)
        for name, pods in self.placed.items():
            if name not in keep:
                info = self._kept[name][3]
                for pod in pods:
                    info.remove_pod(pod.key)
                self._spoiled.discard(name)
        self.placed = {}

    def forget_all_but(self, nodes: Sequence[Node]) -> None:
        """A computation begins: forget the nodes gone from the cluster, once they are many
        (each call is a pass over the nodes); placed pods an unfinished one left unsettled
        are found again."""
        self.placed = {}
        if len(self._kept) > 2 * len(nodes) + 16:
            names = {n.name for n in nodes}
            self._kept = {name: kept for name, kept in self._kept.items() if name in names}
            self._spoiled &= names


_BOOTING = (NodeState.CREATING, NodeState.CREATED)
_KEY = operator.attrgetter("key")
_BATCH = operator.attrgetter("batch")


def _placed_after(info: NodeInfo, pods: Sequence[Pod]) -> tuple[Pod, ...] | None:
    """The pods a computation placed on ``info``, which holds ``pods`` and then those (it
    adds pods after them and removes only pods it placed); None if it does not begin with
    ``pods`` (told in C: most of a busy cluster's changed pictures are those a computation
    placed pods on, their own pods unchanged)."""
    held = info.pods
    if len(held) < len(pods) or not all(map(operator.is_, held.values(), pods)):
        return None
    return tuple(itertools.islice(held.values(), len(pods), None))


def _same_node(a: Node, b: Node) -> bool:
    """Whether the two records make the same picture (every field ``node_node_info`` reads)."""
    return a is b or (
        a.name == b.name
        and a.pool == b.pool
        and a.instance_type == b.instance_type
        and a.capacity_type is b.capacity_type
        and a.zone == b.zone
        and a.allocatable == b.allocatable
        and a.labels == b.labels
        and a.taints == b.taints
        and a.unschedulable == b.unschedulable
        and (a.state in _BOOTING) == (b.state in _BOOTING)
    )


def _same_pods(a: tuple[Pod, ...], b: Sequence[Pod]) -> bool:
    """The very same pods in the same order (the same tuple, as the cache's mostly are; else
    told by identity in C: a pod equal to another but not it is brought up to, which makes
    the same picture, rather than compared field by field at every changed node)."""
    return a is b or (len(a) == len(b) and all(map(operator.is_, a, b)))
