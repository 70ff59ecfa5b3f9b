"""PodTopologySpread and InterPodAffinity: where a pod may go given where pods of its kind are.

Both follow kube-scheduler's plugins (pkg/scheduler/framework/plugins/podtopologyspread and
interpodaffinity). PreFilter reads the counts it needs from ``PodTopology`` (the handle's
index, kept current by the scaler as it places pods); Filter is then a lookup per node.

Spread: a node's domain may hold at most ``maxSkew`` more matching pods (counting the
incoming one if it matches its own selector) than the emptiest eligible domain; with fewer
eligible domains than ``minDomains`` the emptiest counts as 0. Eligible domains are those of
nodes that pass the pod's node affinity (``nodeAffinityPolicy: Honor``) and, with
``nodeTaintsPolicy: Honor``, whose taints it tolerates. The scaler adds the domains it could
still create (``handle.possible_domains``: the values the pools' offerings that the pod
accepts give a new node's label, and a new hostname), so spread reaches zones, capacity
types or any other domain where no node exists yet.

Affinity: every required affinity term needs a pod matching all the terms in the node's
domain, except that the first pod of a group that matches its own terms may go anywhere;
no required anti-affinity term may match a pod in the node's domain; and no placed pod's
required anti-affinity may match the incoming pod in the node's domain (symmetry).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from nodemanager.model import Pod
from nodemanager.model.interpod import AffinityTerm, InclusionPolicy, SpreadConstraint, parse_spread_defaults
from nodemanager.model.selectors import HARD_EFFECTS, untolerated
from nodemanager.scheduling.cycle_state import CycleState
from nodemanager.scheduling.interfaces import FilterPlugin, FrameworkHandle, PreFilterPlugin, ScorePlugin
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.status import SKIP, Status, unresolvable, unschedulable
from nodemanager.scheduling.topology import NodeFilter, PodTopology

_SPREAD_KEY = "PodTopologySpread/preFilter"
_SOFT_SPREAD_KEY = "PodTopologySpread/preScore"
_AFFINITY_KEY = "InterPodAffinity/preFilter"


def topology_of(handle: object) -> PodTopology:
    """The handle's index, or (outside the scaler) a fresh one over its nodes."""
    found = getattr(handle, "topology", None)
    return found if found is not None else PodTopology(getattr(handle, "node_infos", {}))


def _eligible(pod: Pod, constraint: SpreadConstraint, node: NodeInfo) -> bool:
    if constraint.node_affinity_policy is InclusionPolicy.HONOR and not pod.accepts_node(node.labels, node.name):
        return False
    return constraint.node_taints_policy is InclusionPolicy.IGNORE or not untolerated(node.taints, pod.tolerations, HARD_EFFECTS)


def counted_nodes(pod: Pod, constraint: SpreadConstraint) -> NodeFilter | None:
    """The nodes whose pods a spread constraint counts: those eligible for the pod (kube's
    PreFilter skips the others); None when that is every node."""
    honor_affinity = constraint.node_affinity_policy is InclusionPolicy.HONOR and bool(pod.node_selector or pod.affinity)
    honor_taints = constraint.node_taints_policy is InclusionPolicy.HONOR
    if not (honor_affinity or honor_taints):
        return None
    key = (honor_affinity and tuple(sorted(pod.node_selector.items())), honor_affinity and pod.affinity, honor_taints and pod.tolerations)
    return key, lambda node: _eligible(pod, constraint, node)


def spread_domains(handle: object, pod: Pod, constraint: SpreadConstraint, topology: PodTopology) -> frozenset[str]:
    """The domains a constraint's skew is measured over: those of existing nodes eligible
    for the pod, and the ones the scaler could still create (``handle.possible_domains``)."""
    key = constraint.topology_key
    policy = (constraint.node_affinity_policy, constraint.node_taints_policy)
    memo_key = ("domains", key, policy, tuple(sorted(pod.node_selector.items())), pod.affinity, pod.tolerations)

    def compute() -> frozenset[str]:
        found = {info.labels[key] for info in topology.infos.values() if key in info.labels and info.exists and _eligible(pod, constraint, info)}
        possible: Callable[[Pod, str], frozenset[str]] | None = getattr(handle, "possible_domains", None)
        if possible is not None:
            found |= possible(pod, key)
        return frozenset(found)

    return topology.memo(memo_key, compute)


@dataclass(frozen=True, slots=True)
class _Spread:
    constraint: SpreadConstraint
    counts: Counter[str]
    min_match: int
    self_match: int
    domains: int  # eligible domains (scores weigh a constraint by log(domains + 2))


class PodTopologySpread(PreFilterPlugin, FilterPlugin, ScorePlugin):
    """Its args are kube's PodTopologySpreadArgs (``defaultingType``, ``defaultConstraints``).
    The scaler gives pods with no constraints of their own the defaults before planning
    (``SpreadDefaults``), since its planner reads them too; here they are only checked."""

    name = "PodTopologySpread"

    def __init__(self, handle: FrameworkHandle, args: Mapping[str, object] | None = None) -> None:
        super().__init__(handle, args)
        if self.args:  # (none: kube's System defaults; a scaler makes one per computation)
            parse_spread_defaults(self.args)

    def _prepare(self, pod: Pod, constraints: list[SpreadConstraint]) -> list[_Spread]:
        topology = topology_of(self.handle)
        out = []
        for c in constraints:
            counts = topology.selector_counts(pod.namespace, c.selector, c.topology_key, counted_nodes(pod, c))
            domains = spread_domains(self.handle, pod, c, topology)
            min_match = min((counts.get(d, 0) for d in domains), default=0)
            if len(domains) < c.min_domains:
                min_match = 0
            self_match = int(c.selector is not None and c.selector.matches(pod.labels))
            out.append(_Spread(c, counts, min_match, self_match, len(domains)))
        return out

    def pre_filter(self, state: CycleState, pod: Pod) -> Status | None:
        """The counts filter and score read, once per pod (kube's PreFilter and PreScore);
        a pod whose selector kube's parser refuses cannot be scheduled, as in kube."""
        refused = next((c.selector.error for c in pod.spread if c.selector is not None and c.selector.error), "")
        if refused:
            return unresolvable(f"parsing pod: topologySpreadConstraints: {refused}", self.name)
        hard = [c for c in pod.spread if c.hard]
        soft = [c for c in pod.spread if not c.hard]
        state.write(_SPREAD_KEY, self._prepare(pod, hard) if hard else [])
        state.write(_SOFT_SPREAD_KEY, self._prepare(pod, soft) if soft else [])
        return None if hard else SKIP  # kube: no constraints to filter by, Skip

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        for s in state.get(_SPREAD_KEY) or ():
            value = node.labels.get(s.constraint.topology_key)
            if value is None:
                return unresolvable("node(s) didn't match pod topology spread constraints (missing required label)", self.name)
            if s.counts.get(value, 0) + s.self_match - s.min_match > s.constraint.max_skew:
                return unschedulable("node(s) didn't match pod topology spread constraints", self.name)
        return None

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        """kube: Skip for a pod without ScheduleAnyway constraints."""
        return None if any(not c.hard for c in pod.spread) else SKIP

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        """ScheduleAnyway constraints: the matching pods already in the node's domains,
        each weighted as kube does (log(domains + 2)); fewer is better after normalizing."""
        total = 0.0
        for s in state.get(_SOFT_SPREAD_KEY) or ():
            value = node.labels.get(s.constraint.topology_key)
            if value is not None:
                total += s.counts.get(value, 0) * math.log(s.domains + 2) + (s.constraint.max_skew - 1)
        return round(total), None

    def normalize_score(self, state: CycleState, pod: Pod, scores: dict[str, int]) -> Status | None:
        if not scores:
            return None
        low, high = min(scores.values()), max(scores.values())
        for name, value in scores.items():  # kube: MaxNodeScore * (max + min - score) / max
            scores[name] = 100 if high == 0 else 100 * (high + low - value) // high
        return None


@dataclass(frozen=True, slots=True)
class _Affinity:
    affinity: list[Counter[str]]  # per required affinity term: pods matching all of them, by domain
    anyone: bool  # some pod matches all the required affinity terms
    self_affine: bool  # the pod matches all its own required affinity terms
    anti: list[tuple[AffinityTerm, Counter[str]]]  # its anti-affinity terms with the pods they match, by domain
    repelled: list[tuple[str, Counter[str]]]  # (key, domains) where placed pods' anti-affinity matches it


class InterPodAffinity(PreFilterPlugin, FilterPlugin, ScorePlugin):
    name = "InterPodAffinity"

    def pre_filter(self, state: CycleState, pod: Pod) -> Status | None:
        a = pod.pod_affinity
        for kind, terms in (("requiredAffinityTerms", a.required), ("requiredAntiAffinityTerms", a.anti_required)):
            refused = next((t.selector.error for t in terms if t.selector is not None and t.selector.error), "")
            if refused:  # kube's PreFilter cannot parse the pod: it is unschedulable, and says why
                return unresolvable(f"parsing pod: {kind}: {refused}", self.name)
        topology = topology_of(self.handle)
        namespaces = topology.namespace_labels
        affinity = topology.term_counts(a.required) if a.required else []
        anti = [(t, topology.term_counts((t,))[0]) for t in a.anti_required]
        by_term = {t: c for t, c in topology.anti_affinity().items() if t.selects(pod.namespace, pod.labels, namespaces)}
        if not (a.required or a.anti_required or any(v > 0 for c in by_term.values() for v in c.values())):
            return SKIP  # kube: no terms of its own and no placed pod's anti-affinity matches it
        state.write(
            _AFFINITY_KEY,
            _Affinity(
                affinity,
                any(v > 0 for c in affinity for v in c.values()),
                all(t.selects(pod.namespace, pod.labels, namespaces) for t in a.required),
                anti,
                [(t.topology_key, c) for t, c in by_term.items()],
            ),
        )
        return None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        s: _Affinity | None = state.get(_AFFINITY_KEY)
        if s is None:
            return None
        # kube's order: the pod's affinity, its anti-affinity, then the placed pods' anti-affinity
        labels = node.labels
        terms = pod.pod_affinity.required
        if terms and not all(t.topology_key in labels for t in terms):
            return unresolvable("node(s) didn't match pod affinity rules", self.name)
        met = all(c.get(labels[t.topology_key], 0) > 0 for t, c in zip(terms, s.affinity, strict=True))
        if terms and not met and (s.anyone or not s.self_affine):  # the first of a self-affine group may start anywhere
            return unresolvable("node(s) didn't match pod affinity rules", self.name)
        for term, counts in s.anti:
            value = labels.get(term.topology_key)
            if value is not None and counts.get(value, 0) > 0:
                return unschedulable("node(s) didn't match pod anti-affinity rules", self.name)
        for key, domains in s.repelled:
            value = labels.get(key)
            if value is not None and domains.get(value, 0) > 0:
                return unschedulable("node(s) didn't satisfy existing pods anti-affinity rules", self.name)
        return None

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        """kube (with ``ignorePreferredTermsOfExistingPods``, as this score is): Skip for a
        pod without preferred terms."""
        a = pod.pod_affinity
        return None if a.preferred or a.anti_preferred else SKIP

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        """Preferred terms: +weight for each matching pod in the node's domain (affinity),
        -weight for anti-affinity; kube's formula without the existing pods' preferences."""
        a = pod.pod_affinity
        if not (a.preferred or a.anti_preferred):
            return 0, None
        topology = topology_of(self.handle)
        total = 0
        for sign, weighted in ((1, a.preferred), (-1, a.anti_preferred)):
            for w in weighted:
                value = node.labels.get(w.term.topology_key)
                if value is not None:
                    total += sign * w.weight * topology.term_counts((w.term,))[0].get(value, 0)
        return total, None

    def normalize_score(self, state: CycleState, pod: Pod, scores: dict[str, int]) -> Status | None:
        if not scores:
            return None
        low, high = min(scores.values()), max(scores.values())
        for name, value in scores.items():
            scores[name] = 0 if high == low else 100 * (value - low) // (high - low)
        return None
