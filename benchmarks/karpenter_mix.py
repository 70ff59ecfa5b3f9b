"""Karpenter's scheduling-benchmark mix and an independent check of its constraints.

The workload follows Karpenter's ``makeDiversePods`` (pkg/controllers/provisioning/scheduling/
scheduling_benchmark_test.go): an equal share of five kinds, the remainder generic.

* generic: label ``my-label`` of a random value a–g;
* zonal spread and hostname spread: ``my-label`` as above and a DoNotSchedule constraint of
  maxSkew 1 whose selector is another random ``my-label`` value;
* zonal self-affinity: label ``my-affininity`` (Karpenter's spelling) of a random value and a
  required affinity to that same label on the zone;
* hostname anti-affinity: label ``app: nginx`` and a required anti-affinity to it on the
  hostname, so no two share a node.

Requests are Karpenter's: CPU from {100, 250, 500, 1000, 1500}m, memory from {100, 256, 512,
1024, 2048, 4096}Mi. Pods are built as manifests and parsed as the service parses them.

``constraint_violations`` reads none of the scheduler's structures: it keeps its own copy of
each pod's constraints (``Spec``), takes the nodes' zones and names from the decision, and
replays the bindings in the order the decision lists them (the order the binder posts them),
checking each pod as kube-scheduler's filters would against the pods bound before it: spread
skew against the emptiest domain of every node's zone or hostname, the affinity term met
(or the pod the first of its self-affine group), no anti-affine pod in the domain, and no
bound pod's anti-affinity matching it. A pod that fails is a violation.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
CPUS_M = [100, 250, 500, 1000, 1500]
MEMORY_MI = [100, 256, 512, 1024, 2048, 4096]
KINDS = ("generic", "zone-spread", "hostname-spread", "zone-affinity", "hostname-anti-affinity")

Selector = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Spec:
    """One pod as the verifier sees it: its labels and constraints, copied from the generator."""

    name: str
    labels: Mapping[str, str]
    cpu_m: int
    memory_mi: int
    spread: tuple[tuple[str, Selector, int], ...] = ()  # (topology key, selector, maxSkew)
    affinity: tuple[tuple[str, Selector], ...] = ()
    anti_affinity: tuple[tuple[str, Selector], ...] = ()
    manifest: dict = field(default_factory=dict, compare=False)


def _value(rng: random.Random) -> str:
    return rng.choice("abcdefg")


def manifest(name: str, labels: dict[str, str], cpu_m: int, memory_mi: int, constraints: dict) -> dict:
    """A Pod manifest in namespace ``bench`` with one container asking for ``cpu_m`` and ``memory_mi``."""
    container = {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": f"{memory_mi}Mi"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench", "uid": f"u-{name}", "labels": labels},
        "spec": {"containers": [container], **constraints},
    }


def _pod(kind: str, name: str, rng: random.Random) -> Spec:
    if kind == "zone-affinity":
        labels = {"my-affininity": _value(rng)}
    elif kind == "hostname-anti-affinity":
        labels = {"app": "nginx"}
    else:
        labels = {"my-label": _value(rng)}
    spread: tuple[tuple[str, Selector, int], ...] = ()
    affinity: tuple[tuple[str, Selector], ...] = ()
    anti: tuple[tuple[str, Selector], ...] = ()
    constraints: dict = {}
    if kind in ("zone-spread", "hostname-spread"):
        key = ZONE if kind == "zone-spread" else HOSTNAME
        selector = {"my-label": _value(rng)}
        spread = ((key, frozenset(selector.items()), 1),)
        constraints["topologySpreadConstraints"] = [
            {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": selector}}
        ]
    elif kind == "zone-affinity":
        affinity = ((ZONE, frozenset(labels.items())),)
        term = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": ZONE}
        constraints["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif kind == "hostname-anti-affinity":
        anti = ((HOSTNAME, frozenset(labels.items())),)
        term = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": HOSTNAME}
        constraints["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    cpu_m, memory_mi = rng.choice(CPUS_M), rng.choice(MEMORY_MI)
    return Spec(name, labels, cpu_m, memory_mi, spread, affinity, anti, manifest(name, labels, cpu_m, memory_mi, constraints))


def diverse_pods(n: int, rng: random.Random) -> list[Spec]:
    """``n`` pods: n // 5 of each kind in Karpenter's order, the remainder generic."""
    kinds = [k for k in KINDS for _ in range(n // len(KINDS))]
    kinds += ["generic"] * (n - len(kinds))
    return [_pod(kind, f"p{i}", rng) for i, kind in enumerate(kinds)]


class _Counts:
    """Admitted pods matching a selector per domain of a key, with the emptiest domain's
    count kept current (counts only grow during a replay)."""

    def __init__(self, domains: set[str]) -> None:
        self.by_domain: Counter[str] = Counter()
        self.histogram = Counter({0: len(domains)})
        self.low = 0
        self.total = 0

    def add(self, domain: str) -> None:
        c = self.by_domain[domain]
        self.by_domain[domain] = c + 1
        self.histogram[c] -= 1
        self.histogram[c + 1] += 1
        self.total += 1
        while self.histogram[self.low] == 0:
            self.low += 1


def _matches(selector: Selector, labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector)


def constraint_violations(specs: list[Spec], bindings: Mapping[str, str], zones: Mapping[str, str]) -> list[str]:
    """Pods (keyed ``bench/<name>`` in ``bindings``, in binding order) that kube-scheduler would
    not admit where they were bound; ``zones`` maps each node to its zone. Unbound pods are
    not counted here (the resource verifier counts them)."""
    domain_of = {ZONE: dict(zones), HOSTNAME: {n: n for n in zones}}
    groups = {(key, sel) for s in specs for key, sel, _ in s.spread} | {g for s in specs for g in s.affinity + s.anti_affinity}
    counts = {g: _Counts(set(domain_of[g[0]].values())) for g in groups}
    member_of = {s.name: [g for g in groups if _matches(g[1], s.labels)] for s in specs}
    repelling: dict[tuple[str, str], Counter[Selector]] = defaultdict(Counter)  # admitted pods' anti-affinity by (key, domain)

    def admits(s: Spec, node: str) -> bool:
        for key, sel, skew in s.spread:
            c = counts[(key, sel)]
            if c.by_domain[domain_of[key][node]] + _matches(sel, s.labels) - c.low > skew:
                return False
        for key, sel in s.affinity:
            c = counts[(key, sel)]
            if c.by_domain[domain_of[key][node]] == 0 and not (c.total == 0 and _matches(sel, s.labels)):
                return False
        if any(counts[(key, sel)].by_domain[domain_of[key][node]] for key, sel in s.anti_affinity):
            return False
        return not any(_matches(sel, s.labels) for key in domain_of for sel in repelling.get((key, domain_of[key][node]), ()))

    def admit(s: Spec, node: str) -> None:
        for key, sel in member_of[s.name]:
            counts[(key, sel)].add(domain_of[key][node])
        for key, sel in s.anti_affinity:
            repelling[(key, domain_of[key][node])][sel] += 1

    by_name = {f"bench/{s.name}": s for s in specs}
    violations = []
    for key, node in bindings.items():
        s = by_name[key]
        if not admits(s, node):
            violations.append(s.name)
        admit(s, node)
    return violations


def anti_affine_count(specs: list[Spec]) -> int:
    """Pods that each need a node of their own (a lower bound on the node count)."""
    return sum(1 for s in specs if any(key == HOSTNAME and _matches(sel, s.labels) for key, sel in s.anti_affinity))


def zone_counts(specs: list[Spec], bindings: Mapping[str, str], zones: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """Bound pods per kind per zone, for the report."""
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for s in specs:
        node = bindings.get(f"bench/{s.name}")
        if node is not None:
            kind = "spread" if s.spread else "affinity" if s.affinity else "anti-affinity" if s.anti_affinity else "generic"
            out[kind][zones[node]] += 1
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}
