"""Which Node is which of our nodes: a Node whose providerID names an instance nodemanager
launched goes by that instance's node name; any other Node by its own. The cloud is listed
(at most every ``RESOLVE_EVERY``) to learn the instances of Nodes not matched yet."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cloud.base import CloudClient
from cloud.errors import CloudError
from nodemanager.clock import Clock
from nodemanager.cluster.kubernetes.convert import instance_of

log = logging.getLogger("nodemanager.kubernetes")
RESOLVE_EVERY = 5.0  # seconds between cloud listings to match new Nodes to instances


class NodeNames:
    def __init__(self, cloud: CloudClient, clock: Clock) -> None:
        self.cloud = cloud
        self.clock = clock
        self.ours: dict[str, str] = {}  # Node name -> our node name
        self.kube: dict[str, str] = {}  # our node name -> Node name
        self._by_instance: dict[str, str] = {}  # instance id -> our node name
        self._resolved_at = float("-inf")
        self._first_seen: dict[str, float] = {}  # Node name -> when it was first matched against instances

    def forget(self, kube: str) -> None:
        """The Node is gone."""
        self._first_seen.pop(kube, None)
        self.kube.pop(self.ours.pop(kube, ""), None)

    def resolve(self, kube: str, doc: Mapping[str, Any]) -> str | None:
        """Our name for a Node: the node of its instance, its own if the instance is not ours,
        None while the cloud cannot say. An instance missing from a listing taken after its
        Node appeared is not ours (a Node registers only after its instance launched)."""
        if kube in self.ours:
            return self.ours[kube]
        instance = instance_of((doc.get("spec") or {}).get("providerID", ""))
        if not instance:
            return kube
        now = self.clock.now()
        first_seen = self._first_seen.setdefault(kube, now)
        if instance not in self._by_instance and self._resolved_at < first_seen and now - self._resolved_at >= RESOLVE_EVERY:
            try:
                listed = self.cloud.list_instances()
            except CloudError as exc:
                log.warning("cannot match Node %s to an instance yet: %s", kube, exc)
                return None
            self._resolved_at = now
            self._by_instance.update({i.instance_id: i.node_name for i in listed})
        if instance not in self._by_instance and self._resolved_at < first_seen:
            return None  # no listing since the Node appeared: ours or not is unknown yet
        ours = self._by_instance.get(instance)
        if ours is None:
            return kube
        if ours != kube:
            log.info("Node %s is instance %s: node %s", kube, instance, ours)
        self.ours[kube], self.kube[ours] = ours, kube
        return ours
