"""``NodeDispenser``: hands a pod the node the scaler bound it to, once that node is ready.

``request_node`` answers with the node (now Claimed), with nothing yet (the node is still
booting: ask again later), or with "no binding" (the scaler has not placed the pod).
``return_node`` takes a node back: unused, it is Available again; used, a cell node is
cleaned and terminated, a bin-pack node is kept once its last pod has gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nodemanager.config.schema import Packing
from nodemanager.model import Node, NodeState, PodKey

if TYPE_CHECKING:
    from nodemanager.controller.state import ClusterState


@dataclass(frozen=True)
class NodeReply:
    node: Node | None = None
    no_binding: bool = False


NO_BINDING = NodeReply(no_binding=True)
NOT_YET = NodeReply()


class NodeDispenser:
    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def _cell(self, node: Node) -> bool:
        pool = self.state.pool_config(node.pool)
        return pool is not None and pool.packing is Packing.CELL

    def request_node(self, pod: PodKey) -> NodeReply:
        c = self.state
        with c.lock:
            name = c.binding_of(pod)
            if name is None:
                return NO_BINDING
            node = c.nodes.get(name)
            if node is None:
                return NOT_YET
            if node.state is NodeState.AVAILABLE:
                node = c.set_state(name, NodeState.CLAIMED)
                return NodeReply(node)
            if node.state is NodeState.CLAIMED and not self._cell(node):
                return NodeReply(node)  # bin-pack nodes take further pods while claimed
            return NOT_YET

    def return_node(self, name: str, unused: bool) -> None:
        c = self.state
        with c.lock:
            node = c.nodes.get(name)
            if node is None or node.state is not NodeState.CLAIMED:
                return
            if c.node_has_pods(name):
                return  # other pods still run there
            if unused:
                c.set_state(name, NodeState.AVAILABLE)
            elif self._cell(node):
                c.set_state(name, NodeState.CLEANING)
                c.mark_for_termination(name, "cell node used", "cell_used")
            else:
                c.set_state(name, NodeState.CLEANING)
                c.set_state(name, NodeState.AVAILABLE)
