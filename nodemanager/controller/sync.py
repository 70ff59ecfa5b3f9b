"""``ClusterSync``: the shared state kept in step with the world. At start-up the node
records are rebuilt from the cloud's tags and the cluster (the truth lives outside); then
each pool pass applies the cluster's changes to the cache, records registrations, gives
back the nodes of finished pods and purges old records."""

from __future__ import annotations

import logging

from cloud.base import CloudClient, Instance
from nodemanager.cluster.base import ClusterEvent, ClusterSource
from nodemanager.controller.dispenser import NodeDispenser
from nodemanager.controller.state import ClusterState
from nodemanager.model import ZERO, InstanceId, Node, NodeName, NodeState, Taint
from nodemanager.model import labels as wk
from nodemanager.model.reservation import ReservationKind
from nodemanager.status.metrics import Metrics

log = logging.getLogger("nodemanager.controller")
TERMINATED_KEPT_FOR = 60.0  # seconds a Terminated record stays visible in /status
TERMINATED_KEPT_MAX = 100  # ... and at most this many of them (the newest)


class ClusterSync:
    def __init__(self, state: ClusterState, cloud: CloudClient, cluster: ClusterSource, metrics: Metrics, dispenser: NodeDispenser) -> None:
        self.state = state
        self.cloud = cloud
        self.cluster = cluster
        self.metrics = metrics
        self.dispenser = dispenser

    # -- start-up -------------------------------------------------------------------------
    def recover(self) -> None:
        """Rebuild node records from the cloud (tags) and the cluster after a (re)start."""
        listed, instances = self.cluster.list(), self.cloud.list_instances()
        with self.state.lock:
            self.state.cache.apply(listed)
            now = self.state.synced_at = self.state.clock.now()
            for instance in instances:
                if instance.node_name in self.state.nodes or not instance.alive:
                    continue
                self.state.nodes[instance.node_name] = self._adopt(instance)
                log.info("adopted instance %s as node %s (%s)", instance.instance_id, instance.node_name, self.state.nodes[instance.node_name].state)
            self._sync_registrations(now, announce=False)  # adopted nodes registered long ago
            self.state.ready = True

    def _adopt(self, instance: Instance) -> Node:
        itype = self.state.catalog.get(instance.instance_type)
        node = Node(
            NodeName(instance.node_name),
            instance.pool,
            instance.instance_type,
            instance.capacity_type,
            instance.zone,
            allocatable=itype.allocatable_for(self.state.config.nodes.volume_size) if itype else ZERO,
            instance_id=InstanceId(instance.instance_id),
            created_at=instance.launched_at,
            image_id=instance.image_id,
            labels=self._labels_of(instance),
            taints=tuple(Taint(t.key, t.effect, t.value) for t in pool.taints) if (pool := self.state.pool_config(instance.pool)) else (),
        )
        return node.moved_to(NodeState.CREATED)

    def _labels_of(self, instance: Instance) -> dict[str, str]:
        """An adopted instance's node labels: its pool's, and the reservation it runs in."""
        pool = self.state.pool_config(instance.pool)
        labels = dict(pool.labels) if pool else {}
        if instance.reservation:
            found = self.state.reservations.get(instance.reservation)
            labels[wk.RESERVATION_ID] = instance.reservation
            labels[wk.RESERVATION_TYPE] = (found.kind if found else ReservationKind.DEFAULT).value
        return labels

    # -- sync ----------------------------------------------------------------------------------
    def poll(self) -> list[ClusterEvent] | None:
        """The cluster's changes since the last poll (None: it failed); outside the lock, as
        the first poll lists and a source without watch threads watches."""
        try:
            return self.cluster.poll()
        except Exception:
            log.exception("cluster poll failed; using the last known state")
            return None

    def sync(self, now: float, events: list[ClusterEvent] | None) -> None:
        """The cache caught up with the cluster's events, registrations recorded, finished
        pods' nodes given back, old records purged."""
        if events is not None:
            self.state.synced_at = now
        self.state.cache.apply(events or [])
        self.state.cache.expire(now)
        self._sync_registrations(now)
        for pod in self.state.cache.take_finished():
            self.state.pods_gone += 1
            if pod.node_name in self.state.nodes and not pod.of_node:
                self.dispenser.return_node(pod.node_name, unused=False)
        self._purge(now)

    def _sync_registrations(self, now: float, announce: bool = True) -> None:
        for name in self.state.nodes.in_states(NodeState.CREATED):
            node, registered = self.state.nodes[name], self.state.cache.node(name)
            if registered is not None and registered.ready:
                log.info("node %s: registered and Ready after %.0fs", name, now - node.created_at)
                self.state.lock.after_release(self.cluster.label_node, name, node.labels)
                if announce:
                    self.state.event("Node", name, "Registered", f"Ready {now - node.created_at:.0f}s after boot")
                    self.metrics.node_startup.observe(max(0.0, now - node.created_at))
                self.state.set_state(name, NodeState.AVAILABLE)
                if self.state.cache.usage(name).pods:
                    self.state.set_state(name, NodeState.CLAIMED)

    def _purge(self, now: float) -> None:
        terminated = self.state.nodes.in_states(NodeState.TERMINATED)
        ended = sorted((self.state.terminated_at.get(n, now), n) for n in terminated)
        crowded = {name for _, name in ended[: max(0, len(ended) - TERMINATED_KEPT_MAX)]}
        for name in terminated:
            if name in crowded or now - self.state.terminated_at.get(name, now) >= TERMINATED_KEPT_FOR:
                self.state.lock.after_release(self.cluster.remove_node, name)  # once more: a dying kubelet may have registered it again
                del self.state.nodes[name]
                self.state.ledger.forget_node(name)
                self.state.terminated_at.pop(name, None)
                self.state.drain_blocked.discard(name)
        for name in self.state.nodes.in_states(NodeState.TERMINATING):
            if name not in self.state.marked:
                self.state.marked[name] = ("terminating", "terminating")  # confirm on the next reap
