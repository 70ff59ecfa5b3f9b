"""Kubernetes objects in workload files: every field checked against the API's schema, and
the objects that make pods expanded to the pods their controllers would make.

The schema is the one the official Kubernetes client is generated from (its models'
``attribute_map`` and ``openapi_types``, the OpenAPI document of the Kubernetes release the
client names, kept in ``api_schema.json``): a field it does not have is refused with its
path, so a typo such as ``resource:`` or ``nodeSelecter:`` is an error, not a pod that asks
for nothing."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from nodemanager.cluster import api_schema

MAX_PROBLEMS = 50  # unknown fields reported per object (a file of typos is refused all the same)
# kind -> (the client's model, the API version and kind of the controller owning its pods)
POD_MAKERS: dict[str, tuple[str, str, str]] = {
    "Deployment": ("V1Deployment", "apps/v1", "ReplicaSet"),
    "ReplicaSet": ("V1ReplicaSet", "apps/v1", "ReplicaSet"),
    "StatefulSet": ("V1StatefulSet", "apps/v1", "StatefulSet"),
    "Job": ("V1Job", "batch/v1", "Job"),
}
MODELS = {"Pod": "V1Pod", "PodSpec": "V1PodSpec", "DaemonSet": "V1DaemonSet", **{kind: model for kind, (model, _, _) in POD_MAKERS.items()}}
# A listed pod (or a pod maker's template) may say how long it runs in a simulation; Lists
# carry no run time otherwise, and their pods would run for good.
DURATION_ANNOTATION = "simulate.nodemanager.io/duration"
_LIST = re.compile(r"^list\[(.+)\]$", re.IGNORECASE)
_DICT = re.compile(r"^dict[(\[]([^,]+), (.+)[)\]]$", re.IGNORECASE)


def unknown_fields(doc: Any, kind: str, where: str) -> list[str]:
    """The fields of ``doc`` (an object of ``kind``: Pod, PodSpec or a pod maker) that its
    schema does not have, each as ``path: unknown field``."""
    if isinstance(doc, dict) and _known(doc, MODELS[kind]):  # (the common case, without a path made for every field)
        return []
    problems: list[str] = []
    _walk(doc, MODELS[kind], where, problems)
    return problems[:MAX_PROBLEMS]


@cache
def _shape(type_name: str) -> tuple[str, Any]:
    """What a value of the schema's type ``type_name`` is: ("list", item type), ("dict",
    value type), ("model", its fields) or ("leaf", None), a list or dict of leaves a leaf
    itself (nothing in it can be an unknown field)."""
    if match := _LIST.match(type_name) or _DICT.match(type_name):
        inner = match[match.lastindex or 1]
        return ("leaf", None) if _shape(inner)[0] == "leaf" else ("list" if type_name.lower().startswith("list") else "dict", inner)
    if (fields := api_schema.models().get(type_name)) is not None:
        return "model", fields
    return "leaf", None


def _known(value: Any, type_name: str) -> bool:
    """Whether every field in ``value`` is one its schema has (a document's mappings are
    dicts: anything else is looked at by ``_walk``)."""
    shape, of = _shape(type_name)
    if shape == "model" and isinstance(value, dict):
        for key, item in value.items():
            field = of.get(key)
            if field is None or not _known(item, field):
                return False
        return True
    if shape == "list" and isinstance(value, list):
        return all(_known(item, of) for item in value)
    if shape == "dict" and isinstance(value, dict):
        return all(_known(item, of) for item in value.values())
    return True


def _walk(value: Any, type_name: str, where: str, problems: list[str]) -> None:
    if len(problems) >= MAX_PROBLEMS:
        return
    shape, of = _shape(type_name)
    if shape == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, of, f"{where}[{i}]", problems)
    elif shape == "dict" and isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, of, f"{where}.{key}", problems)
    elif shape == "model" and isinstance(value, Mapping):
        for key, item in value.items():
            if key not in of:
                problems.append(f"{where}.{key}: unknown field")
            else:
                _walk(item, of[key], f"{where}.{key}", problems)


def expand(doc: Mapping[str, Any], where: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The pod manifests a Deployment, ReplicaSet, StatefulSet or Job would make (as many as
    its replicas, or a Job's parallelism bounded by its completions), named as its controller
    names them, owned by that controller; or the problems that stop it."""
    kind = str(doc.get("kind"))
    _, api_version, owner_kind = POD_MAKERS[kind]
    problems = unknown_fields(doc, kind, where)
    meta, spec = doc.get("metadata") or {}, doc.get("spec") or {}
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        problems.append(f"{where}.metadata.name: required")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        problems.append(f"{where}.spec.template.spec: required")
    count = _count(kind, spec if isinstance(spec, Mapping) else {}, where, problems)
    if problems:
        return [], problems
    assert isinstance(name, str)
    assert isinstance(template, Mapping)
    namespace = meta.get("namespace") or "default"
    pod_meta = dict(template.get("metadata") or {})
    pod_meta["namespace"] = namespace
    pod_meta["ownerReferences"] = [{"apiVersion": api_version, "kind": owner_kind, "name": name, "controller": True, "uid": f"{namespace}/{name}"}]
    pods = [{"metadata": {**pod_meta, "name": f"{name}-{i}"}, "spec": dict(template["spec"])} for i in range(count)]
    return pods, []


def _count(kind: str, spec: Mapping[str, Any], where: str, problems: list[str]) -> int:
    keys = ("parallelism", "completions") if kind == "Job" else ("replicas",)
    values = []
    for key in keys:
        value = spec.get(key, 1 if key != "completions" else None)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            problems.append(f"{where}.spec.{key}: expected a whole number >= 0, got {value!r}")
            return 0
        values.append(value)
    return min(values)
