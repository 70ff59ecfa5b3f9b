"""Copies of frozen, slotted dataclasses with some fields changed, made slot by slot.

``dataclasses.replace`` runs every field through ``__init__`` again (and ``__post_init__``),
at twice the cost, and the controller copies a pod at every arrival, bind, assumption and
exit, and a node record at every binding and change of state. A copy made here skips
``__post_init__``: a class whose derived fields depend on the ones changed must not use it
for those (``Pod.living`` allows only the fields nothing is derived from).

Each class's copier is one straight run of slot reads and writes, made once (as
``dataclasses`` makes ``__init__``): a loop over the slots cost twice as much.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")
_Setter = Callable[[Any, Any], None]
# class -> (a copy of every slot, each slot's own setter (past a frozen __setattr__) by name)
_COPIERS: dict[type, tuple[Callable[[Any], Any], dict[str, _Setter]]] = {}


def copied(obj: _T, changes: dict[str, Any]) -> _T:
    """``obj`` with ``changes``; a name that is no slot of its class raises TypeError."""
    kind = type(obj)
    found = _COPIERS.get(kind)
    if found is None:
        found = _COPIERS[kind] = _copier(kind)
    copy_all, setters = found
    copy = copy_all(obj)
    for name, value in changes.items():
        setter = setters.get(name)
        if setter is None:
            raise TypeError(f"{kind.__name__} has no field {name!r}")
        setter(copy, value)
    return copy


def _copier(kind: type) -> tuple[Callable[[Any], Any], dict[str, _Setter]]:
    slots: tuple[str, ...] = kind.__slots__  # type: ignore[attr-defined]
    setters: dict[str, _Setter] = {name: getattr(kind, name).__set__ for name in slots}
    scope: dict[str, Any] = {"_new": object.__new__, "_kind": kind}
    lines = ["def copy_all(obj):", "    copy = _new(_kind)"]
    for i, name in enumerate(slots):  # slot names are identifiers: nothing else enters the source
        scope[f"_set{i}"] = setters[name]
        lines.append(f"    _set{i}(copy, obj.{name})")
    lines.append("    return copy")
    exec("\n".join(lines), scope)  # (made from the class's own slot names, as dataclasses makes __init__)
    return scope["copy_all"], setters
