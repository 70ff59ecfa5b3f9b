"""Reading manifest fields: each helper names the field path in its error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodemanager.errors import InvalidManifest


def as_mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidManifest(path, f"expected a mapping, got {type(value).__name__}")
    return value


def named_object(doc: Any, where: str) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]:
    """A namespaced object's document, its metadata (with the name it must have) and its spec."""
    d = as_mapping(doc, where)
    meta = as_mapping(d.get("metadata"), f"{where}.metadata")
    if not meta.get("name"):
        raise InvalidManifest(f"{where}.metadata.name", "required")
    return d, meta, as_mapping(d.get("spec"), f"{where}.spec")


def as_list(value: Any, path: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise InvalidManifest(path, f"expected a list, got {type(value).__name__}")
    return value


def as_int(value: Any, path: str, low: int, high: int | None = None) -> int:
    """An integer of at least ``low`` (and at most ``high``): a bool or a float is not one."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bound = f"{low}-{high}" if high is not None else f"at least {low}"
        raise InvalidManifest(path, f"expected an integer {bound}, got {value!r}")
    return value
