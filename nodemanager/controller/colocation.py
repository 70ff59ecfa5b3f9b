"""Colocation in the controller: each Ready node's batch resources, recalculated from the
metrics and written to its record only when the framework's NeedSync says so."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from nodemanager.model import Node, NodeState, Resources
from nodemanager.model.resources import BATCH_RESOURCES
from nodemanager.noderesource import BatchResource, NodeMetric, NodeResourceFramework, NodeView

if TYPE_CHECKING:
    from nodemanager.cluster.base import ClusterSource
    from nodemanager.controller.state import ClusterState

log = logging.getLogger("nodemanager.controller")


class ColocationReconciler:
    def __init__(self, state: ClusterState, cluster: ClusterSource) -> None:
        self.state = state
        self.cluster = cluster
        self.framework = NodeResourceFramework([BatchResource()], enabled=state.config.colocation.plugins)
        self.synced: dict[str, tuple[float, str, dict[str, str]]] = {}  # node -> (when, why, messages)
        self.anywhere = state.config.colocation_anywhere  # (the configuration is the controller's for life; merging it is not free)
        self._wanted: tuple[int, bool] | None = None  # (the records' census, whether a node has batch resources)

    def wanted(self) -> bool:
        """Whether there is anything to do: nothing at all when no pool offers batch resources
        and no node has them (looked for again only when a record's allocatable may have
        changed: the records' census)."""
        if self.anywhere:
            return True
        nodes = self.state.nodes
        if self._wanted is None or self._wanted[0] != nodes.census:
            self._wanted = (nodes.census, any(n.allocatable.has(name) for n in nodes.values() for name in BATCH_RESOURCES))
        return self._wanted[1]

    def read_metrics(self) -> Mapping[str, NodeMetric]:
        """The nodes' metrics (outside the controller's lock: the metrics API is a call)."""
        try:
            return self.cluster.node_metrics()
        except Exception:  # no metrics: each node degrades on its own clock
            log.exception("reading node metrics failed")
            return {}

    def reconcile_all(self, metrics: Mapping[str, NodeMetric], now: float) -> None:
        """Every Ready node. Call with the controller's lock held."""
        for name, node in sorted(self.state.nodes.items()):
            if node.state in (NodeState.AVAILABLE, NodeState.CLAIMED):
                self.reconcile(name, node, metrics.get(name), now)

    def reconcile(self, name: str, node: Node, metric: NodeMetric | None, now: float) -> None:
        c = self.state
        itype = c.catalog.get(node.instance_type)
        capacity = itype.capacity(c.config.nodes.volume_size) if itype else node.allocatable
        view = NodeView(name, dict(capacity.items()), dict(node.allocatable.items()))
        usage = c.cache.usage(name)
        pods = [p for k in sorted(usage.pods | usage.node_pods) if (p := c.cache.pod(k)) is not None]
        strategy = c.config.colocation_for(c.pool_config(node.pool))
        last = self.synced.get(name)
        result = self.framework.reconcile(strategy, view, pods, metric, now=now, last_sync=last[0] if last else None)
        for error in result.errors:
            log.warning("node %s: %s", name, error)
        if not result.need_sync:
            return
        batch = {k: v for k, v in result.node.allocatable.items() if k in BATCH_RESOURCES}
        if batch != {k: v for k, v in node.allocatable.items() if k in BATCH_RESOURCES}:
            others = {k: v for k, v in node.allocatable.items() if k not in BATCH_RESOURCES}
            c.update_node(name, allocatable=Resources({**others, **batch}))
            log.info("node %s: batch resources now %s (%s)", name, Resources(batch).to_quantities() or "none", result.reason)
        self.synced[name] = (now, result.reason, result.messages)

    def document(self, node: Node) -> dict[str, object] | None:
        """The node's ``batch`` field in /status."""
        synced = self.synced.get(node.name)
        allocatable = {k: v for k, v in node.allocatable.to_quantities().items() if k in BATCH_RESOURCES}
        if synced is None and not allocatable:
            return None
        return {
            "allocatable": allocatable,
            "last_sync": synced[0] if synced else None,
            "reason": synced[1] if synced else "estimated at boot",
            "messages": synced[2] if synced else {},
        }
