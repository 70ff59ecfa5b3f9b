"""The simulated kubelets' heartbeats: when each registered node renews its Lease. A heap
of times, the nodes due at each and each node's latest time (an entry that differs is
stale), so a poll looks only at the nodes due, not at all; kubelets registered in one poll
beat in the same polls from then on: a time per poll, not per node, goes through the heap."""

from __future__ import annotations

import heapq
import operator
from collections.abc import Collection
from itertools import compress, filterfalse, repeat

KUBELET_HEARTBEAT = 10.0  # seconds between node status updates


class KubeletBeats:
    def __init__(self, interval: float = KUBELET_HEARTBEAT) -> None:
        self.interval = interval
        self.silenced: set[str] = set()  # kubelets that hang: registered, never renewing
        self._beats: list[float] = []
        self._due_at: dict[float, list[str]] = {}
        self._next_beat: dict[str, float] = {}
        # Each registered node's latest heartbeat: kept apart from its ClusterNode, which
        # is stamped with it only when the node itself is sent (a listing, a change).
        self._beat_at: dict[str, float] = {}

    def registered(self, name: str, now: float) -> None:
        """A node registered (heartbeating) at ``now``: it renews every interval from then."""
        self._beat_at[name] = now
        self._schedule_beats([name], now + self.interval)

    def forget(self, name: str) -> None:
        self._beat_at.pop(name, None)

    def last(self, name: str, default: float) -> float:
        """The node's latest heartbeat (``default``: none since it registered)."""
        return self._beat_at.get(name, default)

    def due(self, now: float, nodes: Collection[str]) -> set[str]:
        """Registered nodes whose heartbeat may be due (``renewing`` has the last word)."""
        due: set[str] = set()
        beats, latest = self._beats, self._next_beat
        while beats and beats[0] <= now + 1e-6:  # a margin for rounding: the test itself is exact
            at = heapq.heappop(beats)
            names = self._due_at.pop(at)
            # those whose latest time this is, registered (told in C: thousands a minute)
            due.update(filter(nodes.__contains__, compress(names, map(operator.eq, map(latest.get, names), repeat(at)))))
        return due

    def _schedule_beats(self, names: list[str], at: float) -> None:
        self._next_beat.update(dict.fromkeys(names, at))
        bucket = self._due_at.get(at)
        if bucket is None:
            self._due_at[at] = list(names)
            heapq.heappush(self._beats, at)
        else:
            bucket.extend(names)

    def renewing(self, names: list[str], now: float) -> list[str]:
        """Which of ``names`` (registered nodes, in order) renew their Lease now: those not
        silenced whose last renewal is an interval old (most of them: they were due). Each
        but the silenced is scheduled again; those renewing, at once (a busy simulation
        renews thousands a minute)."""
        interval, beat_at, silenced = self.interval, self._beat_at, self.silenced
        heard = list(filterfalse(silenced.__contains__, names)) if silenced else names  # (told in C, as ``due``)
        beating = list(compress(heard, map(operator.ge, map(operator.sub, repeat(now), map(beat_at.__getitem__, heard)), repeat(interval))))
        if len(beating) < len(names):
            renewing = set(beating)
            for name in names:
                if name not in renewing and name not in silenced:  # (not due yet)
                    self._schedule_beats([name], beat_at[name] + interval)
        beat_at.update(dict.fromkeys(beating, now))
        if beating:
            self._schedule_beats(beating, now + interval)
        return beating
