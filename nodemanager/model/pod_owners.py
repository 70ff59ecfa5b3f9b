"""What kube-scheduler reads besides pods and nodes to judge inter-pod constraints.

* **Namespaces**, for the labels a ``namespaceSelector`` of a pod (anti-)affinity term matches.
* **Services, ReplicationControllers, ReplicaSets and StatefulSets**, for the selector
  PodTopologySpread gives a pod that has no ``topologySpreadConstraints`` of its own, so the
  cluster's default constraints apply to it (``helper.DefaultSelector``): the ``spec.selector``
  labels of every Service in the pod's namespace that selects it, merged, then those of the
  ReplicationController that controls it, or the requirements of the ReplicaSet's or
  StatefulSet's selector, found by the pod's controller owner reference. A pod none of them
  selects gets no default constraint.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from nodemanager.errors import InvalidManifest
from nodemanager.model.interpod import LabelSelector, SpreadConstraint, parse_label_selector
from nodemanager.model.manifest import as_mapping, named_object
from nodemanager.model.pod import OwnerRef, Pod
from nodemanager.model.selectors import Operator, Requirement


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: Mapping[str, str]

    @property
    def key(self) -> str:
        return self.name

    @classmethod
    def from_manifest(cls, doc: Any, where: str = "namespace") -> Namespace:
        meta = as_mapping(as_mapping(doc, where).get("metadata"), f"{where}.metadata")
        if not meta.get("name"):
            raise InvalidManifest(f"{where}.metadata.name", "required")
        labels = as_mapping(meta.get("labels"), f"{where}.metadata.labels")
        return cls(str(meta["name"]), {str(k): str(v) for k, v in labels.items()})


@dataclass(frozen=True, slots=True)
class PodSelecting:
    """An object that selects pods by label: the base of the four kinds DefaultSelector reads."""

    namespace: str
    name: str
    selector: LabelSelector | None  # None: a Service without a selector, which selects nothing
    kind: ClassVar[str] = ""
    api_version: ClassVar[str] = ""
    selector_is_map: ClassVar[bool] = False  # spec.selector is a label map, not a LabelSelector

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_manifest(cls, doc: Any, where: str = "object") -> PodSelecting:
        _, meta, spec = named_object(doc, where)
        raw = spec.get("selector")
        path = f"{where}.spec.selector"
        if raw is None:
            selector = None
        elif cls.selector_is_map:
            selector = LabelSelector(tuple(Requirement(str(k), Operator.IN, (str(v),)) for k, v in sorted(as_mapping(raw, path).items())))
        else:
            selector = parse_label_selector(raw, path)
        return cls(str(meta.get("namespace") or "default"), str(meta["name"]), selector)


class Service(PodSelecting):
    __slots__ = ()
    kind, api_version, selector_is_map = "Service", "v1", True


class ReplicationController(PodSelecting):
    __slots__ = ()
    kind, api_version, selector_is_map = "ReplicationController", "v1", True


class ReplicaSet(PodSelecting):
    __slots__ = ()
    kind, api_version = "ReplicaSet", "apps/v1"


class StatefulSet(PodSelecting):
    __slots__ = ()
    kind, api_version = "StatefulSet", "apps/v1"


SELECTING_KINDS = (Service, ReplicationController, ReplicaSet, StatefulSet)
_CONTROLLERS = {(c.api_version, c.kind): c for c in SELECTING_KINDS[1:]}


def default_selector(labels: Mapping[str, str], owner: OwnerRef | None, objects: Iterable[PodSelecting]) -> LabelSelector | None:
    """kube's DefaultSelector for a pod with these labels and controller, given the objects
    of its namespace: None when it would be empty (no default constraint)."""
    services: dict[str, str] = {}
    controller: PodSelecting | None = None
    wanted = _CONTROLLERS.get((owner.api_version, owner.kind)) if owner is not None else None
    for obj in objects:
        if isinstance(obj, Service) and obj.selector is not None and obj.selector.matches(labels):
            services.update((r.key, r.values[0]) for r in obj.selector.requirements)
        elif wanted is not None and type(obj) is wanted and owner is not None and obj.name == owner.name:
            controller = obj
    reqs = [Requirement(k, Operator.IN, (v,)) for k, v in sorted(services.items())]
    if controller is not None and controller.selector is not None:
        if controller.selector_is_map:  # an RC's labels merge into the services' set
            merged = {**services, **{r.key: r.values[0] for r in controller.selector.requirements}}
            reqs = [Requirement(k, Operator.IN, (v,)) for k, v in sorted(merged.items())]
        else:
            reqs += controller.selector.requirements
    return LabelSelector(tuple(reqs)) if reqs else None


class SpreadDefaults:
    """The cluster's default spread constraints given to pods that have none of their own,
    each with the pod's DefaultSelector (the same selector for a Deployment's replicas)."""

    def __init__(self, constraints: tuple[SpreadConstraint, ...], objects: Iterable[PodSelecting]) -> None:
        self.constraints = constraints
        self._by_namespace: dict[str, list[PodSelecting]] = defaultdict(list)
        for obj in objects:
            self._by_namespace[obj.namespace].append(obj)
        self._memo: dict[tuple, tuple[SpreadConstraint, ...]] = {}

    def apply(self, pod: Pod) -> Pod:
        if pod.spread or not self.constraints or pod.namespace not in self._by_namespace:
            return pod
        memo_key = (pod.kind, pod.owner)
        found = self._memo.get(memo_key)
        if found is None:
            selector = default_selector(pod.labels, pod.owner, self._by_namespace[pod.namespace])
            found = () if selector is None else tuple(replace(c, selector=selector) for c in self.constraints)
            self._memo[memo_key] = found
        return replace(pod, spread=found) if found else pod
