"""Workload files: which pods arrive when, and for how long they run.

    pods:
      - name: web            # pod name; with count > 1, web-0, web-1, ...
        count: 20            # default 1
        at: 5m               # arrival time (duration string or seconds), default 0
        duration: 30m        # run time once bound; absent = runs until the end
        pod:                 # a Pod manifest, or just its spec
          metadata: {annotations: {nodemanager.io/capacity-type: spot}}
          spec: {containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]}

A plain Kubernetes ``List`` (``kubectl get pods,deployments -o yaml``) of Pods,
Deployments, ReplicaSets, StatefulSets and Jobs also works, and so does one such object
alone (a ``deployment.yaml``): each is expanded to the pods its controller would make, and
every pod arrives at 0 and runs forever. Every field of every Kubernetes object is checked
against the API's schema (``cluster.manifests``): an unknown one is an error with its path.
Every malformed entry is reported with its index and field, and nothing runs.

Besides pods, a workload may hold what the cluster around them has: ``daemonSets``,
``persistentVolumeClaims``, ``persistentVolumes`` and ``storageClasses`` (manifests), and
``namespaces`` (their labels, for ``namespaceSelector``), the ``services``,
``replicationControllers``, ``replicaSets`` and ``statefulSets`` that select pods (the
selector default spread constraints count by; pods name theirs in ``ownerReferences``), the
``podDisruptionBudgets`` consolidation respects (a budget without a ``status`` has its
``disruptionsAllowed`` computed as kube's disruption controller does), the capacity
``reservations`` the cloud holds (``workload_reservations``), and ``nodeEvents``, what
operators do to nodes (taint, untaint, cordon, uncordon):

    nodeEvents:
      - at: 30m
        nodes: {nodemanager.io/pool: general}   # node labels to match (default: every node)
        count: 1                                # the first N matching nodes (default: all)
        taint: {key: dedicated, value: db, effect: NoSchedule}
        cordon: true
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodemanager import documents
from nodemanager.cluster.arrivals import Arrival, Arrivals, Copies, UsageProfile
from nodemanager.cluster.manifests import DURATION_ANNOTATION, POD_MAKERS, expand, unknown_fields
from nodemanager.cluster.workload_reservations import parse_reservation
from nodemanager.dra.context import DeviceContext
from nodemanager.dra.model import ResourceClaim, parse_claim, parse_claim_spec, parse_device_class
from nodemanager.durations import parse_duration
from nodemanager.errors import InvalidInput, InvalidManifest
from nodemanager.model import Pod, PodPhase, Taint, TaintEffect
from nodemanager.model import volumes as kv
from nodemanager.model.daemonset import DaemonSet
from nodemanager.model.pdb import PodDisruptionBudget
from nodemanager.model.pod import OwnerRef
from nodemanager.model.pod_owners import Namespace, PodSelecting, ReplicaSet, ReplicationController, Service, StatefulSet
from nodemanager.model.reservation import Reservation
from nodemanager.model.slot_copy import copied
from nodemanager.model.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass

_ENTRY_KEYS = {"name", "count", "at", "duration", "pod", "usage", "bare"}
# A workload's pods are made again when evicted (as a Job's or a ReplicaSet's are): one that
# names no controller of its own is given one. ``bare: true`` leaves it without: evicted, it is gone.
WORKLOAD_OWNER_API = "nodemanager.io/v1"


def workload_owner(name: str, duration: float | None) -> OwnerRef:
    """The controller a workload group's pods name: a Job's when they run for a
    ``duration`` (evicted, they start their work again), else the group itself."""
    return OwnerRef("batch/v1", "Job", name) if duration is not None else OwnerRef(WORKLOAD_OWNER_API, "Workload", name)


_SELECTING = {"services": Service, "replicationControllers": ReplicationController, "replicaSets": ReplicaSet, "statefulSets": StatefulSet}
_CLUSTER_KEYS = {
    "daemonSets",
    "persistentVolumeClaims",
    "persistentVolumes",
    "storageClasses",
    "nodeEvents",
    "namespaces",
    "podDisruptionBudgets",
    "reservations",
    *_SELECTING,
}
_TOP_KEYS = {"pods", "deviceClasses", "resourceClaims", "resourceClaimTemplates"} | _CLUSTER_KEYS
_NODE_EVENT_KEYS = {"at", "nodes", "count", "taint", "untaint", "cordon"}
DEFAULT_MAX_PODS = 1_000_000  # pods in one workload (every count added up); simulate --max-pods raises it
MAX_SECONDS = 10 * 365 * 86400.0  # the latest arrival and the longest run: ten years
# A pod's name as the API server checks it (a DNS-1123 subdomain).
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class WorkloadError(InvalidInput):
    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        listing = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{source}: {len(problems)} error(s)\n{listing}")


def _read(path: str | Path) -> str:
    try:
        return documents.read_text(path, documents.WORKLOAD_BYTES)
    except documents.DocumentProblem as exc:
        raise WorkloadError(str(path), [str(exc)]) from None


def _document(text: str, source: str) -> Any:
    try:
        return documents.parse(text)
    except documents.DocumentProblem as exc:
        raise WorkloadError(source, [str(exc)]) from None


def parse_workload(text: str, source: str = "workload", max_pods: int = DEFAULT_MAX_PODS) -> Arrivals:
    return _arrivals(_document(text, source), source, max_pods)


def _arrivals(doc: Any, source: str, max_pods: int, label: Callable[[int], str] = "pods[{}]".format) -> Arrivals:
    """The pods a workload document makes; ``label`` names its i-th ``pods`` entry in a problem."""
    if isinstance(doc, Mapping) and doc.get("kind") == "List":
        return _from_list(doc, source, max_pods)
    if isinstance(doc, Mapping) and (doc.get("kind") == "Pod" or doc.get("kind") in POD_MAKERS):
        return _from_list({"items": [doc]}, source, max_pods)  # one object: a plain deployment.yaml
    if not isinstance(doc, Mapping) or not isinstance(doc.get("pods"), list):
        raise WorkloadError(source, ["expected a mapping with a 'pods' list, a Kubernetes List, or one Pod, Deployment, ReplicaSet, StatefulSet or Job"])
    parts: list[Arrival | Copies] = []
    copies: dict[tuple[str, str], tuple[int, int]] = {}  # (namespace, name) of an entry of copies -> (its count, the entry)
    problems: list[str] = [f"{k}: unknown key" for k in sorted(set(doc) - _TOP_KEYS)]
    templates: dict[str, Mapping[str, Any]] = {}
    for i, template in enumerate(doc.get("resourceClaimTemplates") or []):
        name = (template.get("metadata") or {}).get("name") if isinstance(template, Mapping) else None
        if not name:
            problems.append(f"resourceClaimTemplates[{i}].metadata.name: required")
            continue
        templates[str(name)] = template
    if (too_many := _past_limit(doc["pods"], max_pods, label)) is not None:
        raise WorkloadError(source, [too_many])  # before a single pod is made
    seen: dict[str, int] = {}
    made: dict[str, int] = {}  # pod key -> the entry that makes it
    for i, entry in enumerate(doc["pods"]):
        where = label(i)
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: expected a mapping, got {type(entry).__name__}")
            continue
        problems += [f"{where}.{k}: unknown key" for k in sorted(set(entry) - _ENTRY_KEYS)]
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"{where}.name: required")
            continue
        if not _DNS_SUBDOMAIN.match(name) or len(name) > 240:
            problems.append(f"{where}.name: {name!r} is not a valid pod name (lowercase letters, digits, '-' and '.', at most 240 characters)")
            continue
        if name in seen:
            problems.append(f"{where}.name: duplicate name {name!r} (also {label(seen[name])})")
            continue
        seen[name] = i
        count = entry.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            problems.append(f"{where}.count: must be an integer >= 1, got {count!r}")
            continue
        times: dict[str, float | None] = {"at": 0.0, "duration": None}
        bad_time = False
        for key in times:
            if entry.get(key) is not None:
                try:
                    seconds = parse_duration(entry[key])
                except ValueError as exc:
                    problems.append(f"{where}.{key}: {exc}")
                    bad_time = True
                    continue
                if seconds > MAX_SECONDS:
                    problems.append(f"{where}.{key}: must be at most ten years, got {entry[key]!r}")
                    bad_time = True
                times[key] = seconds
        if bad_time:
            continue
        at, duration = times["at"] or 0.0, times["duration"]
        usage, usage_problems = _usage(entry.get("usage"), f"{where}.usage")
        if usage_problems:
            problems += usage_problems
            continue
        bare = entry.get("bare", False)
        if not isinstance(bare, bool):
            problems.append(f"{where}.bare: expected true or false, got {bare!r}")
            continue
        template = entry.get("pod")
        if not isinstance(template, Mapping):
            problems.append(f"{where}.pod: expected a Pod manifest or spec")
            continue
        as_pod = "spec" in template or "metadata" in template
        manifest = dict(template) if as_pod else {"spec": dict(template)}
        for part in ("metadata", "spec"):
            if not isinstance(manifest.get(part) or {}, Mapping):
                problems.append(f"{where}.pod.{part}: expected a mapping, got {type(manifest[part]).__name__}")
        if problems and problems[-1].startswith(f"{where}.pod."):
            continue
        unknown = unknown_fields(template, "Pod" if as_pod else "PodSpec", f"{where}.pod")
        if unknown:
            problems += unknown
            continue
        containers = (manifest.get("spec") or {}).get("containers")
        if not isinstance(containers, list) or not containers:
            problems.append(f"{where}.pod.spec.containers: at least one container is required")
            continue
        # A pod whose manifest names nothing after the pod (claims, volumes, a uid) is read
        # once per entry: the rest of its count are copies under their own names, made as
        # the simulation reaches them.
        alike = count > 1 and not (manifest.get("metadata") or {}).get("uid")
        for n in range(count):
            pod_name = name if count == 1 else f"{name}-{n}"
            doc_n = {**manifest, "metadata": {**dict(manifest.get("metadata") or {}), "name": pod_name}}
            try:
                pod = Pod.from_manifest(doc_n, f"{where}.pod")
                if pod.owner is None and not bare:
                    pod = copied(pod, {"owner": workload_owner(name, duration)})  # (nothing of the pod is made from its owner)
                claims = _template_claims(doc_n, pod, templates, f"{where}.pod")
            except InvalidInput as exc:
                problems.append(str(exc))
                break
            arrival = Arrival(at, duration, _created(pod, at), usage, claims)
            if alike and not (pod.claims or pod.volume_claims):
                copies[(pod.namespace, name)] = (count, i)
                parts.append(Copies(arrival, name, count))
                break
            if made.setdefault(pod.key, i) != i:
                problems.append(f"{where}.name: makes pod {pod.key}, which {label(made[pod.key])} makes too")
                break
            parts.append(arrival)
    problems += _copied_twice(made, copies, label)
    if problems:
        raise WorkloadError(source, problems)
    return Arrivals(parts)


def _copied_twice(made: Mapping[str, int], copies: Mapping[tuple[str, str], tuple[int, int]], label: Callable[[int], str]) -> list[str]:
    """The pods made one by one that an entry of copies makes too (``a-1`` beside ``a`` of
    ``count`` 3). Two entries of copies never make one pod: their names differ, and a copy's
    name adds only a dash and digits."""
    problems = []
    for key, i in made.items():
        namespace, _, name = key.partition("/")
        base, dash, digits = name.rpartition("-")
        entry = copies.get((namespace, base)) if dash and digits.isdigit() and str(int(digits)) == digits else None
        if entry is not None and int(digits) < entry[0]:
            first, later = sorted((i, entry[1]))
            problems.append(f"{label(later)}.name: makes pod {key}, which {label(first)} makes too")
    return problems


def _past_limit(entries: list[Any], max_pods: int, label: Callable[[int], str]) -> str | None:
    """Why the entries make too many pods: the entry whose ``count`` takes them past ``max_pods``."""
    total = 0
    for i, entry in enumerate(entries):
        total += _pods_in(entry)
        if total > max_pods:
            return f"{label(i)}.count: {_pods_in(entry):,} more pods make more than {max_pods:,} in the workload (simulate --max-pods raises the limit)"
    return None


def _pods_in(entry: Any) -> int:
    """The pods an entry makes (0 for a count that is no whole number: the entry's own check says so)."""
    count = entry.get("count", 1) if isinstance(entry, Mapping) else 0
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 1 else 0


def _usage(value: Any, where: str) -> tuple[UsageProfile | None, list[str]]:
    """``{cpu: 0.3, memory: [[0s, 0.5], [30m, 0.9]]}``: a fraction, or steps of (time since start, fraction)."""
    if value is None:
        return None, []
    if not isinstance(value, Mapping):
        return None, [f"{where}: expected a mapping of cpu and memory fractions, got {value!r}"]
    problems = [f"{where}.{k}: unknown key (cpu or memory)" for k in sorted(set(value) - {"cpu", "memory"})]
    steps: dict[str, tuple[tuple[float, float], ...]] = {}
    for key in ("cpu", "memory"):
        raw = value.get(key, 1.0)
        pairs = raw if isinstance(raw, list) else [[0, raw]]
        parsed = []
        for i, pair in enumerate(pairs):
            try:
                start, fraction = pair
                start, fraction = parse_duration(start), float(fraction)
            except (TypeError, ValueError):
                problems.append(f"{where}.{key}[{i}]: expected [time, fraction], got {pair!r}")
                continue
            if not 0 <= fraction <= 10:
                problems.append(f"{where}.{key}: fraction must be between 0 and 10, got {fraction!r}")
            parsed.append((start, fraction))
        steps[key] = tuple(sorted(parsed)) or ((0.0, 1.0),)
    return UsageProfile(steps["cpu"], steps["memory"]), problems


def _template_claims(manifest: Mapping[str, Any], pod: Pod, templates: Mapping[str, Mapping[str, Any]], where: str) -> tuple[ResourceClaim, ...]:
    """The claims Kubernetes would create for this pod from its claim templates."""
    spec = manifest.get("spec") or {}
    out = []
    for i, entry in enumerate(spec.get("resourceClaims") or []):
        template_name = entry.get("resourceClaimTemplateName")
        if not template_name:
            continue
        template = templates.get(template_name)
        if template is None:
            raise InvalidManifest(f"{where}.spec.resourceClaims[{i}].resourceClaimTemplateName", f"no resource claim template {template_name!r}")
        claim_spec = (template.get("spec") or {}).get("spec") or {}
        out.append(parse_claim_spec(claim_spec, pod.namespace, f"{pod.name}-{entry.get('name')}", f"resourceClaimTemplates[{template_name}].spec.spec"))
    return tuple(out)


def _each(doc: Mapping[str, Any], key: str, parse: Callable[[Any, str], Any], problems: list[str]) -> tuple[Any, ...]:
    """Every entry of the list ``doc[key]`` parsed; what cannot be is added to ``problems``."""
    items = doc.get(key) or []
    if not isinstance(items, list):
        problems.append(f"{key}: expected a list, got {type(items).__name__}")
        return ()
    out = []
    for i, item in enumerate(items):
        try:
            out.append(parse(item, f"{key}[{i}]"))
        except InvalidInput as exc:
            problems.append(str(exc))
    return tuple(out)


def parse_devices(text: str, source: str = "workload") -> DeviceContext:
    return _devices(_document(text, source), source)


def _devices(doc: Any, source: str) -> DeviceContext:
    if not isinstance(doc, Mapping):
        return DeviceContext()
    problems: list[str] = []

    classes = {c.name: c for c in _each(doc, "deviceClasses", parse_device_class, problems)}
    claims = {c.key: c for c in _each(doc, "resourceClaims", parse_claim, problems)}
    if problems:
        raise WorkloadError(source, problems)
    return DeviceContext(classes, claims)


@dataclass(frozen=True)
class NodeAction:
    """An operator's change to nodes at a time: taint, untaint (by key), cordon or uncordon."""

    at: float
    selector: Mapping[str, str]
    count: int | None
    taint: Taint | None = None
    untaint: str = ""
    cordon: bool | None = None


@dataclass(frozen=True)
class ClusterObjects:
    """What a workload file says of the cluster besides its pods."""

    daemon_sets: tuple[DaemonSet, ...] = ()
    claims: tuple[PersistentVolumeClaim, ...] = ()
    volumes: tuple[PersistentVolume, ...] = ()
    classes: tuple[StorageClass, ...] = ()
    node_actions: tuple[NodeAction, ...] = ()
    namespaces: tuple[Namespace, ...] = ()
    pod_selecting: tuple[PodSelecting, ...] = ()  # services, replicationControllers, replicaSets, statefulSets
    pdbs: tuple[PodDisruptionBudget, ...] = ()  # podDisruptionBudgets (policy/v1)
    reservations: tuple[tuple[Reservation, float], ...] = ()  # capacity reservations the simulated cloud holds, each with its start


def parse_cluster_objects(text: str, source: str = "workload") -> ClusterObjects:
    """The ``daemonSets``, volume objects, ``nodeEvents``, ``namespaces`` and the objects
    that select pods of a workload file."""
    return _cluster_objects(_document(text, source), source)


def _cluster_objects(doc: Any, source: str) -> ClusterObjects:
    if not isinstance(doc, Mapping):
        return ClusterObjects()
    problems: list[str] = []

    objects = ClusterObjects(
        _each(doc, "daemonSets", DaemonSet.from_manifest, problems) + _listed_daemon_sets(doc, problems),
        _each(doc, "persistentVolumeClaims", kv.parse_claim, problems),
        _each(doc, "persistentVolumes", kv.parse_volume, problems),
        _each(doc, "storageClasses", kv.parse_storage_class, problems),
        _each(doc, "nodeEvents", _node_action, problems),
        _each(doc, "namespaces", Namespace.from_manifest, problems),
        tuple(o for key, kind in _SELECTING.items() for o in _each(doc, key, kind.from_manifest, problems)),
        _each(doc, "podDisruptionBudgets", PodDisruptionBudget.from_manifest, problems),
        _each(doc, "reservations", parse_reservation, problems),
    )
    ids = [r.id for r, _ in objects.reservations]
    problems += [f"reservations: id {i} given more than once" for i in sorted({i for i in ids if ids.count(i) > 1})]
    if problems:
        raise WorkloadError(source, problems)
    return objects


def _node_action(value: Any, where: str) -> NodeAction:
    if not isinstance(value, Mapping):
        raise InvalidManifest(where, f"expected a mapping, got {type(value).__name__}")
    unknown = sorted(set(value) - _NODE_EVENT_KEYS)
    if unknown:
        raise InvalidManifest(f"{where}.{unknown[0]}", "unknown key")
    try:
        at = parse_duration(value.get("at", 0))
    except ValueError as exc:
        raise InvalidManifest(f"{where}.at", str(exc)) from None
    selector = value.get("nodes") or {}
    if not isinstance(selector, Mapping):
        raise InvalidManifest(f"{where}.nodes", "expected a mapping of node labels")
    count = value.get("count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise InvalidManifest(f"{where}.count", f"must be an integer >= 1, got {count!r}")
    taint = None
    if value.get("taint") is not None:
        t = value["taint"]
        if not isinstance(t, Mapping) or not t.get("key") or t.get("effect") not in TaintEffect._value2member_map_:
            raise InvalidManifest(f"{where}.taint", f"expected {{key, value, effect: NoSchedule | PreferNoSchedule | NoExecute}}, got {t!r}")
        taint = Taint(str(t["key"]), TaintEffect(t["effect"]), str(t.get("value") or ""))
    cordon = value.get("cordon")
    if cordon is not None and not isinstance(cordon, bool):
        raise InvalidManifest(f"{where}.cordon", f"expected true or false, got {cordon!r}")
    action = NodeAction(at, {str(k): str(v) for k, v in selector.items()}, count, taint, str(value.get("untaint") or ""), cordon)
    if action.taint is None and not action.untaint and action.cordon is None:
        raise InvalidManifest(where, "needs taint, untaint or cordon")
    return action


def _created(pod: Pod, at: float) -> Pod:
    return pod.living(created_at=at)


def _from_list(doc: Mapping[str, Any], source: str, max_pods: int) -> Arrivals:
    """A Kubernetes List (``kubectl get ... -o yaml``) of Pods and of the objects that make
    them, each expanded to its pods: every pod arrives at 0 and runs for good."""
    problems: list[str] = []
    arrivals: list[Arrival] = []
    items = doc.get("items") or []
    if not isinstance(items, list):
        raise WorkloadError(source, [f"items: expected a list of Pods, got {type(items).__name__}"])
    if len(items) > max_pods:  # each item makes a pod or more: refused before any is read
        raise WorkloadError(source, [f"items: {len(items):,} pods are more than {max_pods:,} (simulate --max-pods raises the limit)"])
    single = "kind" not in doc  # one object, wrapped by _arrivals: not a List
    for i, item in enumerate(items):
        where = "" if single else f"items[{i}]"
        kind = item.get("kind", "Pod") if isinstance(item, Mapping) else None
        if kind == "Pod":
            manifests, found = [item], unknown_fields(item, "Pod", where or "pod")
        elif kind in POD_MAKERS:
            manifests, found = expand(item, where or str(kind))
        elif kind == "DaemonSet":  # runs on every node: what it asks for is read as the cluster's (see _cluster_objects)
            continue
        else:
            found = [f"{where or 'kind'}: {kind!r} makes no pods here: a List may hold Pod, Deployment, ReplicaSet, StatefulSet, Job and DaemonSet"]
        if found:
            problems += found
            continue
        if len(arrivals) + len(manifests) > max_pods:
            problems.append(f"{where or 'replicas'}: {len(arrivals) + len(manifests):,} pods are more than {max_pods:,} (simulate --max-pods raises the limit)")
            break
        for manifest in manifests:
            try:
                pod = Pod.from_manifest(manifest, where or "pod")
            except InvalidInput as exc:
                problems.append(str(exc))
                break
            try:
                duration = _listed_duration(manifest, where or "pod")
            except InvalidInput as exc:
                problems.append(str(exc))
                break
            # A listed pod waits for a node again: its old binding and phase are not replayed.
            arrivals.append(Arrival(0.0, duration, pod.living(node_name="", phase=PodPhase.PENDING, created_at=0.0)))
    if problems:
        raise WorkloadError(source, problems)
    return Arrivals(arrivals)


def _listed_duration(manifest: Mapping[str, Any], where: str) -> float | None:
    """How long a listed pod runs: its ``simulate.nodemanager.io/duration`` annotation (a
    Job's pods finish), or for good."""
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(DURATION_ANNOTATION) if isinstance(annotations, Mapping) else None
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise InvalidManifest(f"{where}.metadata.annotations.{DURATION_ANNOTATION}", str(exc)) from None


def _listed_daemon_sets(doc: Mapping[str, Any], problems: list[str]) -> tuple[DaemonSet, ...]:
    """The DaemonSets of a List (or a single DaemonSet document)."""
    items = [doc] if doc.get("kind") == "DaemonSet" else doc.get("items") if doc.get("kind") == "List" else []
    found = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, Mapping) or item.get("kind") != "DaemonSet":
            continue
        where = "daemonSet" if item is doc else f"items[{i}]"
        unknown = unknown_fields(item, "DaemonSet", where)
        if unknown:
            problems += unknown
            continue
        try:
            found.append(DaemonSet.from_manifest(item, where))
        except InvalidInput as exc:
            problems.append(str(exc))
    return tuple(found)


@dataclass(frozen=True)
class WorkloadFile:
    """Everything a workload file holds, read and parsed once."""

    arrivals: Arrivals
    devices: DeviceContext
    objects: ClusterObjects


def load_workload_file(path: str | Path, max_pods: int = DEFAULT_MAX_PODS) -> WorkloadFile:
    source = str(path)
    if Path(path).suffix in JSON_LINES:
        return WorkloadFile(_from_lines(path, max_pods), DeviceContext(), ClusterObjects())
    doc = _document(_read(path), source)
    return WorkloadFile(_arrivals(doc, source, max_pods), _devices(doc, source), _cluster_objects(doc, source))


JSON_LINES = (".jsonl", ".ndjson")  # a workload file with these endings holds one ``pods`` entry per line


def _from_lines(path: str | Path, max_pods: int) -> Arrivals:
    """A JSON Lines workload: each line not blank is one entry of ``pods`` (named by its line
    in problems). Pods are counted as lines are read: past ``max_pods`` the reading stops."""
    source = str(path)
    entries: list[Any] = []
    lines: list[int] = []
    total = 0

    def label(i: int) -> str:
        return f"[line {lines[i]}]"

    try:
        for number, text in documents.read_lines(path, documents.WORKLOAD_BYTES):
            if not text.strip():
                continue
            try:
                entry = documents.parse_json(text)
            except documents.DocumentProblem as exc:
                raise WorkloadError(source, [f"line {number}, {exc}"]) from None
            entries.append(entry)
            lines.append(number)
            total += _pods_in(entry)
            if total > max_pods and (too_many := _past_limit(entries, max_pods, label)):
                raise WorkloadError(source, [too_many])
    except documents.DocumentProblem as exc:
        raise WorkloadError(source, [str(exc)]) from None
    return _arrivals({"pods": entries}, source, max_pods, label)
