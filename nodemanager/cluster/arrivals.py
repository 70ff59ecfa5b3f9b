"""A workload's pods in the order they arrive (by time, then key), made as they are reached.

An entry of ``count`` pods alike but for their names is kept as its first pod and copied
under each further name only when the pods are iterated: a simulation of millions of pods
holds the entries and the pods alive, not every pod of the file at once.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from nodemanager.dra.model import ResourceClaim
from nodemanager.model import Pod
from nodemanager.model.pod import PodKey
from nodemanager.model.slot_copy import copied


@dataclass(frozen=True)
class UsageProfile:
    """What a running pod uses, as a fraction of its request: steps of (seconds since it
    started, fraction), per resource. Without a profile a pod uses what it requests."""

    cpu: tuple[tuple[float, float], ...] = ((0.0, 1.0),)
    memory: tuple[tuple[float, float], ...] = ((0.0, 1.0),)

    @staticmethod
    def _at(steps: tuple[tuple[float, float], ...], elapsed: float) -> float:
        fraction = steps[0][1]
        for start, value in steps:
            if elapsed >= start:
                fraction = value
        return fraction

    def fractions(self, elapsed: float) -> tuple[float, float]:
        return self._at(self.cpu, elapsed), self._at(self.memory, elapsed)


@dataclass(frozen=True)
class Arrival:
    at: float
    duration: float | None  # None: runs until the end
    pod: Pod
    usage: UsageProfile | None = None
    claims: tuple[ResourceClaim, ...] = ()  # made for this pod from claim templates


def renamed(pod: Pod, key: PodKey) -> Pod:
    """``pod`` under another key of its namespace (its manifest names nothing else after the pod)."""
    return copied(pod, {"name": key.partition("/")[2], "uid": key, "key": key})


@dataclass(frozen=True)
class Copies:
    """``count`` pods named ``name-0`` to ``name-<count-1>``, alike but for their names:
    ``first`` is ``name-0``'s arrival (no claims: a pod with claims is made one by one)."""

    first: Arrival
    name: str
    count: int

    @property
    def at(self) -> float:
        return self.first.at

    def keyed(self) -> Iterator[tuple[PodKey, Arrival]]:
        """Its pods' keys in order (their numbers in the order of their decimal strings),
        each with ``first``."""
        first, prefix = self.first, f"{self.first.pod.namespace}/{self.name}-"
        for n in in_name_order(self.count):
            yield (first.pod.key if n == 0 else PodKey(f"{prefix}{n}")), first


def in_name_order(count: int) -> Iterator[int]:
    """0 to ``count - 1`` in the order of their decimal strings (0, 1, 10, 100, 11, ...),
    one at a time."""
    if count < 1:
        return
    yield 0
    last, n = count - 1, 1
    for _ in range(last):
        yield n
        if n * 10 <= last:
            n *= 10
        else:
            while n % 10 == 9 or n + 1 > last:
                n //= 10
            n += 1


class Arrivals(Sequence[Arrival]):
    """Pods in the order they arrive: by time, then by key."""

    def __init__(self, parts: Iterable[Arrival | Copies] = ()) -> None:
        self._parts = sorted(parts, key=lambda p: p.at)
        self._len = _pods_in(self._parts)
        self._listed: list[Arrival] | None = None  # made on the first lookup by index
        self.usage_varies = any((p.first if isinstance(p, Copies) else p).usage is not None for p in self._parts)  # what metrics report changes with time alone

    @staticmethod
    def of(arrivals: Sequence[Arrival]) -> Arrivals:
        """``arrivals`` in the order they arrive (as they are, if they are ``Arrivals``)."""
        return arrivals if isinstance(arrivals, Arrivals) else Arrivals(arrivals)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Arrival]:
        for key, a in self.keyed():
            yield a if key == a.pod.key else Arrival(a.at, a.duration, renamed(a.pod, key), a.usage)

    def keyed(self) -> Iterator[tuple[PodKey, Arrival]]:
        """Each pod's key in order, with its arrival, or a copy's with its entry's first
        pod's (no pod is made: what a pass that needs only keys and shapes asks)."""
        for _, same in itertools.groupby(self._parts, key=lambda p: p.at):
            parts = [p.keyed() if isinstance(p, Copies) else ((p.pod.key, p),) for p in same]
            if len(parts) == 1:
                yield from parts[0]
            else:
                yield from heapq.merge(*parts, key=lambda pair: pair[0])

    @overload
    def __getitem__(self, index: int) -> Arrival: ...
    @overload
    def __getitem__(self, index: slice) -> list[Arrival]: ...
    def __getitem__(self, index: int | slice) -> Arrival | list[Arrival]:
        if self._listed is None:
            self._listed = list(self)
        return self._listed[index]

    def after(self, at: float) -> tuple[int, Arrival | None]:
        """How many pods arrive after ``at``, and the first of them."""
        late = [p for p in self._parts if p.at > at]
        if not late:
            return 0, None
        return _pods_in(late), next(iter(Arrivals(late)))


def _pods_in(parts: Iterable[Arrival | Copies]) -> int:
    return sum(p.count if isinstance(p, Copies) else 1 for p in parts)
