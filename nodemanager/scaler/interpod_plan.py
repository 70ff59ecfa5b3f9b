"""Placing pods with inter-pod constraints in batches, not one pod at a time.

kube-scheduler checks topology spread and pod (anti-)affinity for one pod at a time, against
the pods placed before it. A plan is valid when *some* order admits every pod that way, so the
scaler may reason about a whole group of identical pods at once:

* **Zone-level constraints** (DoNotSchedule spread, required affinity and anti-affinity on
  ``topology.kubernetes.io/zone``) are settled first, at the granularity of zones: the group's
  pods are admitted one by one into the zones new nodes may use, with the filters' own rules
  (skew against the emptiest eligible domain, the first pod of a self-affine group anywhere,
  no anti-affine pod in the zone, no placed pod's anti-affinity matching). Each pod is then
  *pinned* to its zone, as Karpenter turns a topology decision into a node requirement, and
  packed like any zonal pod. Zones are chosen emptiest first, so where the constraints are
  silent a group spreads over the zones.
* **Hostname-level constraints** become a cap on how many pods of the group a node takes:
  ``maxSkew`` minus the matching pods already there for a spread that counts the pod itself
  (a new node is always an empty hostname domain, so the emptiest one holds 0), one for
  anti-affinity to its own kind. Constraints that do not count the pod itself do not change
  as the group is placed: the filter run for its first pod holds for the rest.

Anything else (another topology key, required affinity on the hostname, more than this) is
placed one pod at a time through the framework.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodemanager.model import Pod, PodKey
from nodemanager.model.interpod import AffinityTerm, LabelSelector, SpreadConstraint
from nodemanager.model.labels import CAPACITY_TYPE, HOSTNAME, ZONE
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.plugins.interpod import counted_nodes, least_matching
from nodemanager.scheduling.topology import NodeFilter, PodTopology, selected

_PLANNED_KEYS = (ZONE, HOSTNAME)


def _hard_spread(pod: Pod) -> list[SpreadConstraint]:
    return [c for c in pod.spread if c.hard]


def _self_spread(pod: Pod, c: SpreadConstraint) -> bool:
    return c.selector is not None and c.selector.matches(pod.labels)


def _self_term(pod: Pod, term: AffinityTerm, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
    return term.selects(pod.namespace, pod.labels, namespace_labels)


def plannable(pod: Pod) -> bool:
    """Its hard constraints are on zones and hostnames only, with no required affinity to a
    hostname (the first pod of such a group decides every other's node)."""
    a = pod.pod_affinity
    return (
        all(c.topology_key in _PLANNED_KEYS for c in _hard_spread(pod))
        and all(t.topology_key == ZONE for t in a.required)
        and all(t.topology_key in _PLANNED_KEYS for t in a.anti_required)
    )


def other_keys(pod: Pod) -> tuple[str, ...]:
    """The labels other than zone, capacity type and hostname that the pod's hard
    constraints are on: what else sets a new node's domain for it (an instance type, an
    architecture, a pool's own label)."""
    a = pod.pod_affinity
    keys = {c.topology_key for c in _hard_spread(pod)} | {t.topology_key for t in (*a.required, *a.anti_required)}
    return tuple(sorted(keys - {ZONE, CAPACITY_TYPE, HOSTNAME}))


def label_blind(pod: Pod) -> bool:
    """No filter of the pod's own reads its labels: no hard spread counts the pod itself
    and no required (anti-)affinity (whose first-pod rule and caps read them). Placed
    pods' anti-affinity may still select it: the caller asks."""
    a = pod.pod_affinity
    return not (a.required or a.anti_required) and not any(_self_spread(pod, c) for c in _hard_spread(pod))


def zone_level(pod: Pod) -> bool:
    """Some hard constraint is decided per zone."""
    a = pod.pod_affinity
    return any(c.topology_key == ZONE for c in _hard_spread(pod)) or any(t.topology_key == ZONE for t in (*a.required, *a.anti_required))


def static(pod: Pod, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
    """Placing pods of its kind on one node never changes whether the next may go on
    another: no required affinity, no hard spread but by hostname, and zone anti-affinity
    only to pods not of its kind."""
    a = pod.pod_affinity
    return (
        not a.required
        and all(c.topology_key == HOSTNAME for c in _hard_spread(pod))
        and all(t.topology_key == HOSTNAME or (t.topology_key == ZONE and not _self_term(pod, t, namespace_labels)) for t in a.anti_required)
    )


def host_cap(pod: Pod, info: NodeInfo | None, topology: PodTopology) -> int | None:
    """How many pods of its kind ``info`` may take (an empty new node when None) besides
    the ones there, if the first passes the filters; None: no limit from these constraints."""
    caps = []
    host = info.labels.get(HOSTNAME) if info is not None else None
    for c in _hard_spread(pod):
        if c.topology_key == HOSTNAME and _self_spread(pod, c):
            assert c.selector is not None
            there = topology.selector_counts(pod.namespace, c.selector, HOSTNAME).get(host, 0) if host else 0
            caps.append(c.max_skew - there)
    if any(t.topology_key == HOSTNAME and _self_term(pod, t, topology.namespace_labels) for t in pod.pod_affinity.anti_required):
        caps.append(1)
    return max(min(caps), 0) if caps else None


def why_apart(pod: Pod) -> str:
    """The constraint behind ``host_cap``, for reasons a user reads."""
    if any(t.topology_key == HOSTNAME for t in pod.pod_affinity.anti_required):
        return f"pod anti-affinity on {HOSTNAME} keeps these pods on separate nodes"
    skew = min(c.max_skew for c in _hard_spread(pod) if c.topology_key == HOSTNAME)
    return f"topology spread on {HOSTNAME} allows {skew} of these pods per node"


def pins(pod: Pod, zone: str) -> dict[str, Any]:
    """What pins the pod to its zone (``Pod.constrained``), the same for every pod of its
    class: a node selector on the zone replaces its zone spread and zone affinity (zone
    anti-affinity stays: placed pods' terms repel later pods)."""
    a = pod.pod_affinity
    if any(t.topology_key == ZONE for t in a.required):
        a = dataclasses.replace(a, required=tuple(t for t in a.required if t.topology_key != ZONE))
    return {
        "node_selector": {**pod.node_selector, ZONE: zone},
        "spread": tuple(c for c in pod.spread if not (c.hard and c.topology_key == ZONE)),
        "pod_affinity": a,
    }


@dataclass
class ZoneRule:
    """One zone-level constraint of the group with working copies of its counts."""

    kind: str  # "spread" | "affinity" | "anti"
    counts: list[Counter[str]]  # per term (affinity) or one
    counts_self: bool  # a placed pod of the group adds to counts
    skew: int = 0
    domains: frozenset[str] = frozenset()
    min_domains: int = 1
    first_allowed: bool = False  # affinity: no matching pod anywhere and the pod matches itself

    def admits(self, zone: str) -> str:
        """Why a pod of the group may not go to ``zone`` now ("" if it may)."""
        if self.kind == "spread":
            counts = self.counts[0]
            low = 0 if len(self.domains) < self.min_domains else least_matching(counts, self.domains)
            if counts.get(zone, 0) + self.counts_self - low > self.skew:
                return "node(s) didn't match pod topology spread constraints"
        elif self.kind == "affinity":
            met = all(c.get(zone, 0) > 0 for c in self.counts)
            if not met and not self.first_allowed:
                return "node(s) didn't match pod affinity rules"
        elif self.counts[0].get(zone, 0) > 0:
            return "node(s) didn't match pod anti-affinity rules"
        return ""

    def admit(self, zone: str) -> None:
        if self.counts_self:
            for counts in self.counts:
                counts[zone] += 1
            self.first_allowed = False


def zone_rules(rep: Pod, topology: PodTopology | Pending, domains: Callable[[SpreadConstraint], frozenset[str]]) -> list[ZoneRule]:
    """The group's zone-level constraints, with working copies of the counts they read now."""
    namespaces = topology.namespace_labels
    rules: list[ZoneRule] = []
    for c in _hard_spread(rep):
        if c.topology_key == ZONE and c.selector is not None:
            counts = Counter(topology.selector_counts(rep.namespace, c.selector, ZONE, counted_nodes(rep, c)))
            rules.append(ZoneRule("spread", [counts], _self_spread(rep, c), c.max_skew, domains(c), c.min_domains))
    required = rep.pod_affinity.required
    if required:
        per_term = [Counter(c) for c in topology.term_counts(required)]
        anyone = any(v > 0 for c in per_term for v in c.values())
        self_affine = all(_self_term(rep, t, namespaces) for t in required)
        rules.append(ZoneRule("affinity", per_term, self_affine, first_allowed=not anyone and self_affine))
    for t in rep.pod_affinity.anti_required:
        if t.topology_key == ZONE:
            rules.append(ZoneRule("anti", [Counter(topology.term_counts((t,))[0])], _self_term(rep, t, namespaces)))
    return rules


def admitted(rules: list[ZoneRule], placed: Sequence[tuple[PodKey, str]]) -> list[PodKey]:
    """Of the group's pods placed in their zones (in plan order), those ``rules`` (as
    ``zone_rules`` made them before any was placed) admit given the ones admitted before:
    where some pods of a plan found no node, a later pod may no longer keep to the skew
    or affinity it was planned for (its zone's count is what the plan said, another's less)."""
    out = []
    for key, zone in placed:
        if not any(r.admits(zone) for r in rules):
            for r in rules:
                r.admit(zone)
            out.append(key)
    return out


def plan_zones(
    pods: Sequence[Pod],
    zones: Sequence[str],
    topology: PodTopology | Pending,
    domains: Callable[[SpreadConstraint], frozenset[str]],
    load: Mapping[str, int],
) -> tuple[dict[PodKey, str], str]:
    """A zone for each pod of one group (identical constraints and labels), admitted in
    order among ``zones`` (where new nodes for them can be created), and why the rest
    cannot go anywhere. ``load``: nodes per zone so far, the last tie-break."""
    rep = pods[0]
    namespaces = topology.namespace_labels
    rules = zone_rules(rep, topology, domains)
    repelled = {
        zone
        for term, domains in topology.anti_affinity().items()
        if term.topology_key == ZONE and _self_term(rep, term, namespaces)
        for zone, n in domains.items()
        if n > 0
    }
    open_zones = [z for z in zones if z not in repelled]
    placed: Counter[str] = Counter()
    spreads = [r for r in rules if r.kind == "spread" and r.counts_self]
    affine = [r for r in rules if r.kind == "affinity"]

    def preference(zone: str) -> tuple:
        return (
            sum(r.counts[0].get(zone, 0) for r in spreads),  # the emptiest domain first
            -sum(sum(c.get(zone, 0) for c in r.counts) for r in affine),  # with its kind
            placed[zone],  # else spread the group
            load.get(zone, 0),
            zone,
        )

    out: dict[PodKey, str] = {}
    for pod in pods:
        why = "" if open_zones else "node(s) didn't satisfy existing pods anti-affinity rules"
        for zone in sorted(open_zones, key=preference):
            why = next((w for r in rules if (w := r.admits(zone))), "")
            if not why:
                for r in rules:
                    r.admit(zone)
                placed[zone] += 1
                out[pod.key] = zone
                break
        if why:  # nothing changed since: no later pod of the group fits either
            return out, why
    return out, ""


class Pending:
    """Zone counts as they will be once pods given a zone but not placed yet are placed: a
    ``PodTopology`` for ``plan_zones`` (its questions on zones, answered with those pods
    added), so the later groups of a batch (``zone_batch``) plan as if the earlier ones
    were placed. Only questions about every node's pods can be answered so (a count over
    the nodes some pod may use cannot know the nodes these pods will get)."""

    def __init__(self, topology: PodTopology) -> None:
        self.topology = topology
        self.namespace_labels = topology.namespace_labels
        self._kinds: dict[tuple, tuple[Pod, Counter[str]]] = {}  # kind -> one such pod, and how many per zone

    def add(self, pod: Pod, zone: str) -> None:
        entry = self._kinds.get(pod.kind)
        if entry is None:
            entry = self._kinds[pod.kind] = (pod, Counter())
        entry[1][zone] += 1

    def clear(self) -> None:
        self._kinds.clear()

    def selector_counts(self, namespace: str | None, selector: LabelSelector | None, key: str, only: NodeFilter | None = None) -> Counter[str]:
        if only is not None or key != ZONE:
            raise ValueError("Pending answers counts over every node's pods on zones only")
        counts = Counter(self.topology.selector_counts(namespace, selector, key))
        if selector is not None:
            for pod, zones in self._kinds.values():
                if selected(pod, namespace, selector):
                    counts.update(zones)
        return counts

    def term_counts(self, terms: tuple[AffinityTerm, ...]) -> list[Counter[str]]:
        if any(t.topology_key != ZONE for t in terms):
            raise ValueError("Pending answers counts on zones only")
        found = [Counter(c) for c in self.topology.term_counts(terms)]
        for pod, zones in self._kinds.values():
            if all(t.selects(pod.namespace, pod.labels, self.namespace_labels) for t in terms):
                for counter in found:
                    counter.update(zones)
        return found

    def anti_affinity(self) -> dict[AffinityTerm, Counter[str]]:
        return self.topology.anti_affinity()  # (pods pending hold no anti-affinity terms)
