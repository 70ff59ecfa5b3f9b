"""The simulated cluster's volume controller: it provisions claims, an ``Immediate`` class's at
once (in the first zone its ``allowedTopologies`` name, else anywhere), a
``WaitForFirstConsumer`` class's in the zone of the node their first pod is bound to."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from nodemanager.cluster.base import ClusterObject, EventType, ObjectEvent
from nodemanager.model import Operator, Pod, Requirement, SelectorTerm
from nodemanager.model.labels import ZONE
from nodemanager.model.volumes import BindingMode, PersistentVolume, PersistentVolumeClaim, StorageClass


class VolumeController:
    def __init__(self, claims: Iterable[PersistentVolumeClaim], volumes: Iterable[PersistentVolume], classes: Iterable[StorageClass]) -> None:
        self.claims: dict[str, PersistentVolumeClaim] = {c.key: c for c in claims}
        self.volumes: dict[str, PersistentVolume] = {v.name: v for v in volumes}
        self.classes = {c.name: c for c in classes}

    def objects(self) -> list[tuple[str, ClusterObject]]:
        """The claims, volumes and classes as the API server lists them, by key."""
        objects: list[tuple[str, ClusterObject]] = [*sorted(self.claims.items()), *sorted(self.volumes.items())]
        return objects + sorted(self.classes.items())

    def provision_immediate(self) -> list[ObjectEvent]:
        events = []
        for claim in list(self.claims.values()):
            sc = self.classes.get(claim.storage_class)
            if not claim.volume_name and sc is not None and sc.binding_mode is BindingMode.IMMEDIATE:
                first = next((r.values[0] for term in sc.allowed_topologies for r in term.requirements if r.key == ZONE), "")
                events += self._provision(claim, first)
        return events

    def provision_for(self, pod: Pod, zone: str) -> list[ObjectEvent]:
        """WaitForFirstConsumer: the claims of the first pod bound are provisioned where it runs."""
        events = []
        for key in pod.volume_claims:
            claim = self.claims.get(key)
            if claim is not None and not claim.volume_name:
                events += self._provision(claim, zone)
        return events

    def _provision(self, claim: PersistentVolumeClaim, zone: str) -> list[ObjectEvent]:
        affinity = (SelectorTerm((Requirement(ZONE, Operator.IN, (zone,)),)),) if zone else ()
        sc = self.classes.get(claim.storage_class)
        volume = PersistentVolume(f"pvc-{claim.namespace}-{claim.name}", affinity, sc.provisioner if sc else "")
        bound = replace(claim, volume_name=volume.name)
        self.volumes[volume.name] = volume
        self.claims[claim.key] = bound
        return [ObjectEvent(EventType.ADDED, volume.name, volume), ObjectEvent(EventType.MODIFIED, bound.key, bound)]
