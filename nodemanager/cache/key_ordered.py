"""Pods by key, with their pods also kept in key order as they change.

The cache's snapshot lists its pods by key, and every pod change makes a new snapshot:
sorting thousands of keys and looking each up again per snapshot was a twentieth of a
large simulation. Kept in order as they change, a snapshot copies a list instead.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from typing import Generic, TypeVar

from nodemanager.model import Pod, PodKey

_V = TypeVar("_V")


class KeyOrdered(dict[PodKey, _V], Generic[_V]):
    """A dict of pod keys (reads cost what a dict's do), changed only by item assignment,
    ``del`` and ``pop``, which also keep each value's pod (``pod_of``) in key order. A
    value must not change its pod in place."""

    def __init__(self, pod_of: Callable[[_V], Pod]) -> None:
        super().__init__()
        self._pod_of = pod_of
        self._keys: list[PodKey] = []
        self._pods: list[Pod] = []
        self.claimed = 0  # how many of the pods use a resource claim (a snapshot asks)

    def __setitem__(self, key: PodKey, value: _V) -> None:
        i = bisect_left(self._keys, key)
        pod = self._pod_of(value)
        if key in self:
            self.claimed -= bool(self._pods[i].claims)
            self._pods[i] = pod
        else:
            self._keys.insert(i, key)
            self._pods.insert(i, pod)
        self.claimed += bool(pod.claims)
        super().__setitem__(key, value)

    def __delitem__(self, key: PodKey) -> None:
        super().__delitem__(key)
        i = bisect_left(self._keys, key)
        self.claimed -= bool(self._pods[i].claims)
        del self._keys[i], self._pods[i]

    def pop(self, key: PodKey, *default: _V | None) -> _V | None:  # type: ignore[override]
        if key in self:
            value = self[key]
            del self[key]
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def _refuse(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("change by assignment, del and pop only (the pods are kept in key order)")

    popitem = clear = update = setdefault = __ior__ = _refuse  # type: ignore[assignment]

    def pods(self) -> tuple[Pod, ...]:
        """Every value's pod, in key order."""
        return tuple(self._pods)
