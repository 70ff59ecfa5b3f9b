"""An independent check of a provisioning plan: the problem as JSON (Kubernetes pod manifests,
instance types with their allocatable and offerings, the pool's labels and taints) and a plan
(nodes, each with its type, zone and capacity type, and where each pod goes), from any
scheduler. It reads neither scheduler's code: quantities, selectors, tolerations and the
topology rules are worked out here from the manifests.

Checked, for every pod:

* placed once on a node of the plan, or reported unplaced (``unaccounted`` otherwise);
* ``offering``: the node's type, zone and capacity type are an available offering;
* ``overfull``: its node holds its pods' requests and the DaemonSet pods that run there
  (those tolerating the node's taints and selecting it), CPU, memory and pod count;
* ``selector``, ``node-affinity``, ``taint``: its nodeSelector, required node affinity and
  tolerations against the node's labels and taints;
* ``spread``, ``pod-affinity``, ``pod-anti-affinity``: its DoNotSchedule topology spread and
  required pod (anti-)affinity terms, judged on the final placement as kube-scheduler would
  judge the pod were it the last to come (everyone else where the plan puts them), the way the
  descheduler judges a running cluster: the pod's domain at most ``maxSkew`` above the emptiest
  domain among the nodes it may use; a pod matching each affinity term in its domain (or, when
  no other pod matches anywhere, the pod matching its own term); no pod matching an
  anti-affinity term in its domain, which with every pod checked covers both directions.

Node labels are the well-known ones a node of that offering carries (instance type, zone,
architecture, OS, capacity type, hostname = the node's name) and the pool's labels.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
KINDS = ("offering", "overfull", "selector", "node-affinity", "taint", "spread", "pod-affinity", "pod-anti-affinity")

_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_QUANTITY = re.compile(r"^([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")


def quantity(value: object, milli: bool = False) -> int:
    """A Kubernetes quantity as an integer: in thousandths when ``milli`` (CPU), else in units
    (bytes), rounded up as kube rounds requests."""
    text = str(value)
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"not a quantity this check reads: {text!r}")
    number, suffix = match.group(1), match.group(2) or ""
    scale = 1000 if milli else 1
    if suffix == "m":
        return -(-int(float(number) * (scale)) // 1000)
    return -(-round(float(number) * _SUFFIX[suffix] * scale * 1000) // 1000)


def requests(manifest: Mapping) -> tuple[int, int]:
    """(milli-CPU, memory bytes) a pod asks for: its containers' sum, at least its largest init
    container's."""
    spec = manifest.get("spec", {})

    def total(containers: Iterable[Mapping]) -> list[tuple[int, int]]:
        out = []
        for c in containers:
            r = (c.get("resources") or {}).get("requests") or {}
            out.append((quantity(r.get("cpu", 0), milli=True), quantity(r.get("memory", 0))))
        return out

    main = total(spec.get("containers", []))
    init = total(spec.get("initContainers", []))
    cpu, memory = sum(c for c, _ in main), sum(m for _, m in main)
    return max([cpu] + [c for c, _ in init]), max([memory] + [m for _, m in init])


def selects(selector: Mapping | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against labels (an empty selector matches everything)."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_expression(e, labels) for e in selector.get("matchExpressions") or [])


def _expression(e: Mapping, labels: Mapping[str, str]) -> bool:
    key, op, values = e["key"], e["operator"], e.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def node_affinity_holds(spec: Mapping, labels: Mapping[str, str]) -> tuple[bool, bool]:
    """(nodeSelector held, required node affinity held)."""
    selector = all(labels.get(k) == v for k, v in (spec.get("nodeSelector") or {}).items())
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    if not required:
        return selector, True
    return selector, any(all(_expression(e, labels) for e in term.get("matchExpressions") or []) for term in required)


def tolerates(spec: Mapping, taints: Iterable[Mapping]) -> bool:
    """Every NoSchedule and NoExecute taint tolerated."""
    tolerations = spec.get("tolerations") or []
    for taint in taints:
        if taint.get("effect") == "PreferNoSchedule":
            continue
        if not any(_tolerated(t, taint) for t in tolerations):
            return False
    return True


def _tolerated(t: Mapping, taint: Mapping) -> bool:
    if t.get("effect") and t["effect"] != taint.get("effect"):
        return False
    if not t.get("key"):
        return t.get("operator") == "Exists"
    if t["key"] != taint["key"]:
        return False
    return t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", "")


@dataclass
class Report:
    """What the check found; ``violations`` names each pod and node at fault by kind."""

    pods: int = 0
    placed: int = 0
    unplaced: int = 0
    unaccounted: int = 0
    nodes: int = 0
    cost_per_hour: float = 0.0
    violations: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})

    @property
    def total_violations(self) -> int:
        return sum(len(v) for v in self.violations.values())

    def summary(self) -> dict[str, object]:
        """The figures, each kind of violation counted."""
        return {**asdict(self), "cost_per_hour": round(self.cost_per_hour, 4), "violations": {k: len(v) for k, v in self.violations.items()}}


def _key(manifest: Mapping) -> str:
    meta = manifest["metadata"]
    return f"{meta.get('namespace', 'default')}/{meta['name']}"


def check(problem: Mapping, plan: Mapping) -> Report:
    """Check ``plan`` (``nodes``: the nodes it starts, each with name, instanceType, zone,
    capacityType; ``bindings``: pod key to node name, a new node or one of the problem's
    ``existingNodes``; ``unplaced``: pod key to reason) against ``problem``, whose
    ``runningPods`` already run on its existing nodes."""
    report = Report(pods=len(problem["pods"]))
    types = {t["name"]: t for t in problem["instanceTypes"]}
    placement = _Placement(problem)
    for node in plan["nodes"]:
        itype = types.get(node["instanceType"])
        offering = None
        if itype is not None:
            offering = next((o for o in itype["offerings"] if (o["zone"], o["capacityType"]) == (node["zone"], node["capacityType"])), None)
        if offering is None or not offering["available"]:
            report.violations["offering"].append(node["name"])
            continue
        report.cost_per_hour += offering["price"]
        placement.labels_of[node["name"]] = _labels(problem, itype, node)
        placement.allocatable[node["name"]] = (itype["cpuMillis"], itype["memoryBytes"], itype["pods"])
    report.nodes = len(placement.labels_of)
    for node in problem.get("existingNodes") or []:  # already running: no offering to check, no cost to the plan
        itype = types[node["instanceType"]]
        placement.labels_of[node["name"]] = _labels(problem, itype, node)
        placement.allocatable[node["name"]] = (itype["cpuMillis"], itype["memoryBytes"], itype["pods"])

    bindings: dict[str, str] = dict(plan["bindings"])
    unplaced = set(plan.get("unplaced") or ())
    pending = {_key(m) for m in problem["pods"]}
    report.unplaced = len(unplaced & (pending - bindings.keys()))
    report.unaccounted = sum(1 for k in pending if k not in bindings and k not in unplaced) + sum(1 for n in bindings.values() if n not in placement.labels_of)
    running = {_key(m): m["spec"]["nodeName"] for m in problem.get("runningPods") or []}
    placement.bound = running | {k: n for k, n in bindings.items() if n in placement.labels_of and k in pending}
    report.placed = len(placement.bound) - len(running)
    placement.check_nodes(report)
    placement.check_topology(report)
    return report


def _labels(problem: Mapping, itype: Mapping, node: Mapping) -> dict[str, str]:
    return {
        **(problem.get("labels") or {}),
        "node.kubernetes.io/instance-type": itype["name"],
        ZONE: node["zone"],
        "kubernetes.io/arch": {"x86_64": "amd64"}.get(itype["architecture"], itype["architecture"]),
        "kubernetes.io/os": "linux",
        CAPACITY_TYPE: node["capacityType"],
        HOSTNAME: node["name"],
    }


@dataclass
class _Group:
    """Pods sharing one spread constraint or one affinity term: (namespace, topology key,
    selector, and for spread the skew and the nodes the pods may use)."""

    namespace: str
    key: str
    selector: Mapping | None
    skew: int = 0
    spec: Mapping = field(default_factory=dict)  # one member's spec: its node constraints pick the eligible domains
    members: list[tuple[str, str, bool]] = field(default_factory=list)  # (pod key, domain, matches the selector itself)


class _Placement:
    """The plan's nodes (labels, allocatable) and where each placed pod is."""

    def __init__(self, problem: Mapping) -> None:
        self.problem = problem
        self.by_key = {_key(m): m for m in [*problem["pods"], *(problem.get("runningPods") or [])]}
        self.labels_of: dict[str, dict[str, str]] = {}
        self.allocatable: dict[str, tuple[int, int, int]] = {}
        self.bound: dict[str, str] = {}
        self._matching: dict[tuple, Counter[str]] = {}

    def check_nodes(self, report: Report) -> None:
        taints = self.problem.get("taints") or []
        load: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for node, labels in self.labels_of.items():
            for ds in self.problem.get("daemonSetPods") or []:
                if tolerates(ds["spec"], taints) and all(node_affinity_holds(ds["spec"], labels)):
                    _add(load[node], requests(ds))
        for key, node in self.bound.items():
            manifest = self.by_key[key]
            selector, affinity = node_affinity_holds(manifest["spec"], self.labels_of[node])
            for held, kind in ((selector, "selector"), (affinity, "node-affinity"), (tolerates(manifest["spec"], taints), "taint")):
                if not held:
                    report.violations[kind].append(key)
            _add(load[node], requests(manifest))
        for node, (cpu, memory, count) in load.items():
            have = self.allocatable[node]
            if cpu > have[0] or memory > have[1] or count > have[2]:
                report.violations["overfull"].append(node)

    def matching(self, namespace: str, key: str, selector: Mapping | None, domains: frozenset[str] | None = None) -> Counter[str]:
        """Placed pods of ``namespace`` matching ``selector``, per domain of ``key`` (only in
        ``domains`` when given: kube counts pods on the nodes the incoming pod may use)."""
        memo = (namespace, key, _canonical(selector), domains)
        if memo not in self._matching:
            out: Counter[str] = Counter()
            for pod_key, node in self.bound.items():
                meta = self.by_key[pod_key]["metadata"]
                domain = self.labels_of[node].get(key)
                if (
                    domain is not None
                    and (domains is None or domain in domains)
                    and meta.get("namespace", "default") == namespace
                    and selects(selector, meta.get("labels") or {})
                ):
                    out[domain] += 1
            self._matching[memo] = out
        return self._matching[memo]

    def check_topology(self, report: Report) -> None:
        """Spread and pod (anti-)affinity. Spread and affinity depend on the order pods come
        in: a plan holds them when some order exists in which kube-scheduler admits every pod
        where the plan puts it. Each constraint is judged on its own (a pod under two is
        checked against each; the orders may differ)."""
        spreads: dict[tuple, _Group] = {}
        affinities: dict[tuple, _Group] = {}
        for pod_key, node in self.bound.items():
            manifest = self.by_key[pod_key]
            spec, namespace = manifest["spec"], manifest["metadata"].get("namespace", "default")
            own = manifest["metadata"].get("labels") or {}
            labels = self.labels_of[node]
            for constraint in spec.get("topologySpreadConstraints") or []:
                if constraint.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                    continue
                key, selector, skew = constraint["topologyKey"], constraint.get("labelSelector"), constraint["maxSkew"]
                group = spreads.setdefault((namespace, key, _canonical(selector), skew, _node_constraints(spec)), _Group(namespace, key, selector, skew, spec))
                group.members.append((pod_key, labels.get(key, ""), selects(selector, own)))
            affinity = spec.get("affinity") or {}
            for term in (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
                key, selector = term["topologyKey"], term.get("labelSelector")
                group = affinities.setdefault((namespace, key, _canonical(selector)), _Group(namespace, key, selector))
                group.members.append((pod_key, labels.get(key, ""), selects(selector, own)))
            for term in (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
                key, selector = term["topologyKey"], term.get("labelSelector")
                domain = labels.get(key)
                if domain is not None and self.matching(namespace, key, selector)[domain] - int(selects(selector, own)) > 0:
                    report.violations["pod-anti-affinity"].append(pod_key)
        for group in spreads.values():
            eligible = frozenset(n[group.key] for n in self.labels_of.values() if group.key in n and all(node_affinity_holds(group.spec, n)))
            report.violations["spread"] += _spread_faults(group, self.matching(group.namespace, group.key, group.selector, eligible), eligible)
        for group in affinities.values():
            report.violations["pod-affinity"] += _affinity_faults(group, self.matching(group.namespace, group.key, group.selector))


def _add(load: list[int], asks: tuple[int, int]) -> None:
    load[0] += asks[0]
    load[1] += asks[1]
    load[2] += 1


def _canonical(selector: Mapping | None) -> str:
    return repr(sorted((selector or {}).get("matchLabels", {}).items())) + repr((selector or {}).get("matchExpressions") or [])


def _node_constraints(spec: Mapping) -> str:
    return repr((sorted((spec.get("nodeSelector") or {}).items()), (spec.get("affinity") or {}).get("nodeAffinity")))


def _spread_faults(group: _Group, final: Counter[str], eligible: frozenset[str]) -> list[str]:
    """Members no admission order lets in. A member that does not match its own selector goes
    first (every count 0, skew 0). The matching pods fill the domains lowest first, each
    domain's members before the pods that merely match: that order raises the emptiest domain
    as early as possible and lets every member in at its domain's lowest count, so if it
    turns a member away, every order does."""
    faults = [k for k, domain, me in group.members if domain not in eligible]
    members: dict[str, list[str]] = {}
    for k, domain, me in group.members:
        if me and domain in eligible:
            members.setdefault(domain, []).append(k)
    current = dict.fromkeys(eligible, 0)
    histogram = Counter({0: len(current)})
    low = 0
    heap = [(0, d) for d in eligible if final[d]]
    heapq.heapify(heap)
    while heap:
        count, domain = heapq.heappop(heap)
        waiting = members.get(domain)
        if waiting:
            k = waiting.pop()
            if count + 1 - low > group.skew:
                faults.append(k)
        histogram[count] -= 1
        histogram[count + 1] += 1
        current[domain] = count + 1
        while histogram[low] == 0:
            low += 1
        if count + 1 < final[domain]:
            heapq.heappush(heap, (count + 1, domain))
    return faults


def _affinity_faults(group: _Group, final: Counter[str]) -> list[str]:
    """Members no admission order lets in. A domain holding a matching pod that is not a
    member lets its members in once that pod is there. Of the other domains, one may be
    where the first matching pod of all lands: a member matching its own term, placed before
    any other; the rest are turned away."""
    by_domain: dict[str, list[tuple[str, bool]]] = {}
    for k, domain, me in group.members:
        by_domain.setdefault(domain, []).append((k, me))
    bare = {d: pods for d, pods in by_domain.items() if final[d] - sum(me for _, me in pods) == 0}
    seeds = [d for d, pods in bare.items() if any(me for _, me in pods)]
    if seeds:
        del bare[max(seeds, key=lambda d: (len(bare[d]), d))]
    return [k for pods in bare.values() for k, _ in pods]
