"""``CycleState``: per-pod scratch space shared by the plugins during one scheduling cycle."""

from __future__ import annotations

import copy
from typing import Any


class CycleState:
    """A key/value store; ``clone`` deep-copies values that know how (``clone()``), else copies.
    ``skip_filter`` names the plugins whose PreFilter returned Skip (kube's SkipFilterPlugins):
    their Filter and PreFilter extensions are not run for this pod. ``score_batch`` is what
    the score plugins of one ``run_score_plugins`` call share about its nodes (None outside
    such a call): it lives only while those nodes are scored, so it never goes stale."""

    __slots__ = ("_data", "score_batch", "skip_filter")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: frozenset[str] = frozenset()
        self.score_batch: dict[str, Any] | None = None

    def read(self, key: str) -> Any:
        """The value under ``key``; raises KeyError naming the key when absent."""
        try:
            return self._data[key]
        except KeyError:
            raise KeyError(f"cycle state has no {key!r}") from None

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def clone(self) -> CycleState:
        out = CycleState()
        out._data = {k: v.clone() if hasattr(v, "clone") else copy.copy(v) for k, v in self._data.items()}
        out.skip_filter = self.skip_filter
        return out
