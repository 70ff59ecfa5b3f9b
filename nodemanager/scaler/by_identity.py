"""``ByIdentity``: what is derived from an object, kept by the object's identity.

The scaler hands the same offering lists around again and again (a pool's offerings that a
group's constraints accept are one tuple, kept across computations): what is derived from
such a list (its frontier, its offerings by type) is made once per list. A key of the
list's identity is looked up in constant time, where a key of its members' ids costs a pass
over hundreds of offerings at every use. Each entry holds its object, so an id reused by a
later object is never mistaken for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ByIdentity(Generic[K, V]):
    def __init__(self, limit: int) -> None:
        self.limit = limit  # objects kept at most; past that the memo starts again
        self._kept: dict[int, tuple[K, V]] = {}

    def get(self, obj: K, make: Callable[[K], V]) -> V:
        """``make(obj)``, made once while ``obj`` is kept."""
        found = self._kept.get(id(obj))
        if found is None or found[0] is not obj:
            if len(self._kept) >= self.limit:
                self._kept.clear()
            found = self._kept[id(obj)] = (obj, make(obj))
        return found[1]

    def clear(self) -> None:
        self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)
