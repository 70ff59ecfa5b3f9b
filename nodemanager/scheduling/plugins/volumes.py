"""VolumeBinding and NodeVolumeLimits: where a pod's PersistentVolumeClaims let it run.

VolumeBinding (kube-scheduler's plugin, for what an autoscaler must know): PreFilter finds
the pod's claims; a missing claim, one being deleted, or an unbound claim of an
``Immediate`` class makes the pod wait (the volume controller acts first). Filter: a bound
claim's volume must admit the node (``node(s) had volume node affinity conflict``); an
unbound ``WaitForFirstConsumer`` claim needs the node inside its class's
``allowedTopologies`` (``node(s) didn't find available persistent volumes to bind``).
Static volumes are not matched to unbound claims: those are assumed to be provisioned.

VolumeZone (kube-scheduler's plugin): a bound volume's zone and region labels must be the
node's (``node(s) had no available volume zone``), a node with none of those labels excepted.

NodeVolumeLimits: EBS volumes on a node, the pod's new ones included, stay within the
attach limit of its instance type (kube-scheduler's 39, or 25 on Nitro).
"""

from __future__ import annotations

from nodemanager.model import Pod
from nodemanager.model.labels import ZONE
from nodemanager.model.selectors import terms_match
from nodemanager.model.volumes import EBS_DRIVERS, GA_LABEL, TOPOLOGY_LABELS, BindingMode, PersistentVolumeClaim, VolumeContext, ebs_attach_limit
from nodemanager.scheduling.cycle_state import CycleState
from nodemanager.scheduling.interfaces import FilterPlugin, PreFilterPlugin, SkipsUnasked
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.status import SKIP, Status, unresolvable, unschedulable

EBS_ZONE = "topology.ebs.csi.aws.com/zone"  # the EBS CSI driver's own zone key, an alias of the zone label
_CLAIMS_KEY = "PreFilterVolumeBinding"
_ZONES_KEY = "PreFilterVolumeZone"
_EMPTY = VolumeContext()


def _context(plugin: FilterPlugin) -> VolumeContext:
    found = getattr(plugin.handle, "volumes", None)
    return found if isinstance(found, VolumeContext) else _EMPTY


class VolumeBinding(PreFilterPlugin, FilterPlugin):
    name = "VolumeBinding"

    def pre_filter(self, state: CycleState, pod: Pod) -> Status | None:
        if not pod.volume_claims:
            return SKIP  # kube: a pod with no claims skips VolumeBinding's Filter
        context = _context(self)
        claims = []
        for key in pod.volume_claims:
            claim = context.claims.get(key)
            if claim is None:
                return unschedulable(f'persistentvolumeclaim "{key.split("/", 1)[1]}" not found', self.name)
            if claim.deleting:
                return unschedulable(f'persistentvolumeclaim "{claim.name}" is being deleted', self.name)
            if not claim.volume_name:
                sc = context.classes.get(claim.storage_class)
                if sc is None:
                    return unschedulable(f'storageclass.storage.k8s.io "{claim.storage_class}" not found (claim {claim.name} waits)', self.name)
                if sc.binding_mode is BindingMode.IMMEDIATE:
                    return unschedulable("pod has unbound immediate PersistentVolumeClaims", self.name)
            claims.append(claim)
        state.write(_CLAIMS_KEY, tuple(claims))
        return None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if not pod.volume_claims:
            return None
        claims: tuple[PersistentVolumeClaim, ...] | None = state.get(_CLAIMS_KEY)
        if claims is None:  # a filter run without PreFilter (a re-check): gather them now
            status = self.pre_filter(state, pod)
            if status is not None:
                return status
            claims = state.get(_CLAIMS_KEY)
        context = _context(self)
        labels = node.labels if EBS_ZONE in node.labels or ZONE not in node.labels else {**node.labels, EBS_ZONE: node.labels[ZONE]}
        for claim in claims or ():
            if claim.volume_name:
                volume = context.volumes.get(claim.volume_name)
                if volume is None:  # kube: no node will do until the volume is back
                    return unresolvable("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)", self.name)
                if volume.node_affinity and not terms_match(volume.node_affinity, labels, node.name):
                    return unresolvable("node(s) had volume node affinity conflict", self.name)
            else:
                sc = context.classes[claim.storage_class]
                if sc.allowed_topologies and not terms_match(sc.allowed_topologies, labels, node.name):
                    return unresolvable("node(s) didn't find available persistent volumes to bind", self.name)
        return None


class VolumeZone(PreFilterPlugin, FilterPlugin):
    name = "VolumeZone"

    def pre_filter(self, state: CycleState, pod: Pod) -> Status | None:
        if not pod.volume_claims:
            return SKIP
        found = self._topology(pod)
        if isinstance(found, Status):
            return found
        if not found:
            return SKIP  # kube: no bound volume with zone labels
        state.write(_ZONES_KEY, found)
        return None

    def _topology(self, pod: Pod) -> list[tuple[str, frozenset[str]]] | Status:
        """The zone and region labels of the pod's bound volumes (kube's getPVbyPod), or why
        kube refuses the pod."""
        context = _context(self)
        out: list[tuple[str, frozenset[str]]] = []
        for key in pod.volume_claims:
            claim = context.claims.get(key)
            if claim is None:
                return unresolvable(f'persistentvolumeclaim "{key.split("/", 1)[1]}" not found', self.name)
            if not claim.volume_name:
                if not claim.storage_class:
                    return unresolvable("PersistentVolumeClaim had no pv name and storageClass name", self.name)
                sc = context.classes.get(claim.storage_class)
                if sc is None:
                    return unresolvable(f'storageclasses.storage.k8s.io "{claim.storage_class}" not found', self.name)
                if sc.binding_mode is BindingMode.WAIT_FOR_FIRST_CONSUMER:
                    continue  # provisioned where the pod goes
                return unresolvable("PersistentVolume had no name", self.name)
            volume = context.volumes.get(claim.volume_name)
            if volume is None:
                return unresolvable(f'persistentvolume "{claim.volume_name}" not found', self.name)
            out.extend(volume.topology)
        return out

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if not pod.volume_claims:
            return None
        zones = state.get(_ZONES_KEY)
        if zones is None:  # a filter run without PreFilter
            zones = self._topology(pod)
            if isinstance(zones, Status):
                return zones
        labels = node.labels
        if not zones or not any(k in labels for k in TOPOLOGY_LABELS):
            return None  # kube: a node with no zone or region labels has no zone constraint
        for key, values in zones:
            value = labels.get(key, labels.get(GA_LABEL.get(key, "")))
            if value is None or value not in values:
                return unresolvable("node(s) had no available volume zone", self.name)
        return None


class NodeVolumeLimits(SkipsUnasked, FilterPlugin):
    name = "NodeVolumeLimits"

    def asks(self, pod: Pod) -> bool:
        return bool(pod.volume_claims)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if not pod.volume_claims:
            return None
        context = _context(self)

        def ebs(keys: tuple[str, ...]) -> set[str]:
            return {k for k in keys if (c := context.claims.get(k)) is not None and context.driver_of(c) in EBS_DRIVERS}

        wanted = ebs(pod.volume_claims)
        if not wanted:
            return None
        attached = set().union(*(ebs(p.volume_claims) for p in node.pods.values() if p.key != pod.key))
        if len(attached | wanted) > ebs_attach_limit(node.instance_type):
            return unschedulable("node(s) exceed max volume count", self.name)
        return None
