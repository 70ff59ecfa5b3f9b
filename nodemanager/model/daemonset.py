"""``DaemonSet``: a pod every matching node runs, so part of what a node can offer is spoken for.

The DaemonSet controller decides where its pods go (``NodeShouldRunDaemonPod``): the
template's nodeSelector and required node affinity must match the node's labels, and every
NoSchedule or NoExecute taint must be tolerated, counting the tolerations the controller
adds to every daemon pod (``AddOrUpdateDaemonPodTolerations``). Resources are not checked:
a daemon pod that does not fit preempts others, so planners keep its room free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from nodemanager.errors import InvalidManifest
from nodemanager.model.pod import Pod
from nodemanager.model.resources import PODS, ZERO, Resources
from nodemanager.model.selectors import HARD_EFFECTS, Taint, TaintEffect, Toleration, untolerated

_NO_EXECUTE, _NO_SCHEDULE = TaintEffect.NO_EXECUTE, TaintEffect.NO_SCHEDULE
#: What the DaemonSet controller adds to each of its pods (pkg/controller/daemon/util).
DAEMON_TOLERATIONS = (
    Toleration("node.kubernetes.io/not-ready", "Exists", "", _NO_EXECUTE),
    Toleration("node.kubernetes.io/unreachable", "Exists", "", _NO_EXECUTE),
    Toleration("node.kubernetes.io/disk-pressure", "Exists", "", _NO_SCHEDULE),
    Toleration("node.kubernetes.io/memory-pressure", "Exists", "", _NO_SCHEDULE),
    Toleration("node.kubernetes.io/pid-pressure", "Exists", "", _NO_SCHEDULE),
    Toleration("node.kubernetes.io/unschedulable", "Exists", "", _NO_SCHEDULE),
)
HOST_NETWORK_TOLERATION = Toleration("node.kubernetes.io/network-unavailable", "Exists", "", _NO_SCHEDULE)


@dataclass(frozen=True, slots=True)
class DaemonSet:
    namespace: str
    name: str
    pod: Pod  # the pod template, with the tolerations the controller adds

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def runs_on(self, labels: Mapping[str, str], taints: tuple[Taint, ...], node_name: str = "") -> bool:
        return self.pod.accepts_node(labels, node_name) and not untolerated(taints, self.pod.tolerations, HARD_EFFECTS)

    @classmethod
    def from_manifest(cls, doc: Mapping[str, Any], where: str = "daemonSet") -> DaemonSet:
        if not isinstance(doc, Mapping):
            raise InvalidManifest(where, f"expected a DaemonSet manifest, got {type(doc).__name__}")
        meta = doc.get("metadata") or {}
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not name:
            raise InvalidManifest(f"{where}.metadata.name", "required")
        namespace = str(meta.get("namespace") or "default")
        template = ((doc.get("spec") or {}) if isinstance(doc.get("spec"), Mapping) else {}).get("template")
        if not isinstance(template, Mapping):
            raise InvalidManifest(f"{where}.spec.template", "required: the pod template")
        template_meta = template.get("metadata") if isinstance(template.get("metadata"), Mapping) else {}
        pod_doc = {**template, "metadata": {**template_meta, "name": str(name), "namespace": namespace}}
        pod = Pod.from_manifest(pod_doc, f"{where}.spec.template")
        spec = template.get("spec") if isinstance(template.get("spec"), Mapping) else {}
        added = DAEMON_TOLERATIONS + ((HOST_NETWORK_TOLERATION,) if spec.get("hostNetwork") else ())
        pod = replace(pod, tolerations=pod.tolerations + added, daemon_set=f"{namespace}/{name}")
        return cls(namespace, str(name), pod)


def daemon_overhead(
    daemon_sets: tuple[DaemonSet, ...], labels: Mapping[str, str], taints: tuple[Taint, ...], present: frozenset[str] = frozenset()
) -> Resources:
    """What the DaemonSets that run on a node with these labels and taints ask of it (one pod
    slot each included), leaving out those whose pod is ``present`` on it already."""
    total = ZERO
    count = 0
    for ds in daemon_sets:
        if ds.key not in present and ds.runs_on(labels, taints):
            total += ds.pod.requests
            count += 1
    return total + Resources({PODS: count}) if count else total
