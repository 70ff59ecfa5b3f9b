"""``Since``: what changed between two versions of a collection kept by name, so a reader
that kept something per entry of the earlier one catches up by the changed entries alone.

The controller's node records and the cache's pods by node are remade at every change, each
unchanged entry the very object it was. A computation keeps a picture per live node; finding
the few that changed by comparing every entry was most of what it saved on a cluster of
thousands of nodes. A maker that knows what it changed says so; a reader trusts it only for
the very objects it names (``after`` is what it was given, ``before`` what it kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Since(Generic[T]):
    before: object  # the earlier version (by identity)
    after: object  # the later one: the same entries but for those of ``changed``
    changed: Mapping[str, T | None]  # name -> its entry in ``after`` (None: it has none); may name unchanged ones too

    def links(self, before: object, after: object) -> bool:
        """Whether this tells what changed from ``before`` to ``after`` (the very objects)."""
        return self.before is before and self.after is after
