"""PodTopologySpread and InterPodAffinity: where a pod may go given where pods of its kind are.

Both follow kube-scheduler's plugins (pkg/scheduler/framework/plugins/podtopologyspread and
interpodaffinity). PreFilter reads the counts it needs from ``PodTopology`` (the handle's
index, kept current by the scaler as it places pods); Filter is then a lookup per node.

Spread: a node's domain may hold at most ``maxSkew`` more matching pods (counting the
incoming one if it matches its own selector) than the emptiest eligible domain; with fewer
eligible domains than ``minDomains`` the emptiest counts as 0. Eligible domains are those of
nodes that pass the pod's node affinity (``nodeAffinityPolicy: Honor``) and, with
``nodeTaintsPolicy: Honor``, whose taints it tolerates, among nodes that carry every key of
the pod's constraints of the same kind (hard or soft; kube's system defaults excepted). The
scaler adds the domains it could still create (``handle.possible_domains``: the values the
pools' offerings that the pod accepts give a new node's label, and a new hostname), so
spread reaches zones, capacity types or any other domain where no node exists yet. The
score weighs each ScheduleAnyway constraint by log(domains among the candidates + 2), and
leaves out candidates without every key.

Affinity: every required affinity term needs a pod matching all the terms in the node's
domain, except that the first pod of a group that matches its own terms may go anywhere;
no required anti-affinity term may match a pod in the node's domain; and no placed pod's
required anti-affinity may match the incoming pod in the node's domain (symmetry). Its
score sums what pulls the pod toward a node's domains: its own preferred terms, per
matching pod there, and placed pods' required affinity and preferred terms that select it
(kube's default; ``ignorePreferredTermsOfExistingPods`` skips pods with no preferences).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from nodemanager.errors import InvalidManifest
from nodemanager.model import Pod
from nodemanager.model.interpod import AffinityTerm, InclusionPolicy, SpreadConstraint, parse_spread_defaults
from nodemanager.model.labels import HOSTNAME
from nodemanager.model.selectors import HARD_EFFECTS, untolerated
from nodemanager.scheduling.cycle_state import CycleState
from nodemanager.scheduling.interfaces import FilterPlugin, FrameworkHandle, PreFilterPlugin, ScorePlugin
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.status import SKIP, Status, error, unresolvable, unschedulable
from nodemanager.scheduling.topology import NodeFilter, PodTopology

_SPREAD_KEY = "PodTopologySpread/preFilter"
_SOFT_SPREAD_KEY = "PodTopologySpread/preScore"
_AFFINITY_KEY = "InterPodAffinity/preFilter"
_AFFINITY_SCORE_KEY = "InterPodAffinity/preScore"


def topology_of(handle: object) -> PodTopology:
    """The handle's index, or (outside the scaler) a fresh one over its nodes."""
    found = getattr(handle, "topology", None)
    return found if found is not None else PodTopology(getattr(handle, "node_infos", {}))


def _eligible(pod: Pod, constraint: SpreadConstraint, node: NodeInfo, keys: frozenset[str] = frozenset()) -> bool:
    if keys and not all(k in node.labels for k in keys):
        return False
    if constraint.node_affinity_policy is InclusionPolicy.HONOR and not pod.accepts_node(node.labels, node.name):
        return False
    return constraint.node_taints_policy is InclusionPolicy.IGNORE or not untolerated(node.taints, pod.tolerations, HARD_EFFECTS)


def _other_keys(pod: Pod, constraint: SpreadConstraint) -> frozenset[str]:
    """The other keys a node must carry for its pods and its domain to count: kube counts only
    nodes with every key of the pod's constraints of the same kind (hard or soft), save for
    its system defaults."""
    if constraint.system_default:
        return frozenset()
    return frozenset(c.topology_key for c in pod.spread if c.hard == constraint.hard and c.topology_key != constraint.topology_key)


def counted_nodes(pod: Pod, constraint: SpreadConstraint) -> NodeFilter | None:
    """The nodes whose pods a spread constraint counts: those eligible for the pod (kube's
    PreFilter skips the others); None when that is every node."""
    keys = _other_keys(pod, constraint)
    honor_affinity = constraint.node_affinity_policy is InclusionPolicy.HONOR and bool(pod.node_selector or pod.affinity)
    honor_taints = constraint.node_taints_policy is InclusionPolicy.HONOR
    if not (honor_affinity or honor_taints or keys):
        return None
    key = (honor_affinity and tuple(sorted(pod.node_selector.items())), honor_affinity and pod.affinity, honor_taints and pod.tolerations, keys)
    return key, lambda node: _eligible(pod, constraint, node, keys)


def spread_domains(handle: object, pod: Pod, constraint: SpreadConstraint, topology: PodTopology) -> frozenset[str]:
    """The domains a constraint's skew is measured over: those of existing nodes eligible
    for the pod, and the ones the scaler could still create (``handle.possible_domains``)."""
    key = constraint.topology_key
    keys = _other_keys(pod, constraint)
    policy = (constraint.node_affinity_policy, constraint.node_taints_policy)
    memo_key = ("domains", key, policy, tuple(sorted(pod.node_selector.items())), pod.affinity, pod.tolerations, keys)

    def compute() -> frozenset[str]:
        infos = topology.infos.values()
        found = {info.labels[key] for info in infos if key in info.labels and info.exists and _eligible(pod, constraint, info, keys)}
        possible: Callable[[Pod, str], frozenset[str]] | None = getattr(handle, "possible_domains", None)
        if possible is not None:
            found |= possible(pod, key)
        return frozenset(found)

    return topology.memo(memo_key, compute)


def least_matching(counts: Mapping[str, int], domains: frozenset[str]) -> int:
    """The fewest matching pods in any of ``domains`` (0 for none), looking only at the
    domains that hold some: a hostname's domains are every node's, and most hold none (with
    more domains than counted ones, some holds none: a new node's fresh hostname, say)."""
    if len(domains) > len(counts):
        return 0
    held = [n for d, n in counts.items() if n > 0 and d in domains]
    return min(held) if len(held) == len(domains) and held else 0


@dataclass(frozen=True, slots=True)
class _Spread:
    constraint: SpreadConstraint
    counts: Counter[str]
    min_match: int
    self_match: int


@dataclass(frozen=True, slots=True)
class _SoftSpread:
    """What PreScore derives for the ScheduleAnyway constraints from the candidate nodes."""

    constraints: list[tuple[SpreadConstraint, Counter[str], float]]  # with the pods per domain and the constraint's weight
    ignored: frozenset[str]  # candidates without every key: scored 0, left out of the normalizing


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
            min_match = least_matching(counts, domains) if len(domains) >= c.min_domains else 0
            self_match = int(c.selector is not None and c.selector.matches(pod.labels))
            out.append(_Spread(c, counts, min_match, self_match))
        return out

    def pre_filter(self, state: CycleState, pod: Pod) -> Status | None:
        """The counts filter and score read, once per pod (kube's PreFilter and PreScore);
        a pod whose selector kube's parser refuses cannot be scheduled, as in kube."""
        refused = next((c.selector.error for c in pod.spread if c.selector is not None and c.selector.error), "")
        if refused:
            return unresolvable(f"parsing pod: topologySpreadConstraints: {refused}", self.name)
        hard = [c for c in pod.spread if c.hard]
        state.write(_SPREAD_KEY, self._prepare(pod, hard) if hard else [])
        return None if hard else SKIP  # kube: no constraints to filter by, Skip

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        for s in state.get(_SPREAD_KEY) or ():
            value = node.labels.get(s.constraint.topology_key)
            if value is None:
                return unresolvable("node(s) didn't match pod topology spread constraints (missing required label)", self.name)
            if s.counts.get(value, 0) + s.self_match - s.min_match > s.constraint.max_skew:
                return unschedulable("node(s) didn't match pod topology spread constraints", self.name)
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
        # ``filter`` with each constraint's most pods a domain may hold worked out once
        for s in state.get(_SPREAD_KEY) or ():
            key, most, counts = s.constraint.topology_key, s.constraint.max_skew + s.min_match - s.self_match, s.counts
            nodes = [n for n in nodes if (value := n.labels.get(key)) is not None and counts.get(value, 0) <= most]
        return list(nodes)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        """kube's PreScore: for each ScheduleAnyway constraint, the matching pods per domain and
        a weight of log(candidate domains + 2); candidates that lack a key are left out,
        unless the constraints are the system defaults. Skip without such constraints."""
        soft = [c for c in pod.spread if not c.hard]
        if not soft or not nodes:
            return SKIP
        keys = {c.topology_key for c in soft}
        system = any(c.system_default for c in soft)
        ignored = frozenset() if system else frozenset(n.name for n in nodes if not all(k in n.labels for k in keys))
        topology = topology_of(self.handle)
        out = []
        for c in soft:
            key = c.topology_key
            if key == HOSTNAME:  # kube counts the candidate's own pods, whatever its inclusion policies say
                size = len(nodes) - len(ignored)
                counts = topology.selector_counts(pod.namespace, c.selector, key)
            else:
                size = len({n.labels.get(key, "") for n in nodes if n.name not in ignored})
                counts = topology.selector_counts(pod.namespace, c.selector, key, counted_nodes(pod, c))
            out.append((c, counts, math.log(size + 2)))
        state.write(_SOFT_SPREAD_KEY, _SoftSpread(out, ignored))
        return None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        """The matching pods already in the node's domains, each constraint's weighted, plus
        maxSkew - 1; fewer is better after normalizing."""
        s: _SoftSpread | None = state.get(_SOFT_SPREAD_KEY)
        if s is None or node.name in s.ignored:
            return 0, None
        total = 0.0
        for c, counts, weight in s.constraints:
            value = node.labels.get(c.topology_key)
            if value is not None:
                total += counts.get(value, 0) * weight + (c.max_skew - 1)
        return math.floor(total + 0.5), None  # Go's math.Round

    def normalize_score(self, state: CycleState, pod: Pod, scores: dict[str, int]) -> Status | None:
        s: _SoftSpread | None = state.get(_SOFT_SPREAD_KEY)
        ignored = s.ignored if s is not None else frozenset()
        counted = [value for name, value in scores.items() if name not in ignored]
        low, high = min(counted, default=0), max(counted, default=0)
        for name, value in scores.items():  # kube: MaxNodeScore * (max + min - score) / max
            scores[name] = 0 if name in ignored else 100 if high <= 0 else 100 * (high + low - value) // high
        return None


@dataclass(frozen=True, slots=True)
class _Affinity:
    affinity: list[Counter[str]]  # per required affinity term: pods matching all of them, by domain
    anyone: bool  # some pod matches all the required affinity terms
    self_affine: bool  # the pod matches all its own required affinity terms
    anti: list[tuple[AffinityTerm, Counter[str]]]  # its anti-affinity terms with the pods they match, by domain
    repelled: list[tuple[str, Counter[str]]]  # (key, domains) where placed pods' anti-affinity matches it


class InterPodAffinity(PreFilterPlugin, FilterPlugin, ScorePlugin):
    """Its args are kube's InterPodAffinityArgs (``parse_interpod_args``)."""

    name = "InterPodAffinity"

    def __init__(self, handle: FrameworkHandle, args: Mapping[str, object] | None = None) -> None:
        super().__init__(handle, args)
        self.hard_weight, self.ignore_existing = parse_interpod_args(self.args)

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

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
        # ``filter``, each condition over every node in turn
        s: _Affinity | None = state.get(_AFFINITY_KEY)
        if s is None:
            return list(nodes)
        terms = pod.pod_affinity.required
        if terms:
            keys = [t.topology_key for t in terms]
            nodes = [n for n in nodes if all(k in n.labels for k in keys)]
            if s.anyone or not s.self_affine:  # (the first of a self-affine group may start anywhere)
                nodes = [n for n in nodes if all(c.get(n.labels[k], 0) > 0 for k, c in zip(keys, s.affinity, strict=True))]
        for key, counts in [(t.topology_key, c) for t, c in s.anti] + s.repelled:
            nodes = [n for n in nodes if (value := n.labels.get(key)) is None or counts.get(value, 0) <= 0]
        return list(nodes)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        """kube's PreScore: each domain's pull on the pod, from its preferred terms (+weight
        per matching pod there, -weight for anti-affinity) and from placed pods' terms that
        select it (their required affinity at ``hardPodAffinityWeight``, their preferences
        at their weights); Skip when nothing pulls anywhere."""
        a = pod.pod_affinity
        own = a.preferred + a.anti_preferred
        refused = next((w.term.selector.error for w in own if w.term.selector is not None and w.term.selector.error), "")
        if refused:
            return error(f"parsing pod: preferred (anti-)affinity terms: {refused}", self.name)
        if not nodes or (self.ignore_existing and not own):
            return SKIP
        topology = topology_of(self.handle)
        pull: dict[str, Counter[str]] = {}
        for sign, weighted in ((1, a.preferred), (-1, a.anti_preferred)):
            for w in weighted:
                _lean(pull, w.term.topology_key, topology.term_counts((w.term,))[0], sign * w.weight)
        namespaces = topology.namespace_labels
        for (term, given), domains in topology.leanings().items():
            weight = self.hard_weight if given is None else given
            if weight and term.selects(pod.namespace, pod.labels, namespaces):
                _lean(pull, term.topology_key, domains, weight)
        if not pull:
            return SKIP
        state.write(_AFFINITY_SCORE_KEY, pull)
        return None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        pull: dict[str, Counter[str]] = state.get(_AFFINITY_SCORE_KEY) or {}
        labels = node.labels
        return sum(by_value.get(labels[key], 0) for key, by_value in pull.items() if key in labels), None

    def normalize_score(self, state: CycleState, pod: Pod, scores: dict[str, int]) -> Status | None:
        if not scores:
            return None
        low, high = min(scores.values()), max(scores.values())
        for name, value in scores.items():  # kube's float arithmetic, truncated
            scores[name] = 0 if high == low else int(100 * ((value - low) / (high - low)))
        return None


def _lean(pull: dict[str, Counter[str]], key: str, domains: Counter[str], weight: int) -> None:
    """Adds ``weight`` per pod in each domain of ``key`` to ``pull``."""
    for value, count in domains.items():
        if count:
            pull.setdefault(key, Counter())[value] += weight * count


def parse_interpod_args(args: Mapping[str, object]) -> tuple[int, bool]:
    """kube's InterPodAffinityArgs: ``hardPodAffinityWeight`` (0-100, default 1) and
    ``ignorePreferredTermsOfExistingPods`` (default false)."""
    known = ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods")
    unknown = sorted(set(args) - set(known))
    if unknown:
        raise InvalidManifest(unknown[0], f"unknown key ({', '.join(known)})")
    weight = args.get("hardPodAffinityWeight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 100:
        raise InvalidManifest("hardPodAffinityWeight", f"expected an integer from 0 to 100, got {weight!r}")
    ignore = args.get("ignorePreferredTermsOfExistingPods", False)
    if not isinstance(ignore, bool):
        raise InvalidManifest("ignorePreferredTermsOfExistingPods", f"expected true or false, got {ignore!r}")
    return weight, ignore
