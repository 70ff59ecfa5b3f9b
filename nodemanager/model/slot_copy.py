"""Copies of frozen, slotted dataclasses with some fields changed, made slot by slot.

``dataclasses.replace`` runs every field through ``__init__`` again (and ``__post_init__``),
at twice the cost, and the controller copies a pod at every arrival, bind, assumption and
exit, and a node record at every binding and change of state. A copy made here skips
``__post_init__``: a class whose derived fields depend on the ones changed must not use it
for those (``Pod.living`` allows only the fields nothing is derived from).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar

_T = TypeVar("_T")
# class -> (read every slot, each slot's own setter (past a frozen __setattr__), slot -> its place)
_LAYOUTS: dict[type, tuple[Callable[[Any], tuple], tuple[Callable[[Any, Any], None], ...], dict[str, int]]] = {}


def copied(obj: _T, changes: dict[str, Any]) -> _T:
    """``obj`` with ``changes``; a name that is no slot of its class raises TypeError."""
    kind = type(obj)
    layout = _LAYOUTS.get(kind)
    if layout is None:
        slots = kind.__slots__  # type: ignore[attr-defined]
        layout = _LAYOUTS[kind] = (attrgetter(*slots), tuple(getattr(kind, name).__set__ for name in slots), {name: i for i, name in enumerate(slots)})
    read, writes, at = layout
    values = list(read(obj))
    for name, value in changes.items():
        place = at.get(name)
        if place is None:
            raise TypeError(f"{kind.__name__} has no field {name!r}")
        values[place] = value
    copy = object.__new__(kind)
    for write, value in zip(writes, values, strict=True):
        write(copy, value)
    return copy
