"""Node selection vocabulary: required node-affinity terms, taints and tolerations.

The matching rules are the Kubernetes ones (``k8s.io/component-helpers`` nodeaffinity and
``v1helper.TolerationsTolerateTaint``), written as small pure functions so the
scheduling plugins and the instance chooser share one definition.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` (or, with ``on_field``, ``matchFields``) entry."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()
    on_field: bool = False

    def matches(self, labels: Mapping[str, str], node_name: str = "") -> bool:
        if self.on_field:
            # matchFields supports only metadata.name with In / NotIn.
            present, value = True, node_name
        else:
            present, value = self.key in labels, labels.get(self.key, "")
        op = self.operator
        if op is Operator.IN:
            return present and value in self.values
        if op is Operator.NOT_IN:
            return not present or value not in self.values
        if op is Operator.EXISTS:
            return present
        if op is Operator.DOES_NOT_EXIST:
            return not present
        have, want = parse_int(value) if present else None, parse_int(self.values[0]) if self.values else None
        if have is None or want is None:
            return False
        return have > want if op is Operator.GT else have < want


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """Requirements that must all hold. An empty term matches nothing (as in Kubernetes),
    nor does one kube's selector parser refuses (``error`` says why): the API server lets a
    node-affinity value that is no label value, or a ``Gt`` value that is no integer,
    through, and kube-scheduler's parser then fails that term alone."""

    requirements: tuple[Requirement, ...]
    error: str = ""

    def matches(self, labels: Mapping[str, str], node_name: str = "") -> bool:
        return bool(self.requirements) and not self.error and all(r.matches(labels, node_name) for r in self.requirements)


def terms_match(terms: tuple[SelectorTerm, ...], labels: Mapping[str, str], node_name: str = "") -> bool:
    """Required node affinity: no terms means no constraint; otherwise any term must match."""
    return not terms or any(t.matches(labels, node_name) for t in terms)


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: TaintEffect
    value: str = ""

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists | Gt | Lt
    value: str = ""
    effect: TaintEffect | None = None  # None tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("Gt", "Lt"):  # kube 1.35's numeric operators: the taint's value against this one
            mine, theirs = decimal_integer(self.value), decimal_integer(taint.value)
            if mine is None or theirs is None:
                return False  # (a taint value that is no integer is tolerated by neither)
            return theirs > mine if self.operator == "Gt" else theirs < mine
        # An empty key is only valid with Exists; Equal with no key tolerates nothing.
        return bool(self.key) and self.value == taint.value


_DECIMAL_INTEGER = re.compile(r"^(0|-?[1-9][0-9]*)$")


_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
LABEL_VALUE_MAX = 63


def label_value_problem(value: str) -> str:
    """Why ``value`` is no label value (kube's ``validation.IsValidLabelValue``), or ""."""
    if len(value) > LABEL_VALUE_MAX:
        return f"must be no more than {LABEL_VALUE_MAX} characters"
    if not _LABEL_VALUE.fullmatch(value):
        return "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and start and end with one"
    return ""


_PARSE_INT = re.compile(r"[+-]?[0-9]+")


def parse_int(text: str) -> int | None:
    """``text`` as Go's ``strconv.ParseInt(text, 10, 64)`` reads it (a sign allowed, no
    spaces or underscores), else None: how kube reads a ``Gt``/``Lt`` value and the node's."""
    if not _PARSE_INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def decimal_integer(text: str) -> int | None:
    """``text`` as a 64-bit integer written in canonical form (no sign but a minus, no
    leading zeros: kube's ``IsDecimalInteger``), else None."""
    if not _DECIMAL_INTEGER.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def untolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], effects: frozenset[TaintEffect]) -> list[Taint]:
    """The taints with one of ``effects`` that no toleration covers."""
    return [t for t in taints if t.effect in effects and not any(tol.tolerates(t) for tol in tolerations)]


HARD_EFFECTS = frozenset({TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE})
