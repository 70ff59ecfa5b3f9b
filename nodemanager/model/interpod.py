"""Constraints between pods: topology spread and pod (anti-)affinity, as the API defines them.

``matchLabelKeys`` (and ``mismatchLabelKeys`` of affinity terms) are folded into the label
selector when parsed, as the API server does on pod creation: a key the pod carries adds
``key In (value)`` (``NotIn`` for a mismatch key). A missing selector selects no pod; an
empty one selects every pod.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from nodemanager.errors import InvalidManifest
from nodemanager.model.labels import HOSTNAME, ZONE
from nodemanager.model.manifest import as_int, as_list, as_mapping
from nodemanager.model.selectors import Operator, Requirement, label_value_problem

LABEL_OPERATORS = (Operator.IN, Operator.NOT_IN, Operator.EXISTS, Operator.DOES_NOT_EXIST)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector: every requirement must hold (matchLabels are ``In`` ones). One
    whose value kube's parser refuses (``error``: the API server lets an ``In``/``NotIn`` value
    that is no label value through) selects nothing, and the plugins refuse its pod at
    PreFilter, as kube's do."""

    requirements: tuple[Requirement, ...] = ()
    error: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.error and all(r.matches(labels) for r in self.requirements)


class WhenUnsatisfiable(StrEnum):
    DO_NOT_SCHEDULE = "DoNotSchedule"
    SCHEDULE_ANYWAY = "ScheduleAnyway"


class InclusionPolicy(StrEnum):
    HONOR = "Honor"
    IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: WhenUnsatisfiable
    selector: LabelSelector | None  # None: counts no pod
    min_domains: int = 1
    node_affinity_policy: InclusionPolicy = InclusionPolicy.HONOR
    node_taints_policy: InclusionPolicy = InclusionPolicy.IGNORE
    # One of kube's system defaults (``defaultingType: System``): its score does not leave
    # out nodes that lack the key (a node without a zone still spreads by hostname).
    system_default: bool = False
    # Given by the profile's defaults (System or List), not written in the pod: Karpenter,
    # which reads only the pod, does not treat it as a preference to honour at first.
    defaulted: bool = False

    @property
    def hard(self) -> bool:
        return self.when_unsatisfiable is WhenUnsatisfiable.DO_NOT_SCHEDULE


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A PodAffinityTerm: pods matching ``selector`` in the chosen namespaces, seen per value
    of ``topology_key``."""

    selector: LabelSelector | None
    topology_key: str
    namespaces: frozenset[str]  # with no namespaceSelector and none named: the pod's own
    namespace_selector: LabelSelector | None = None  # {} selects every namespace

    def selects(self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        if self.selector is None or not self.selector.matches(labels):
            return False
        if namespace in self.namespaces:
            return True
        return self.namespace_selector is not None and self.namespace_selector.matches(namespace_labels.get(namespace, {}))


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int  # 1-100
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """A pod's required and preferred pod affinity and anti-affinity."""

    required: tuple[AffinityTerm, ...] = ()
    anti_required: tuple[AffinityTerm, ...] = ()
    preferred: tuple[WeightedTerm, ...] = ()
    anti_preferred: tuple[WeightedTerm, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.required or self.anti_required or self.preferred or self.anti_preferred)


NO_AFFINITY = PodAffinity()

#: kube-scheduler's system default constraints (PodTopologySpreadArgs ``defaultingType: System``),
#: given with the pod's default selector to pods that have no constraints of their own.
SYSTEM_DEFAULT_SPREAD = (
    SpreadConstraint(3, HOSTNAME, WhenUnsatisfiable.SCHEDULE_ANYWAY, None, system_default=True, defaulted=True),
    SpreadConstraint(5, ZONE, WhenUnsatisfiable.SCHEDULE_ANYWAY, None, system_default=True, defaulted=True),
)


# --- parsing -------------------------------------------------------------------------------


def parse_label_selector(
    value: Any, path: str, labels: Mapping[str, str] | None = None, match: Sequence[str] = (), mismatch: Sequence[str] = ()
) -> LabelSelector | None:
    if value is None:
        return None
    doc = as_mapping(value, path)
    reqs = [Requirement(str(k), Operator.IN, (str(v),)) for k, v in sorted(as_mapping(doc.get("matchLabels"), f"{path}.matchLabels").items())]
    for i, expr in enumerate(as_list(doc.get("matchExpressions"), f"{path}.matchExpressions")):
        epath = f"{path}.matchExpressions[{i}]"
        e = as_mapping(expr, epath)
        if not e.get("key"):
            raise InvalidManifest(f"{epath}.key", "required")
        op = _choice(Operator, e.get("operator"), f"{epath}.operator", LABEL_OPERATORS)
        values = tuple(str(v) for v in as_list(e.get("values"), f"{epath}.values"))
        if (op in (Operator.IN, Operator.NOT_IN)) != bool(values):
            raise InvalidManifest(f"{epath}.values", f"{op} needs values" if values == () else f"{op} takes no values")
        reqs.append(Requirement(str(e["key"]), op, values))
    labels = labels or {}
    reqs += [Requirement(k, Operator.IN, (labels[k],)) for k in match if k in labels]
    reqs += [Requirement(k, Operator.NOT_IN, (labels[k],)) for k in mismatch if k in labels]
    problems = (f"values[{i}][{r.key}]: Invalid value: {json.dumps(v)}: {why}" for r in reqs for i, v in enumerate(r.values) if (why := label_value_problem(v)))
    error = next(problems, "")
    return LabelSelector(tuple(reqs), error)


def _choice(kind: type[StrEnum], value: Any, path: str, allowed: tuple[StrEnum, ...] | None = None) -> Any:
    """``value`` as a member of ``kind`` (and of ``allowed``), or an error listing them."""
    options = allowed or tuple(kind)
    try:
        found = kind(value)
    except ValueError:
        found = None
    if found not in options:
        raise InvalidManifest(path, f"expected one of {', '.join(options)}, got {value!r}")
    return found


def _keys(value: Any, path: str) -> tuple[str, ...]:
    return tuple(str(k) for k in as_list(value, path))


def parse_spread(value: Any, path: str, labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    out = []
    for i, entry in enumerate(as_list(value, path)):
        cpath = f"{path}[{i}]"
        c = as_mapping(entry, cpath)
        if not c.get("topologyKey"):
            raise InvalidManifest(f"{cpath}.topologyKey", "required")
        when = _choice(WhenUnsatisfiable, c.get("whenUnsatisfiable"), f"{cpath}.whenUnsatisfiable")
        policies = [
            _choice(InclusionPolicy, c.get(field) or default, f"{cpath}.{field}")
            for field, default in (("nodeAffinityPolicy", InclusionPolicy.HONOR), ("nodeTaintsPolicy", InclusionPolicy.IGNORE))
        ]
        min_domains = c.get("minDomains")
        if min_domains is not None and when is not WhenUnsatisfiable.DO_NOT_SCHEDULE:
            raise InvalidManifest(f"{cpath}.minDomains", "may be set only when whenUnsatisfiable is DoNotSchedule")
        selector = parse_label_selector(c.get("labelSelector"), f"{cpath}.labelSelector", labels, _keys(c.get("matchLabelKeys"), f"{cpath}.matchLabelKeys"))
        out.append(
            SpreadConstraint(
                max_skew=as_int(c.get("maxSkew"), f"{cpath}.maxSkew", 1),
                topology_key=str(c["topologyKey"]),
                when_unsatisfiable=when,
                selector=selector,
                min_domains=1 if min_domains is None else as_int(min_domains, f"{cpath}.minDomains", 1),
                node_affinity_policy=policies[0],
                node_taints_policy=policies[1],
            )
        )
    return tuple(out)


def _term(value: Any, path: str, namespace: str, labels: Mapping[str, str]) -> AffinityTerm:
    t = as_mapping(value, path)
    if not t.get("topologyKey"):
        raise InvalidManifest(f"{path}.topologyKey", "required")
    match, mismatch = _keys(t.get("matchLabelKeys"), f"{path}.matchLabelKeys"), _keys(t.get("mismatchLabelKeys"), f"{path}.mismatchLabelKeys")
    selector = parse_label_selector(t.get("labelSelector"), f"{path}.labelSelector", labels, match, mismatch)
    namespace_selector = parse_label_selector(t.get("namespaceSelector"), f"{path}.namespaceSelector")
    named = frozenset(str(n) for n in as_list(t.get("namespaces"), f"{path}.namespaces"))
    if not named and namespace_selector is None:
        named = frozenset({namespace})
    return AffinityTerm(selector, str(t["topologyKey"]), named, namespace_selector)


def _terms(doc: Mapping[str, Any], path: str, namespace: str, labels: Mapping[str, str]) -> tuple[tuple[AffinityTerm, ...], tuple[WeightedTerm, ...]]:
    rpath, ppath = f"{path}.requiredDuringSchedulingIgnoredDuringExecution", f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    listed = as_list(doc.get("requiredDuringSchedulingIgnoredDuringExecution"), rpath)
    required = tuple(_term(t, f"{rpath}[{i}]", namespace, labels) for i, t in enumerate(listed))
    preferred = []
    for i, entry in enumerate(as_list(doc.get("preferredDuringSchedulingIgnoredDuringExecution"), ppath)):
        w = as_mapping(entry, f"{ppath}[{i}]")
        term = _term(w.get("podAffinityTerm"), f"{ppath}[{i}].podAffinityTerm", namespace, labels)
        preferred.append(WeightedTerm(as_int(w.get("weight"), f"{ppath}[{i}].weight", 1, 100), term))
    return required, tuple(preferred)


def parse_pod_affinity(affinity: Any, path: str, namespace: str, labels: Mapping[str, str]) -> PodAffinity:
    doc = as_mapping(affinity, path)
    required, preferred = _terms(as_mapping(doc.get("podAffinity"), f"{path}.podAffinity"), f"{path}.podAffinity", namespace, labels)
    anti_required, anti_preferred = _terms(as_mapping(doc.get("podAntiAffinity"), f"{path}.podAntiAffinity"), f"{path}.podAntiAffinity", namespace, labels)
    found = PodAffinity(required, anti_required, preferred, anti_preferred)
    return found if found else NO_AFFINITY


def parse_spread_defaults(args: Mapping[str, Any], path: str = "") -> tuple[SpreadConstraint, ...]:
    """PodTopologySpreadArgs: ``defaultingType`` System (kube's default: the system
    constraints) or List (``defaultConstraints``, validated as kube-scheduler does)."""

    def at(key: str) -> str:
        return f"{path}.{key}" if path else key

    unknown = sorted(set(args) - {"defaultingType", "defaultConstraints"})
    if unknown:
        raise InvalidManifest(at(unknown[0]), "unknown key (defaultingType, defaultConstraints)")
    kind = args.get("defaultingType") or "System"
    listed = as_list(args.get("defaultConstraints"), at("defaultConstraints"))
    if kind not in ("System", "List"):
        raise InvalidManifest(at("defaultingType"), f"expected System or List, got {kind!r}")
    if kind == "System":
        if listed:
            raise InvalidManifest(at("defaultingType"), "must be List when defaultConstraints are given (System uses kube-scheduler's own)")
        return SYSTEM_DEFAULT_SPREAD
    seen: set[tuple[str, str]] = set()
    for i, entry in enumerate(listed):
        where = at(f"defaultConstraints[{i}]")
        for field in ("labelSelector", "matchLabelKeys"):
            if as_mapping(entry, where).get(field) is not None:
                raise InvalidManifest(f"{where}.{field}", "not allowed: the selector of a default constraint is deduced for each pod")
        pair = (str(entry.get("topologyKey")), str(entry.get("whenUnsatisfiable")))
        if pair in seen:
            raise InvalidManifest(where, f"repeats topologyKey {pair[0]!r} with whenUnsatisfiable {pair[1]!r}")
        seen.add(pair)
    return tuple(replace(c, defaulted=True) for c in parse_spread(listed, at("defaultConstraints"), {}))
