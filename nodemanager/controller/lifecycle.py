"""The node lifecycle controller (``loops.heartbeat``, 10 s): a Ready node not heard from for
``nodes.healthyTimeout``, or a node not Ready by ``nodes.bootTimeout``, is marked for
termination (the reaper drains and terminates it); a settled node whose Node lacks some of
its pool's labels is labelled again (the labelling at registration failed).

A pass runs under the controller's lock; the label calls are made once it is released.
"""

from __future__ import annotations

import math
from itertools import repeat
from typing import TYPE_CHECKING

from nodemanager.model import NodeState
from nodemanager.model.journal import Mark, changed_since

if TYPE_CHECKING:
    from nodemanager.cluster.base import ClusterSource
    from nodemanager.controller.state import ClusterState

SETTLED = frozenset({NodeState.AVAILABLE, NodeState.CLAIMED})  # Ready: its heartbeats and labels are watched
BOOTING = frozenset({NodeState.CREATING, NodeState.CREATED})


class NodeLifecycle:
    def __init__(self, state: ClusterState, cluster: ClusterSource) -> None:
        self.state = state
        self.cluster = cluster
        self._unlabelled: set[str] = set()  # settled nodes whose Node lacks some of their pool's labels (see unlabelled_now)
        self._label_marks: tuple[Mark, ...] | None = None

    def run(self, now: float) -> None:
        c = self.state
        healthy, boot = c.config.nodes.healthy_timeout, c.config.nodes.boot_timeout
        marks: list[tuple[str, str, str]] = []  # (node, reason, label): acted on by name, as the few there are
        heartbeat_of, seen_until = c.cache.heartbeats.get, min(now, c.synced_at)
        for state in SETTLED:
            names = c.nodes.names_in(state)
            # Every settled node's heartbeat, every 10 s: most passes find none silent, which
            # the oldest heartbeat tells (looked up in C; a node never heard from is oldest).
            if names and seen_until - min(map(heartbeat_of, names, repeat(-math.inf))) > healthy:
                for name in names:
                    beat = heartbeat_of(name)
                    if beat is None:
                        marks.append((name, "node left the cluster", "unhealthy"))
                    elif (silent := seen_until - beat) > healthy:
                        marks.append((name, f"no heartbeat for {silent:.0f}s (healthy timeout {healthy:g}s)", "unhealthy"))
        for state in BOOTING:
            for name in c.nodes.names_in(state):
                if now - (created := c.nodes[name].created_at) > boot:
                    marks.append((name, f"not Ready {now - created:.0f}s after boot (boot timeout {boot:g}s)", "boot_timeout"))
        for name in sorted(self.unlabelled_now()):  # again: labelling failed at registration
            c.lock.after_release(self.cluster.label_node, name, c.nodes[name].labels)
        for name, reason, label in sorted(marks):
            c.mark_for_termination(name, reason, label)

    def unlabelled_now(self) -> set[str]:
        """The settled, registered nodes whose Node lacks some of their pool's labels, looked
        at again only where a record or a Node changed (a heartbeat changes no label)."""
        c = self.state
        changed, self._label_marks = changed_since((c.nodes.changes, c.cache.node_changes), self._label_marks)
        unlabelled = self._unlabelled
        for name in c.nodes.keys() | unlabelled if changed is None else changed:
            node, registered = c.nodes.get(name), c.cache.node(name)
            if node is not None and node.labels and node.state in SETTLED and registered is not None and not registered.labels.keys() >= node.labels.keys():
                unlabelled.add(name)
            else:
                unlabelled.discard(name)
        return unlabelled
