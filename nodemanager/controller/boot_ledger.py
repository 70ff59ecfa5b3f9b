"""``BootLedger``: every boot is justified by the pods it was for, and a useless one is not repeated.

A node booted for pods that the scaler, once the node is Ready, places neither there nor on
any other node that exists was of no use to them. Booting again for the same pods would be as
useless, and one such boot per loop is a storm (a spread domain no node of the pod's can be in;
a filter the planner and the binder read differently). So such a pod is *held*: reported
unschedulable with the reason, and no new node is booted for it nor for pods of its kind (the
scaler holds back the pod's whole class), until the cluster changed in a way that could change
the answer (a node other than the held pods' own came or went, or a pod went) *and* the hold's
backoff passed (``HOLD_BASE`` doubled per useless boot of the pod, at most ``HOLD_CAP``).

The fleet brake is the second line, for whatever the holds miss: within ``nodes.bootBrake.window``
a pool may launch at most ``bootsPerPod`` nodes per distinct pod those launches were for
(standby nodes, booted for no pod, are not counted). Past that its boots pause until old
launches leave the window.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from nodemanager.model import PodKey

HOLD_BASE = 60.0  # seconds a pod is held after its first useless boot
HOLD_CAP = 1800.0
HELD = "no node is booted for pods of its kind until the cluster changes"


@dataclass(frozen=True)
class Hold:
    reason: str
    since: float
    until: float  # not released before, whatever changes
    useless: int  # boots of no use to the pod so far
    world: tuple  # the cluster as it was when held (see ``BootLedger.world``)

    def as_dict(self) -> dict[str, object]:
        return {"reason": self.reason, "since": self.since, "not_before": self.until, "useless_boots": self.useless}


@dataclass(frozen=True)
class Brake:
    pool: str
    launches: int
    pods: int
    until: float

    def describe(self) -> str:
        return (
            f"boot brake: {self.launches} node(s) launched within nodes.bootBrake.window for {self.pods} distinct pod(s), "
            "more than nodes.bootBrake.bootsPerPod allows; boots pause until older launches leave the window"
        )


class BootLedger:
    def __init__(self, window: float, boots_per_pod: float) -> None:
        self.window = window
        self.boots_per_pod = boots_per_pod
        self._for: dict[str, tuple[PodKey, ...]] = {}  # node -> the pods it was booted for, until judged
        self._launches: dict[str, deque[tuple[float, str, tuple[PodKey, ...]]]] = {}  # pool -> (when, node, pods)
        self._launched_for: dict[str, Counter[PodKey]] = {}  # pool -> its launches in the window for each pod (kept as they come and go)
        self._useless: dict[PodKey, int] = {}  # pod -> its boots of no use so far
        self.holds: dict[PodKey, Hold] = {}
        self.futile_nodes: set[str] = set()  # nodes that were of no use to the pods they were for
        self._braked: dict[str, Brake] = {}

    # -- what was booted ---------------------------------------------------------------------
    def booted(self, node: str, pods: tuple[PodKey, ...]) -> None:
        """A node is to be booted for ``pods`` (none: standby)."""
        if pods:
            self._for[node] = pods

    @property
    def unjudged(self) -> Iterable[str]:
        """The nodes booted for pods and not judged yet."""
        return self._for.keys()

    def launched(self, pool: str, node: str, now: float) -> None:
        """Its instance runs: it counts against the pool's brake."""
        pods = self._for.get(node, ())
        if pods:
            self._launches.setdefault(pool, deque()).append((now, node, pods))
            self._launched_for.setdefault(pool, Counter()).update(pods)

    def failed(self, node: str) -> None:
        """Its boot failed: the pods owe it nothing (a node stopped before it was Ready is
        never judged, and is forgotten with its record)."""
        self._for.pop(node, None)

    # -- judging -------------------------------------------------------------------------------
    def judge(
        self,
        now: float,
        *,
        ready: Callable[[str], bool],
        idle: Callable[[str], bool],
        waiting: Callable[[PodKey], bool],
        placed_on_existing: Mapping[PodKey, str],
        reasons: Mapping[PodKey, str],
        world: Callable[[], tuple],
    ) -> list[tuple[PodKey, Hold]]:
        """After a decision: each node booted for pods and Ready now is judged once. One
        that the decision leaves idle (no pod there, none placed there) was of no use to the
        pods it was for that still wait and that the decision places on no node that exists:
        they are held. The pods held anew are returned (to log and report once)."""
        new: list[tuple[PodKey, Hold]] = []
        for node in [n for n in self._for if ready(n)]:
            pods = self._for.pop(node)
            if not idle(node):
                continue  # it took pods: of use, whichever they were
            useless = [p for p in pods if waiting(p) and p not in placed_on_existing]
            if not useless:
                continue
            self.futile_nodes.add(node)
            seen = world()
            for pod in useless:
                n = self._useless[pod] = self._useless.get(pod, 0) + 1
                why = reasons.get(pod)
                reason = f"node {node} was booted for {pod} and is Ready, but the scaler places {pod} on no node that exists" + (f" ({why})" if why else "")
                hold = Hold(f"{reason}; {HELD}", now, now + min(HOLD_CAP, HOLD_BASE * 2 ** (n - 1)), n, seen)
                self.holds[pod] = hold
                new.append((pod, hold))
        return new

    def on_the_way(self, alive: Callable[[str], bool]) -> dict[PodKey, str]:
        """Pods a node was booted for that is not Ready yet: no second node is booted for
        one of them while the first may still take it."""
        out: dict[PodKey, str] = {}
        for node, pods in self._for.items():
            if alive(node):
                for pod in pods:
                    out[pod] = f"node {node}, booted for it, is not Ready yet"
        return out

    def held(self, now: float, world: Callable[[], tuple], waiting: Callable[[PodKey], bool]) -> dict[PodKey, str]:
        """The pods no new node may be booted for now. A hold ends when its pod is gone or
        bound, or when its backoff passed and the cluster changed since it began."""
        if self._useless:
            seen = world() if self.holds else ()
            for pod, hold in list(self.holds.items()):
                if not waiting(pod) or (now >= hold.until and seen != hold.world):
                    del self.holds[pod]
            for pod in [p for p in self._useless if not waiting(p)]:
                del self._useless[pod]
        return {pod: hold.reason for pod, hold in self.holds.items()}

    def forget_node(self, node: str) -> None:
        self._for.pop(node, None)
        self.futile_nodes.discard(node)

    # -- the brake -----------------------------------------------------------------------------
    def braked(self, now: float) -> tuple[dict[str, Brake], list[Brake]]:
        """Pools whose boots the brake pauses now, and those it began to pause (to say once)."""
        begun = []
        for pool, launches in self._launches.items():
            launched_for = self._launched_for[pool]
            while launches and launches[0][0] <= now - self.window:
                for pod in launches.popleft()[2]:
                    if launched_for[pod] > 1:
                        launched_for[pod] -= 1
                    else:
                        del launched_for[pod]
            pods = len(launched_for)
            allowed = math.ceil(self.boots_per_pod * pods)
            if launches and len(launches) > allowed:
                # paused until enough launches leave the window for the rest to be allowed
                until = launches[len(launches) - allowed - 1][0] + self.window
                brake = Brake(pool, len(launches), pods, until)
                if pool not in self._braked:
                    begun.append(brake)
                self._braked[pool] = brake
            else:
                self._braked.pop(pool, None)
        return dict(self._braked), begun

    def status(self) -> dict[str, object]:
        return {
            "held_pods": {pod: hold.as_dict() for pod, hold in sorted(self.holds.items())},
            "braked_pools": {pool: {"launches": b.launches, "pods": b.pods, "until": b.until} for pool, b in sorted(self._braked.items())},
        }
