"""``LiveNodes``: the live nodes of the last computation's cluster with their pictures, by
name, followed from one computation to the next by what changed.

Every computation starts from every live node's picture (``NodePictures``), its state and
its zone. Asking ``NodePictures`` for each one was a walk of the whole cluster at every
decision: a fifth of a day of 100,000 one-node pods, where 2,000 nodes live and each
decision changes a few. A picture ``NodePictures`` would give again unchanged is one whose
node record, pods and pool view are the very objects of last time and that no computation
has changed since (not ``spoiled``): for those this keeps what it gave. Only the nodes
whose record or pods are new objects, or whose pictures were spoiled, are asked for again:
those their makers name (``Since``), else those found by comparing every entry.
The nodes that may take pods are also kept by readiness rank in name order, the order a
fill searches them in (``open``): those not ``cell_taken``, and those holding pods the last
computation placed there (settled before a fill: taken off, they may leave the node open).
A computation only adds pods to these pictures until its fills are done, and any picture it
changes is pictured again at the next follow: so a fill's open nodes are among these. On a
day of one-node pods, most of 2,000 live nodes hold their pod, and a fill looks at the few
that do not.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Mapping, Sequence

from nodemanager.model import LIVE_STATES, Node, NodeState, Pod
from nodemanager.scaler.pictures import NodePictures
from nodemanager.scaler.pools import PoolView
from nodemanager.scaler.snapshot import ClusterSnapshot
from nodemanager.scheduling.nodeinfo import NodeInfo

# The states of nodes that may take pods, by rank: Ready first (0), then booting.
READINESS = {NodeState.AVAILABLE: 0, NodeState.CLAIMED: 0, NodeState.CREATED: 1, NodeState.CREATING: 2}


class LiveNodes:
    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._pictures: NodePictures | None = None
        self._views: dict[str, PoolView] = {}
        self._nodes: Sequence[Node] = ()
        self._records: dict[str, Node] = {}  # every node of ``_nodes`` by name
        self._placed: Mapping[str, Sequence[Pod]] = {}
        self.infos: dict[str, NodeInfo] = {}  # live node name -> its picture (in no order)
        self.states: dict[str, NodeState] = {}
        self.open: dict[int, list[str]] = {rank: [] for rank in sorted(set(READINESS.values()))}  # rank -> its open nodes' names, sorted
        self._open_rank: dict[str, int] = {}  # an open node -> its rank
        self.zones: Counter[str] = Counter()  # live nodes per zone
        self.binding: dict[str, Node] = {}  # the live nodes an earlier decision bound waiting pods to (in no order)

    def follow(self, pictures: NodePictures, snapshot: ClusterSnapshot, views: Mapping[str, PoolView]) -> None:
        """Brought up to ``snapshot``'s nodes (every record; those not live are left out),
        each pictured by ``pictures`` with its pool's view and its pods."""
        try:
            self._follow(pictures, snapshot, views)
        except BaseException:
            self._reset()  # (begun again from nothing next time, rather than half followed)
            raise

    def _follow(self, pictures: NodePictures, snapshot: ClusterSnapshot, views: Mapping[str, PoolView]) -> None:
        nodes, nodes_since, grouped = snapshot.nodes, snapshot.nodes_since, snapshot.by_node
        placed, placed_since = grouped.placed, grouped.since
        if pictures is not self._pictures or views.keys() != self._views.keys() or any(v is not self._views[k] for k, v in views.items()):
            self._reset()
            self._pictures, self._views = pictures, dict(views)
        changed = pictures.spoiled_names() & self.infos.keys()
        records = self._records
        if nodes is not self._nodes:
            if nodes_since is not None and nodes_since.links(self._nodes, nodes):
                for name, node in nodes_since.changed.items():
                    if node is None:
                        records.pop(name, None)
                    else:
                        records[name] = node
                changed.update(nodes_since.changed)
            else:
                now = {node.name: node for node in nodes}
                changed.update(name for name, node in now.items() if records.get(name) is not node)
                changed.update(records.keys() - now.keys())
                self._records = records = now
            self._nodes = nodes
        if placed is not self._placed:
            if placed_since is not None and placed_since.links(self._placed, placed):
                changed.update(placed_since.changed)
            else:
                was = self._placed
                changed.update(name for name, pods in placed.items() if was.get(name) is not pods)
                changed.update(was.keys() - placed.keys())
            self._placed = placed
        if changed:
            self._update(pictures, sorted(changed), views, placed)

    def _update(self, pictures: NodePictures, names: list[str], views: Mapping[str, PoolView], placed: Mapping[str, Sequence[Pod]]) -> None:
        infos, states, zones = self.infos, self.states, self.zones
        for name in names:
            node = self._records.get(name)
            if name in infos:
                zones[infos[name].zone] -= 1  # (counted again below if it is still live)
            if node is None or node.state not in LIVE_STATES:
                self._list(name, None)
                infos.pop(name, None)
                states.pop(name, None)
                self.binding.pop(name, None)
                continue
            info = infos[name] = pictures.info(node, views.get(node.pool), placed.get(name, ()))
            rank = READINESS.get(node.state)  # (None: it takes no pods)
            self._list(name, rank if rank is not None and (not info.cell_taken or name in pictures.placed) else None)
            states[name] = node.state
            zones[info.zone] += 1
            if node.bound_pods:
                self.binding[name] = node
            else:
                self.binding.pop(name, None)
        self.zones = +zones  # (no zone left at a count of none)

    def _list(self, name: str, rank: int | None) -> None:
        """``name`` among the open nodes of ``rank`` (None: of none)."""
        was = self._open_rank.get(name)
        if was == rank:
            return
        if was is not None:
            names = self.open[was]
            del names[bisect_left(names, name)]
            del self._open_rank[name]
        if rank is not None:
            insort(self.open[rank], name)
            self._open_rank[name] = rank
