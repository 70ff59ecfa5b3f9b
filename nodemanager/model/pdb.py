"""PodDisruptionBudgets (policy/v1): how many of the pods a budget selects may be evicted now.

A real API server's disruption controller keeps ``status.disruptionsAllowed``; a budget it
has not processed yet (``status.observedGeneration`` behind ``metadata.generation``) lets
nothing go, as the Eviction API answers then. Where no server computes it (the simulated
cluster), it is computed as kube's disruption controller does, counting the selected pods
as the expected ones (no controller scale is known): ``disruptionsAllowed = currentHealthy
- desiredHealthy``, never below 0, and 0 while no pod is expected. ``desiredHealthy`` is
``minAvailable``, or the expected count less ``maxUnavailable``; percentages of the expected
count round up; with neither set nothing is allowed.

policy/v1 selectors: an empty selector selects every pod of the namespace, a missing one none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nodemanager.errors import InvalidManifest
from nodemanager.model.interpod import LabelSelector, parse_label_selector
from nodemanager.model.manifest import as_mapping, named_object
from nodemanager.model.pod import Pod, PodPhase

_PERCENT = re.compile(r"^([0-9]+)%$")


def _int_or_percent(value: Any, path: str) -> int | str | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and _PERCENT.match(value):
        return value
    raise InvalidManifest(path, f"expected a non-negative integer or a percentage such as '50%', got {value!r}")


def scaled(value: int | str, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent with roundUp (PodDisruptionBudgets, disruption budgets)."""
    if isinstance(value, int):
        return value
    return -(-total * int(value[:-1]) // 100)


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector | None  # None: selects no pod
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    disruptions_allowed: int | None = None  # the server's word; None: compute it from the pods

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def selects(self, pod: Pod) -> bool:
        return self.selector is not None and pod.namespace == self.namespace and self.selector.matches(pod.labels)

    def allowed(self, pods: Iterable[Pod]) -> int:
        """Evictions this budget allows now, given every pod of the cluster."""
        if self.disruptions_allowed is not None:
            return self.disruptions_allowed
        selected = [p for p in pods if self.selects(p) and not p.is_terminal]
        expected = len(selected)
        healthy = sum(1 for p in selected if p.node_name and p.phase is PodPhase.RUNNING)
        if self.max_unavailable is not None:
            desired = max(expected - scaled(self.max_unavailable, expected), 0)
        elif self.min_available is not None:
            desired = scaled(self.min_available, expected)
        else:
            return 0  # neither set: kube expects no pod, so allows nothing
        return max(healthy - desired, 0) if expected > 0 else 0

    @classmethod
    def from_manifest(cls, doc: Any, where: str = "poddisruptionbudget") -> PodDisruptionBudget:
        d, meta, spec = named_object(doc, where)
        minimum = _int_or_percent(spec.get("minAvailable"), f"{where}.spec.minAvailable")
        maximum = _int_or_percent(spec.get("maxUnavailable"), f"{where}.spec.maxUnavailable")
        if minimum is not None and maximum is not None:
            raise InvalidManifest(f"{where}.spec", "minAvailable and maxUnavailable cannot both be set")
        status = as_mapping(d.get("status"), f"{where}.status")
        allowed = None
        if status:  # a server's: trusted once it has seen this generation
            processed = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
            allowed = int(status.get("disruptionsAllowed") or 0) if processed else 0
        selector = parse_label_selector(spec.get("selector"), f"{where}.spec.selector")
        return cls(str(meta.get("namespace") or "default"), str(meta["name"]), selector, minimum, maximum, allowed)
