"""Whether a consolidation is worth the pods it moves: the payback rule, Karpenter's
Balanced score, and the cooldown of pods moved lately (``scaler/payback.py`` has the rules).

Each move the planner finds is weighed here before it is proposed and again when it is
validated; one turned down is counted by reason (``/metrics``, the simulation report) and
the planner tries the next. A pod that a consolidation evicted is made again by its
controller, often under another name (a Job's or a ReplicaSet's pod), so the pods moved
lately are known by their controller: the next pods of that controller bound after the move
are taken to be the moved ones.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from nodemanager.config.schema import ConsolidationPolicy
from nodemanager.controller.run_lengths import RunLengths, controller_of
from nodemanager.model import LIVE_STATES, Node, NodeName, Pod, PodKey
from nodemanager.scaler.payback import Evicted, Payback, balanced_verdict, node_disruption, share_of

if TYPE_CHECKING:
    from nodemanager.controller.state import ClusterState
    from nodemanager.controller.tenure import Changes
    from nodemanager.scaler import ClusterSnapshot
    from nodemanager.scaler.consolidation import Command
    from nodemanager.status.metrics import Metrics

PAYBACK = "payback"
BALANCED = "balanced"
COOLDOWN = "cooldown"
MOVED_KEPT = 65536  # controllers with moved pods not yet seen again (a bound on memory: the oldest go first)


class RunTimes(Protocol):
    def ran(self, node: NodeName, pod: PodKey, now: float) -> float:
        """Seconds ``pod`` has run on ``node``."""
        ...


class MoveWorth:
    def __init__(self, state: ClusterState, metrics: Metrics, run_times: RunTimes) -> None:
        self.state = state
        self.metrics = metrics
        self.run_times = run_times
        self.rejected: Counter[str] = Counter()  # moves turned down, by reason (the simulation report)
        self._owed: dict[str, deque[float]] = {}  # controller -> when each of its pods moved, not yet seen bound again
        self._gone: dict[PodKey, float] = {}  # pods evicted, not yet seen bound again -> when
        self._cooled: set[tuple[PodKey, float]] = set()  # (pod, when it moved) the cooldown kept a node for: counted once
        self._moved: dict[PodKey, float] = {}  # pod -> when consolidation moved it (as its controller's pod)
        self._completing: dict[PodKey, str] = {}  # pods placed that run to completion -> their controller
        self.run_lengths = RunLengths()
        self.time_dependent = False  # a move was turned down by a rule that may pass later, with nothing else changed

    # -- the cooldown ----------------------------------------------------------------------
    def moved(self, pods: Iterable[Pod], now: float) -> None:
        """Consolidation evicts ``pods`` now."""
        for pod in pods:
            if len(self._gone) >= MOVED_KEPT:
                del self._gone[next(iter(self._gone))]
            self._gone[pod.key] = now
            owed = self._owed.get(controller := controller_of(pod))
            if owed is None:
                if len(self._owed) >= MOVED_KEPT:
                    del self._owed[next(iter(self._owed))]
                owed = self._owed[controller] = deque()
            owed.append(now)

    def arrived(self, pod: Pod) -> None:
        """``pod`` is first seen on a node: a pod moved (the same pod, or the next of its
        controller's, when its controller made it again under another name)."""
        controller = controller_of(pod)
        if pod.completes:
            self._completing[pod.key] = controller
        owed = self._owed.get(controller)
        at = self._gone.pop(pod.key, None)
        if owed:
            if at is None:
                at = owed.popleft()
            elif at in owed:
                owed.remove(at)
            if not owed:
                del self._owed[controller]
        if at is not None:
            self._moved[pod.key] = at

    def departed(self, key: PodKey, ran: float, finished: bool) -> None:
        """``key`` left its node after ``ran`` seconds there; ``finished``: it ran to its end."""
        controller = self._completing.pop(key, None)
        if controller is not None and finished:
            self.run_lengths.finished(controller, ran)

    def saw(self, changes: Changes) -> None:
        """What a pass found of pods arriving on nodes and leaving them."""
        for pod in changes.arrived:
            self.arrived(pod)
        for key, ran, finished in changes.left:
            self.departed(key, ran, finished)

    def cooling(self, held: Iterable[Pod], cooldown: float, now: float) -> str:
        """Why a node holding ``held`` is not consolidated now ("" if it may be)."""
        if cooldown <= 0 or not self._moved:
            return ""
        for pod in held:
            at = self._moved.get(pod.key)
            if at is not None and now - at < cooldown:
                if (pod.key, at) not in self._cooled:
                    self._cooled.add((pod.key, at))
                    self.rejected[COOLDOWN] += 1
                    self.metrics.consolidation_rejected.labels(COOLDOWN).inc()
                return f"pod {pod.key} was moved by consolidation {(now - at) / 60:.0f} min ago (consolidationCooldown {cooldown / 60:g} min)"
        return ""

    def forget_before(self, when: float) -> None:
        """Moves before ``when`` no longer hold anything."""
        if not self._moved and not self._owed and not self._gone:
            return
        self._moved = {k: at for k, at in self._moved.items() if at >= when}
        self._gone = {k: at for k, at in self._gone.items() if at >= when}
        self._cooled = {(k, at) for k, at in self._cooled if at >= when}
        for controller in [c for c, owed in self._owed.items() if owed[-1] < when]:
            del self._owed[controller]

    # -- the rules -------------------------------------------------------------------------
    def verdict(self, snapshot: ClusterSnapshot, command: Command, now: float) -> str:
        """Why ``command`` is not worth its evictions ("" if it is); counted when it is not."""
        c = self.state
        nodes = [n for name in command.nodes if (n := c.nodes.get(name)) is not None]
        pools = {p.name: p for n in nodes if (p := c.pool_config(n.pool)) is not None}
        why, reason = "", ""
        held = {n.name: snapshot.by_node.held(n.name) for n in nodes}
        payback = [p.disruption.consolidation_payback for p in pools.values() if p.disruption.consolidation_payback.enabled]
        if payback:
            rule = Payback(min(p.horizon for p in payback), max(p.pod_startup for p in payback))
            evicted = [self._evicted(n, pod, now) for n in nodes for pod in held[n.name]]
            why, reason = rule.verdict(command.savings, evicted), PAYBACK
        balanced = [p for p in pools.values() if p.disruption.consolidation_policy is ConsolidationPolicy.BALANCED]
        if not why and balanced:
            cost, disruption = self._totals(snapshot, {p.name for p in balanced})
            move = sum(node_disruption(held[n.name]) for n in nodes)
            why, reason = balanced_verdict(command.savings, move, cost, disruption, min(p.disruption.threshold for p in balanced)), BALANCED
        if why:
            self.rejected[reason] += 1
            self.metrics.consolidation_rejected.labels(reason).inc()
            self.time_dependent = True  # pods run on, and the pools change: it may pass later
        return why

    def _evicted(self, node: Node, pod: Pod, now: float) -> Evicted:
        price = self.state.price_of(node)
        ran = self.run_times.ran(node.name, pod.key, now)
        left = self.run_lengths.left(controller_of(pod), ran) if pod.completes else None
        return Evicted(ran, left, share_of(pod, node.allocatable.cpu, node.allocatable.memory, price), price)

    def _totals(self, snapshot: ClusterSnapshot, pools: set[str]) -> tuple[float, float]:
        """The live nodes of these pools: their price, and their disruption, summed."""
        cost = disruption = 0.0
        for node in snapshot.nodes:
            if node.pool in pools and node.state in LIVE_STATES:
                cost += self.state.price_of(node)
                disruption += node_disruption(snapshot.by_node.held(node.name))
        return cost, disruption

    def summary(self) -> Mapping[str, int]:
        return dict(sorted(self.rejected.items()))
