"""``Pod``: what the scheduler needs to know of a Kubernetes pod, parsed once.

Built from a manifest dict as ``kubectl get pod -o yaml`` prints it (camelCase keys);
``nodemanager.cluster.objects.pod_from_v1`` feeds the official client's ``V1Pod`` through
the client's own serializer into the same parser, so both give the same ``Pod``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, NewType

from nodemanager.errors import InvalidManifest
from nodemanager.model.interpod import NO_AFFINITY, PodAffinity, SpreadConstraint, parse_pod_affinity, parse_spread
from nodemanager.model.manifest import as_int, as_mapping
from nodemanager.model.manifest import as_list as _list
from nodemanager.model.ports import ANY_IP, HostPort
from nodemanager.model.resources import BATCH_CPU, BATCH_MEMORY, SCORING_DEFAULTS, ZERO, Resources, asks_for_batch, resource_amount
from nodemanager.model.selectors import (
    Operator,
    Requirement,
    SelectorTerm,
    TaintEffect,
    Toleration,
    decimal_integer,
    label_value_problem,
    parse_int,
    terms_match,
)
from nodemanager.model.slot_copy import copied

PodKey = NewType("PodKey", str)  # "namespace/name"

ANNOTATION_PREFIX = "nodemanager.io/"
INSTANCE_TYPE_ANNOTATION = ANNOTATION_PREFIX + "instance-type"
CAPACITY_TYPE_ANNOTATION = ANNOTATION_PREFIX + "capacity-type"
ZONE_ANNOTATION = ANNOTATION_PREFIX + "zone"
POD_GROUP_LABEL = ANNOTATION_PREFIX + "pod-group"
POD_GROUP_MIN_MEMBER_ANNOTATION = ANNOTATION_PREFIX + "pod-group-min-member"
DEFAULT_SCHEDULER = "default-scheduler"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # a static pod's mirror, run by the kubelet itself
DO_NOT_DISRUPT_ANNOTATION = ANNOTATION_PREFIX + "do-not-disrupt"  # "true": no voluntary disruption of its node
# What keeps a pod's node from voluntary disruption: ours, and the same request as Karpenter
# and the Cluster Autoscaler spell it, so workloads annotated for either keep working.
POD_KEEPS_NODE = {
    DO_NOT_DISRUPT_ANNOTATION: "true",
    "karpenter.sh/do-not-disrupt": "true",
    "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
}
# And what keeps a node itself.
NODE_KEPT = {
    DO_NOT_DISRUPT_ANNOTATION: "true",
    "karpenter.sh/do-not-disrupt": "true",
    "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true",
}


def asks_to_stay(annotations: Mapping[str, str], meanings: Mapping[str, str]) -> bool:
    """Whether any of the annotations says "do not disrupt" in one of the spellings given."""
    return any(str(annotations.get(key, "")).lower() == value for key, value in meanings.items())


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


TERMINAL_PHASES = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})


class CapacityPolicy(StrEnum):
    """A pod's capacity-type wish: ``spot`` (always), ``on-demand`` (never spot) or ``any``."""

    SPOT = "spot"
    ON_DEMAND = "on-demand"
    ANY = "any"


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """A pod's controller owner reference (``ownerReferences[]`` with ``controller: true``)."""

    api_version: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    uid: str
    requests: Resources
    created_at: float = 0.0
    priority: int = 0
    phase: PodPhase = PodPhase.PENDING
    node_name: str = ""
    scheduler_name: str = DEFAULT_SCHEDULER
    labels: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: tuple[SelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    instance_type: str = ""  # exact name or glob, from the placement annotation
    capacity_policy: CapacityPolicy = CapacityPolicy.ANY
    zone: str = ""
    pod_group: str = ""
    pod_group_min_member: int = 0
    claims: tuple[str, ...] = ()  # resource claims ("namespace/name") the pod needs devices from
    daemon_set: str = ""  # "namespace/name" of the DaemonSet that controls the pod
    owner: OwnerRef | None = None  # its controller owner reference
    mirror: bool = False  # the mirror of a static pod
    do_not_disrupt: bool = False  # its node is not consolidated while it runs there
    host_ports: tuple[HostPort, ...] = ()  # container ports with a hostPort
    volume_claims: tuple[str, ...] = ()  # PersistentVolumeClaims ("namespace/name") its volumes use
    spread: tuple[SpreadConstraint, ...] = ()  # topologySpreadConstraints
    pod_affinity: PodAffinity = NO_AFFINITY  # podAffinity and podAntiAffinity
    preferred_affinity: tuple[tuple[int, SelectorTerm], ...] = ()  # preferred node affinity: (weight, preference)
    terminating: bool = False  # its deletionTimestamp is set: topology spread no longer counts it (kube's #87621)
    restart_policy: str = "Always"  # spec.restartPolicy
    # (milli-cpu, bytes) the allocation scores count: kube's defaults for each container's
    # missing cpu or memory request (``nonzero_request``); None (a pod made in code): its
    # requests, a zero one counted as the default
    scored: tuple[int, int] | None = None
    key: PodKey = field(init=False, repr=False, compare=False)  # "namespace/name", asked for everywhere: made once
    # A DaemonSet or mirror pod: part of its node, never a pod to place, and never a reason
    # to keep the node (drains leave it; it goes with the node). Made once: asked of every pod.
    of_node: bool = field(init=False, repr=False, compare=False)
    batch: bool = field(init=False, repr=False, compare=False)  # it asks for reclaimed batch capacity (``asks_for_batch``)
    _kind: tuple | None = field(default=None, init=False, repr=False, compare=False)  # see ``kind``

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", PodKey(f"{self.namespace}/{self.name}"))
        object.__setattr__(self, "of_node", bool(self.daemon_set) or self.mirror)
        object.__setattr__(self, "batch", asks_for_batch(self.requests))

    @property
    def kind(self) -> tuple:
        """Its namespace, labels and whether it is terminating as a hashable key (all a label
        selector and a spread count see of it), made on first use: pods of one kind are
        grouped and counted by the thousand."""
        if self._kind is None:
            object.__setattr__(self, "_kind", (self.namespace, tuple(sorted(self.labels.items())), self.terminating))
        return self._kind  # type: ignore[return-value]

    @property
    def inter_pod(self) -> bool:
        """Where it may go depends on where other pods of its kind go: placed one at a time."""
        return any(c.hard for c in self.spread) or bool(self.pod_affinity.required or self.pod_affinity.anti_required)

    @property
    def unreplaceable(self) -> bool:
        """No controller makes it again if it is evicted (nor is it a node's own): evicted,
        it is gone for good."""
        return self.owner is None and not self.of_node

    @property
    def completes(self) -> bool:
        """It runs to completion (a Job's pods, ``restartPolicy`` Never or OnFailure): evicted,
        it starts its work again."""
        return self.restart_policy != "Always" or self.of_job

    @property
    def of_job(self) -> bool:
        """A Job's pod (its controller is a Job)."""
        return self.owner is not None and self.owner.kind == "Job"

    @property
    def is_terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    def living(self, **changes: object) -> Pod:
        """A copy with some of ``node_name``, ``phase`` and ``created_at`` changed: what a
        pod's life changes (none of them is one ``key``, ``of_node`` or ``batch`` is made
        from), copied slot by slot (see ``slot_copy``)."""
        if not changes.keys() <= _LIFE:
            raise TypeError(f"Pod.living changes only {sorted(_LIFE)}, not {sorted(changes.keys() - _LIFE)}")
        return copied(self, changes)

    def constrained(self, **changes: object) -> Pod:
        """A copy with some of its scheduling constraints changed (``_CONSTRAINTS``: what a
        planner pins or relaxes, pod after pod), copied slot by slot as ``living`` copies:
        none of them is one a derived field is made from."""
        if not changes.keys() <= _CONSTRAINTS:
            raise TypeError(f"Pod.constrained changes only {sorted(_CONSTRAINTS)}, not {sorted(changes.keys() - _CONSTRAINTS)}")
        return copied(self, changes)

    @property
    def is_bound(self) -> bool:
        return bool(self.node_name)

    def accepts_node(self, labels: Mapping[str, str], node_name: str = "") -> bool:
        """Its nodeSelector and required node affinity hold for a node with these labels."""
        return all(labels.get(k) == v for k, v in self.node_selector.items()) and terms_match(self.affinity, labels, node_name)

    @classmethod
    def from_manifest(cls, doc: Mapping[str, Any], where: str = "pod") -> Pod:
        """Parse a Pod manifest; every error names the field path below ``where``."""
        return _parse_pod(doc, where)


# --- parsing -----------------------------------------------------------------------------


RESTART_POLICIES = ("Always", "OnFailure", "Never")
_LIFE = frozenset({"node_name", "phase", "created_at"})
_CONSTRAINTS = frozenset({"node_selector", "affinity", "preferred_affinity", "spread", "pod_affinity"})


def _str_map(value: Any, path: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in as_mapping(value, path).items()}


def _timestamp(value: Any, path: str) -> float:
    if value is None or value == "":
        return 0.0
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        raise InvalidManifest(path, f"expected an RFC 3339 time, got {value!r}") from None


def _container_requests(container: Any, path: str) -> tuple[Resources, Resources]:
    """The container's requests, and the same with kube's scoring defaults (100m cpu, 200Mi
    memory) where a cpu or memory request is missing (an explicit 0 stays 0)."""
    c = as_mapping(container, path)
    res = as_mapping(c.get("resources"), f"{path}.resources")
    limits = as_mapping(res.get("limits"), f"{path}.resources.limits")
    requests = dict(as_mapping(res.get("requests"), f"{path}.resources.requests"))
    # The API server defaults a missing request to the limit; workload files skip it.
    for name, value in limits.items():
        requests.setdefault(name, value)
    field_path = f"{path}.resources.requests" if requests else path
    parsed = Resources.parse(requests, field_path)
    missing = {name: amount for name, amount in SCORING_DEFAULTS.items() if name not in requests}
    return parsed, (parsed + Resources(missing) if missing else parsed)


def effective_request(spec: Mapping[str, Any], path: str = "spec") -> Resources:
    """The pod's request as Kubernetes computes it (``resourcehelper.PodRequests``)."""
    return _pod_requests(spec, path)[0]


def _pod_requests(spec: Mapping[str, Any], path: str) -> tuple[Resources, Resources]:
    """The pod's request as Kubernetes computes it (``resourcehelper.PodRequests``), and the
    same with each container's missing cpu or memory request as the scoring default (what
    kube-scheduler's scores count, ``NonMissingContainerRequests``; a pod without containers
    asks for nothing).

    Sum of app containers and restartable (sidecar) init containers; at least each plain
    init container plus the sidecars started before it; plus the pod overhead.
    """
    total = scored = ZERO
    for i, c in enumerate(_list(spec.get("containers"), f"{path}.containers")):
        req, nonzero = _container_requests(c, f"{path}.containers[{i}]")
        total, scored = total + req, scored + nonzero
    sidecars = sidecars_scored = init_peak = init_peak_scored = ZERO
    for i, c in enumerate(_list(spec.get("initContainers"), f"{path}.initContainers")):
        req, nonzero = _container_requests(c, f"{path}.initContainers[{i}]")
        if as_mapping(c, f"{path}.initContainers[{i}]").get("restartPolicy") == "Always":
            sidecars, sidecars_scored = sidecars + req, sidecars_scored + nonzero
            init_peak, init_peak_scored = init_peak.max(sidecars), init_peak_scored.max(sidecars_scored)
        else:
            init_peak, init_peak_scored = init_peak.max(req + sidecars), init_peak_scored.max(nonzero + sidecars_scored)
    requested, scored = (total + sidecars).max(init_peak), (scored + sidecars_scored).max(init_peak_scored)
    pod_level = _pod_level_requests(spec, path, requested)
    if pod_level:  # they stand for the containers' (scoring defaults included), as in kube
        requested, scored = requested.replaced(pod_level), scored.replaced(pod_level)
    overhead = Resources.parse(spec.get("overhead"), f"{path}.overhead")
    return requested + overhead, scored + overhead


def _pod_level_requests(spec: Mapping[str, Any], path: str, containers: Resources) -> dict[str, int]:
    """``spec.resources`` (pod-level resources, on by default since Kubernetes 1.34): the
    requests it sets for cpu, memory and hugepages. As the API server defaults them, a
    pod-level limit without a request stands for the request only where no container asks
    for that resource. The API server refuses other resources there."""
    where = f"{path}.resources"
    res = as_mapping(spec.get("resources"), where)
    out: dict[str, int] = {}
    for kind in ("limits", "requests"):
        for key, value in as_mapping(res.get(kind), f"{where}.{kind}").items():
            name = str(key)
            if name not in ("cpu", "memory") and not name.startswith("hugepages-"):
                raise InvalidManifest(f"{where}.{kind}.{name}", "pod-level resources may be cpu, memory or hugepages-<size>")
            amount = resource_amount(name, value, f"{where}.{kind}.{name}")
            if kind == "requests" and amount < containers.get(name):
                # as the API server refuses it
                raise InvalidManifest(
                    f"{where}.requests.{name}", f"{value} must be greater than or equal to the containers' requests of it, {containers.get(name)}"
                )
            if kind == "requests" or not containers.has(name):
                out[name] = amount
    return out


def _requirement(expr: Any, path: str, on_field: bool) -> Requirement:
    e = as_mapping(expr, path)
    key = e.get("key")
    if not key:
        raise InvalidManifest(f"{path}.key", "required")
    try:
        op = Operator(e.get("operator"))
    except ValueError:
        raise InvalidManifest(f"{path}.operator", f"expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt, got {e.get('operator')!r}") from None
    values = tuple(str(v) for v in _list(e.get("values"), f"{path}.values"))
    if op in (Operator.IN, Operator.NOT_IN) and not values:
        raise InvalidManifest(f"{path}.values", f"{op} needs at least one value")
    if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
        raise InvalidManifest(f"{path}.values", f"{op} takes no values")
    if op in (Operator.GT, Operator.LT) and len(values) != 1:
        raise InvalidManifest(f"{path}.values", f"{op} needs exactly one value, got {list(values)!r}")
    if on_field and (key != "metadata.name" or op not in (Operator.IN, Operator.NOT_IN)):
        raise InvalidManifest(path, "matchFields supports only metadata.name with In or NotIn")
    return Requirement(str(key), op, values, on_field)


def _parse_problem(req: Requirement, path: str) -> str:
    """What kube-scheduler's selector parser refuses in a requirement the API server lets
    through (``labels.NewRequirement``): a value that is no label value, a ``Gt``/``Lt``
    value that is no integer. "" when it parses."""
    if req.operator in (Operator.GT, Operator.LT):
        if parse_int(req.values[0]) is None:
            return f"{path}.values[0]: for 'Gt', 'Lt' operators, the value must be an integer, got {req.values[0]!r}"
        return ""
    for i, value in enumerate(req.values):
        if problem := label_value_problem(value):
            return f"{path}.values[{i}]: invalid label value {value!r}: {problem}"
    return ""


def selector_terms(value: Any, path: str) -> tuple[SelectorTerm, ...]:
    """``nodeSelectorTerms`` (of node affinity, or of a PersistentVolume's node affinity)."""
    return tuple(_selector_term(term, f"{path}[{i}]") for i, term in enumerate(_list(value, path)))


def _selector_term(value: Any, path: str) -> SelectorTerm:
    t = as_mapping(value, path)
    expressions = [_requirement(e, f"{path}.matchExpressions[{j}]", False) for j, e in enumerate(_list(t.get("matchExpressions"), f"{path}.matchExpressions"))]
    fields = [_requirement(e, f"{path}.matchFields[{j}]", True) for j, e in enumerate(_list(t.get("matchFields"), f"{path}.matchFields"))]
    error = next((problem for j, r in enumerate(expressions) if (problem := _parse_problem(r, f"{path}.matchExpressions[{j}]"))), "")
    return SelectorTerm((*expressions, *fields), error)


def _node_affinity(spec: Mapping[str, Any], path: str) -> tuple[tuple[SelectorTerm, ...], tuple[tuple[int, SelectorTerm], ...]]:
    node_aff = as_mapping(spec.get("affinity"), f"{path}.affinity").get("nodeAffinity")
    return parse_node_affinity(node_aff, f"{path}.affinity.nodeAffinity")


def parse_node_affinity(value: Any, path: str) -> tuple[tuple[SelectorTerm, ...], tuple[tuple[int, SelectorTerm], ...]]:
    """A ``NodeAffinity`` (a pod's, or a scheduler profile's ``addedAffinity``): required
    terms, and the preferred terms with their weights (1-100, as the API server validates
    them; an empty preference matches no node, as kube's)."""
    node_aff = as_mapping(value, path)
    unknown = sorted(set(node_aff) - {"requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"})
    if unknown:
        raise InvalidManifest(f"{path}.{unknown[0]}", "unknown field")
    req_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    required = as_mapping(node_aff.get("requiredDuringSchedulingIgnoredDuringExecution"), req_path)
    pref_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    preferred = []
    for i, entry in enumerate(_list(node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_path)):
        e = as_mapping(entry, f"{pref_path}[{i}]")
        weight = as_int(e.get("weight"), f"{pref_path}[{i}].weight", 1, 100)
        preferred.append((weight, _selector_term(e.get("preference"), f"{pref_path}[{i}].preference")))
    return selector_terms(required.get("nodeSelectorTerms"), f"{req_path}.nodeSelectorTerms"), tuple(preferred)


def _toleration(value: Any, path: str) -> Toleration:
    t = as_mapping(value, path)
    operator = t.get("operator") or "Equal"
    if operator not in ("Equal", "Exists", "Gt", "Lt"):
        raise InvalidManifest(f"{path}.operator", f"expected Equal, Exists, Gt or Lt, got {operator!r}")
    if operator in ("Gt", "Lt") and decimal_integer(str(t.get("value") or "")) is None:
        raise InvalidManifest(f"{path}.value", f"{operator} compares integers: expected one without leading zeros, got {t.get('value')!r}")
    effect = t.get("effect") or None
    if effect is not None:
        try:
            effect = TaintEffect(effect)
        except ValueError:
            raise InvalidManifest(f"{path}.effect", f"expected NoSchedule, PreferNoSchedule or NoExecute, got {effect!r}") from None
    return Toleration(str(t.get("key") or ""), operator, str(t.get("value") or ""), effect)


def _parse_pod(doc: Mapping[str, Any], where: str) -> Pod:
    doc = as_mapping(doc, where)
    meta = as_mapping(doc.get("metadata"), f"{where}.metadata")
    spec = as_mapping(doc.get("spec"), f"{where}.spec")
    status = as_mapping(doc.get("status"), f"{where}.status")
    name = meta.get("name")
    if not name:
        raise InvalidManifest(f"{where}.metadata.name", "required")
    namespace = str(meta.get("namespace") or "default")
    annotations = _str_map(meta.get("annotations"), f"{where}.metadata.annotations")
    labels = _str_map(meta.get("labels"), f"{where}.metadata.labels")
    owner = _controller(meta, f"{where}.metadata.ownerReferences")

    policy_text = annotations.get(CAPACITY_TYPE_ANNOTATION, "any")
    try:
        policy = CapacityPolicy(policy_text)
    except ValueError:
        raise InvalidManifest(f"{where}.metadata.annotations[{CAPACITY_TYPE_ANNOTATION}]", f"expected spot, on-demand or any, got {policy_text!r}") from None
    min_member_text = annotations.get(POD_GROUP_MIN_MEMBER_ANNOTATION, "0")
    if not min_member_text.isdigit():
        raise InvalidManifest(f"{where}.metadata.annotations[{POD_GROUP_MIN_MEMBER_ANNOTATION}]", f"expected a non-negative integer, got {min_member_text!r}")
    phase_text = status.get("phase") or "Pending"
    try:
        phase = PodPhase(phase_text)
    except ValueError:
        raise InvalidManifest(f"{where}.status.phase", f"unknown phase {phase_text!r}") from None
    priority = spec.get("priority") or 0
    restart_policy = spec.get("restartPolicy") or "Always"
    if restart_policy not in RESTART_POLICIES:
        raise InvalidManifest(f"{where}.spec.restartPolicy", f"expected one of {', '.join(RESTART_POLICIES)}, got {restart_policy!r}")
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise InvalidManifest(f"{where}.spec.priority", f"expected an integer, got {priority!r}")

    required, preferred = _node_affinity(spec, f"{where}.spec")
    requests, scored = _pod_requests(spec, f"{where}.spec")
    return Pod(
        namespace=namespace,
        name=str(name),
        uid=str(meta.get("uid") or f"{namespace}/{name}"),
        requests=requests,
        scored=scored.cpu_memory(),
        created_at=_timestamp(meta.get("creationTimestamp"), f"{where}.metadata.creationTimestamp"),
        terminating=bool(meta.get("deletionTimestamp")),
        restart_policy=restart_policy,
        priority=priority,
        phase=phase,
        node_name=str(spec.get("nodeName") or ""),
        scheduler_name=str(spec.get("schedulerName") or DEFAULT_SCHEDULER),
        labels=labels,
        node_selector=_str_map(spec.get("nodeSelector"), f"{where}.spec.nodeSelector"),
        affinity=required,
        tolerations=tuple(_toleration(t, f"{where}.spec.tolerations[{i}]") for i, t in enumerate(_list(spec.get("tolerations"), f"{where}.spec.tolerations"))),
        instance_type=annotations.get(INSTANCE_TYPE_ANNOTATION, ""),
        capacity_policy=policy,
        zone=annotations.get(ZONE_ANNOTATION, ""),
        pod_group=labels.get(POD_GROUP_LABEL, ""),
        pod_group_min_member=int(min_member_text),
        claims=_claims(spec, namespace, str(name), f"{where}.spec.resourceClaims"),
        daemon_set=f"{namespace}/{owner.name}" if owner is not None and owner.kind == "DaemonSet" else "",
        owner=owner,
        mirror=MIRROR_ANNOTATION in annotations,
        do_not_disrupt=asks_to_stay(annotations, POD_KEEPS_NODE),
        host_ports=_host_ports(spec, f"{where}.spec"),
        volume_claims=_volume_claims(spec, namespace, str(name), f"{where}.spec.volumes"),
        spread=parse_spread(spec.get("topologySpreadConstraints"), f"{where}.spec.topologySpreadConstraints", labels),
        pod_affinity=parse_pod_affinity(spec.get("affinity"), f"{where}.spec.affinity", namespace, labels),
        preferred_affinity=preferred,
    )


def _controller(meta: Mapping[str, Any], where: str) -> OwnerRef | None:
    for i, ref in enumerate(_list(meta.get("ownerReferences"), where)):
        r = as_mapping(ref, f"{where}[{i}]")
        if r.get("controller"):
            return OwnerRef(str(r.get("apiVersion") or ""), str(r.get("kind") or ""), str(r.get("name") or ""))
    return None


def _host_ports(spec: Mapping[str, Any], where: str) -> tuple[HostPort, ...]:
    """Ports with a hostPort of the app containers and of the sidecars (init containers
    with ``restartPolicy: Always``, which run beside them): what NodePorts reads in current
    Kubernetes (1.37; 1.32's read the app containers only, and let a sidecar's port clash
    on the node, where the kubelet then could not start it)."""
    out = []
    containers = [(f"{where}.containers[{i}]", c) for i, c in enumerate(_list(spec.get("containers"), f"{where}.containers"))]
    for i, c in enumerate(_list(spec.get("initContainers"), f"{where}.initContainers")):
        if as_mapping(c, f"{where}.initContainers[{i}]").get("restartPolicy") == "Always":
            containers.append((f"{where}.initContainers[{i}]", c))
    for at, container in containers:
        cpath = f"{at}.ports"
        for j, entry in enumerate(_list(as_mapping(container, at).get("ports"), cpath)):
            port = as_mapping(entry, f"{cpath}[{j}]")
            host_port = port.get("hostPort") or 0
            if not isinstance(host_port, int) or isinstance(host_port, bool) or not 0 <= host_port <= 65535:
                raise InvalidManifest(f"{cpath}[{j}].hostPort", f"expected a port number 1-65535, got {host_port!r}")
            protocol = str(port.get("protocol") or "TCP")
            if protocol not in ("TCP", "UDP", "SCTP"):
                raise InvalidManifest(f"{cpath}[{j}].protocol", f"expected TCP, UDP or SCTP, got {protocol!r}")
            if host_port:
                out.append(HostPort(host_port, protocol, str(port.get("hostIP") or ANY_IP)))
    return tuple(sorted(set(out)))


def _volume_claims(spec: Mapping[str, Any], namespace: str, pod: str, where: str) -> tuple[str, ...]:
    """Claims of ``persistentVolumeClaim`` volumes, and of generic ephemeral volumes (their
    claim is named "<pod>-<volume>")."""
    out = []
    for i, entry in enumerate(_list(spec.get("volumes"), where)):
        volume = as_mapping(entry, f"{where}[{i}]")
        claim = as_mapping(volume.get("persistentVolumeClaim"), f"{where}[{i}].persistentVolumeClaim")
        if claim:
            if not claim.get("claimName"):
                raise InvalidManifest(f"{where}[{i}].persistentVolumeClaim.claimName", "required")
            out.append(f"{namespace}/{claim['claimName']}")
        elif volume.get("ephemeral") is not None:
            out.append(f"{namespace}/{pod}-{volume.get('name')}")
    return tuple(out)


def _claims(spec: Mapping[str, Any], namespace: str, pod: str, where: str) -> tuple[str, ...]:
    """Claims by name, or from a template: the claim made for this pod is "<pod>-<entry>"."""
    out = []
    for i, entry in enumerate(_list(spec.get("resourceClaims"), where)):
        e = as_mapping(entry, f"{where}[{i}]")
        if e.get("resourceClaimName"):
            out.append(f"{namespace}/{e['resourceClaimName']}")
        elif e.get("resourceClaimTemplateName"):
            out.append(f"{namespace}/{pod}-{e.get('name')}")
        else:
            raise InvalidManifest(f"{where}[{i}]", "needs resourceClaimName or resourceClaimTemplateName")
    return tuple(out)


def as_regular(pod: Pod) -> Pod:
    """The pod with its batch requests turned into cpu and memory requests (where no pool
    offers batch resources, a batch pod's requests are ordinary ones)."""
    if not pod.batch:
        return pod
    batch_cpu, batch_memory = pod.requests[BATCH_CPU], pod.requests[BATCH_MEMORY]
    regular = pod.requests - Resources({BATCH_CPU: batch_cpu, BATCH_MEMORY: batch_memory}) + Resources({"cpu": batch_cpu, "memory": batch_memory})
    return replace(pod, requests=regular, scored=None)  # (scored as these requests are)
