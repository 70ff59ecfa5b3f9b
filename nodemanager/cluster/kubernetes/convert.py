"""API objects (the JSON the API server sends) to the cache's pods and nodes.

Which pods the cache sees depends on the mode: a scheduler waits for the unbound pods that
name it; a provisioner for the unbound pods the default scheduler marked Unschedulable.
Bound pods always count (they use their node), whoever bound them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from nodemanager.cluster.base import ClusterNode
from nodemanager.config.cluster_schema import KubernetesMode
from nodemanager.model import Pod, Resources, Taint, TaintEffect
from nodemanager.model.pod import MIRROR_ANNOTATION, NODE_KEPT, asks_to_stay

PROVIDER_ID = re.compile(r"^aws:///(?P<zone>[^/]*)/(?P<instance>i-[0-9a-zA-Z]+)$")


def parse_time(value: Any) -> float | None:
    """RFC 3339 (``...Z``) or MicroTime to epoch seconds; None when absent."""
    if not value:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def instance_of(provider_id: str) -> str:
    """The EC2 instance id in an ``aws:///<zone>/<id>`` providerID ("" for any other)."""
    m = PROVIDER_ID.match(provider_id or "")
    return m["instance"] if m else ""


def key_of(doc: Mapping[str, Any]) -> str:
    meta = doc["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def node_from_api(doc: Mapping[str, Any], name: str, lease_renewed: float | None) -> ClusterNode:
    """A Node as the cache knows it, under ``name`` (ours when the instance is ours). Its
    heartbeat is the later of the Ready condition's and the node Lease's renewals."""
    spec, status = doc.get("spec") or {}, doc.get("status") or {}
    ready = _condition(status, "Ready")
    beats = [t for t in (parse_time(ready.get("lastHeartbeatTime")), lease_renewed) if t is not None]
    return ClusterNode(
        name=name,
        instance_id=instance_of(spec.get("providerID", "")),
        ready=ready.get("status") == "True",
        last_heartbeat=max(beats, default=0.0),
        unschedulable=bool(spec.get("unschedulable")),
        labels=dict(doc["metadata"].get("labels") or {}),
        do_not_disrupt=asks_to_stay(doc["metadata"].get("annotations") or {}, NODE_KEPT),
        allocatable=Resources.parse(status.get("allocatable") or {}, f"node {doc['metadata']['name']} status.allocatable"),
        taints=tuple(
            Taint(str(t["key"]), TaintEffect(t["effect"]), str(t.get("value") or ""))
            for t in spec.get("taints") or []
            if t.get("key") and t.get("effect") in TaintEffect._value2member_map_
        ),
    )


def waits_for_us(doc: Mapping[str, Any], mode: KubernetesMode, scheduler_name: str) -> bool:
    """Is this unbound pod one the scaler should find room for?"""
    if doc["metadata"].get("deletionTimestamp"):
        return False
    status = doc.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    if mode is KubernetesMode.SCHEDULER:
        return (doc.get("spec") or {}).get("schedulerName") == scheduler_name
    scheduled = _condition(status, "PodScheduled")
    return scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable"


def pod_from_api(doc: Mapping[str, Any], mode: KubernetesMode, scheduler_name: str) -> Pod | None:
    """The cache's pod, or None when the cache should not see it. Raises InvalidManifest
    (naming the field) for a pod it cannot read."""
    bound = bool((doc.get("spec") or {}).get("nodeName"))
    if not bound and not waits_for_us(doc, mode, scheduler_name):
        return None
    pod = Pod.from_manifest(doc, f"pod {key_of(doc)}")
    generated = {c.get("name"): c.get("resourceClaimName") for c in (doc.get("status") or {}).get("resourceClaimStatuses") or []}
    if not generated:
        return pod
    # A claim made from a template has the name the API server generated (in the pod's
    # status), not the "<pod>-<entry>" the pod's parser assumes; until it exists the pod
    # waits for it. The parser lists the claims in the order of the spec's entries.
    claims = list(pod.claims)
    for i, entry in enumerate((doc.get("spec") or {}).get("resourceClaims") or []):
        if not entry.get("resourceClaimName") and generated.get(entry.get("name")):
            claims[i] = f"{pod.namespace}/{generated[entry['name']]}"
    return replace(pod, claims=tuple(claims))


@dataclass(frozen=True)
class DrainFacts:
    """What a drain needs to know of a pod on a node."""

    key: str
    evictable: bool  # not a DaemonSet or mirror pod, not finished
    deleting_until: float | None  # deletionTimestamp: when its grace period ends


def drain_facts(doc: Mapping[str, Any]) -> DrainFacts:
    meta = doc["metadata"]
    owners = meta.get("ownerReferences") or []
    daemon = any(o.get("kind") == "DaemonSet" and o.get("controller") for o in owners)
    mirror = MIRROR_ANNOTATION in (meta.get("annotations") or {})
    finished = (doc.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    return DrainFacts(key_of(doc), not (daemon or mirror or finished), parse_time(meta.get("deletionTimestamp")))
