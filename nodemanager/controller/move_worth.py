"""Whether a consolidation is worth the pods it moves: the payback rule, Karpenter's
Balanced score, and the cooldown of pods moved lately (``scaler/payback.py`` has the rules).

Each move the planner finds is weighed here before it is proposed and again when it is
validated; one turned down is counted by reason (``/metrics``, the simulation report) and
the planner tries the next. A pod that a disruption evicted is made again by its
controller, often under another name (a Job's or a ReplicaSet's pod): the same pod seen
bound again, or else the next pod of that controller bound after the move, is taken to be
the one moved.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from nodemanager.config.schema import ConsolidationPolicy
from nodemanager.controller.run_lengths import RunLengths, controller_of
from nodemanager.model import LIVE_STATES, Node, NodeName, Pod, PodKey
from nodemanager.scaler.payback import Destination, Evicted, Payback, balanced_verdict, node_disruption, share_of

if TYPE_CHECKING:
    from nodemanager.controller.state import ClusterState
    from nodemanager.controller.tenure import Changes
    from nodemanager.scaler import ClusterSnapshot
    from nodemanager.scaler.consolidation import Command
    from nodemanager.status.metrics import Metrics

PAYBACK = "payback"
BALANCED = "balanced"
COOLDOWN = "cooldown"
REMEMBERED = 86400.0  # a pod's moves count toward its cooldown for a day
FORGET_EVERY = 600.0  # moves are looked through for those to forget at most this often
MOVED_KEPT = 65536  # controllers with moved pods not yet seen again (a bound on memory: the oldest go first)


@dataclass(frozen=True, slots=True)
class Move:
    at: float  # when the pod was evicted
    count: int  # its moves lately, this one included

    def window(self, cooldown: float) -> float:
        """How long after this move its pod's node is not consolidated: the cooldown after a
        first move, four times as long for each move before it, and a day at least after a
        second: consolidation moves a pod at most twice a day."""
        wait = cooldown * 4 ** (self.count - 1)
        return wait if self.count == 1 else max(wait, REMEMBERED)


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
        self._owed: dict[str, deque[Move]] = {}  # controller -> its pods' moves, not yet seen bound again
        self._gone: dict[PodKey, Move] = {}  # pods evicted, not yet seen bound again -> their move
        self._cooled: set[tuple[PodKey, Move]] = set()  # the moves the cooldown kept a node for: counted once
        self._moved: dict[PodKey, Move] = {}  # pod -> its last move (as its controller's pod)
        self._completing: dict[PodKey, str] = {}  # pods placed that run to completion -> their controller
        self.run_lengths = RunLengths()
        self._next_forget = 0.0  # when moves are next looked through for those to forget
        self._cooldown = 0.0  # the longest consolidationCooldown, as ``forget`` was last told
        self.time_dependent = False  # a move was turned down by a rule that may pass later, with nothing else changed

    # -- the cooldown ----------------------------------------------------------------------
    def moved(self, pods: Iterable[Pod], now: float) -> None:
        """A disruption evicts ``pods`` now."""
        for pod in pods:
            prior = self._remembered(self._moved.get(pod.key), now)
            move = Move(now, (prior.count if prior is not None else 0) + 1)
            if len(self._gone) >= MOVED_KEPT:
                del self._gone[next(iter(self._gone))]
            self._gone[pod.key] = move
            owed = self._owed.get(controller := controller_of(pod))
            if owed is None:
                if len(self._owed) >= MOVED_KEPT:
                    del self._owed[next(iter(self._owed))]
                owed = self._owed[controller] = deque()
            owed.append(move)

    def arrived(self, pod: Pod, now: float) -> None:
        """``pod`` is first seen on a node: a pod moved (the same pod, or the next of its
        controller's, when its controller made it again under another name)."""
        controller = controller_of(pod)
        if pod.completes:
            self._completing[pod.key] = controller
        owed = self._owed.get(controller)
        if owed and self._remembered(owed[-1], now) is None:
            del self._owed[controller]
            owed = None
        move = self._remembered(self._gone.pop(pod.key, None), now)
        if owed:
            if move is None:
                move = owed.popleft()
            elif move in owed:
                owed.remove(move)
            if not owed:
                del self._owed[controller]
        if move is not None:
            self._moved[pod.key] = move

    def departed(self, key: PodKey, ran: float, finished: bool) -> None:
        """``key`` left its node after ``ran`` seconds there; ``finished``: it ran to its end."""
        controller = self._completing.pop(key, None)
        if controller is not None and finished:
            self.run_lengths.finished(controller, ran)

    def saw(self, changes: Changes, now: float) -> None:
        """What a pass found of pods arriving on nodes and leaving them."""
        for pod in changes.arrived:
            self.arrived(pod, now)
        for key, ran, finished in changes.left:
            self.departed(key, ran, finished)

    def cooling(self, held: Iterable[Pod], cooldown: float, now: float) -> str:
        """Why a node holding ``held`` is not consolidated now ("" if it may be): a pod moved
        ``n`` times within a day waits ``cooldown`` × 4^(n-1) after its last move."""
        if cooldown <= 0 or not self._moved:
            return ""
        for pod in held:
            move = self._moved.get(pod.key)
            if move is not None and now - move.at < move.window(cooldown):
                if (pod.key, move) not in self._cooled:
                    self._cooled.add((pod.key, move))
                    self._count(COOLDOWN)
                return (
                    f"pod {pod.key} was moved {(now - move.at) / 60:.0f} min ago, its move {move.count} lately "
                    f"(consolidationCooldown {cooldown / 60:g} min, four times as long for each move before it within a day, a day at least after two)"
                )
        return ""

    def forget(self, now: float, cooldown: float) -> None:
        """A move is remembered for a day, or its cooldown if longer: a pod moved again
        meanwhile waits four times as long; one left alone that long starts its count again.
        Forgetting only frees memory: every use asks whether a move is still remembered at
        its own time, so what is remembered does not depend on when passes ran (a
        simulation skips quiet stretches without a pass)."""
        self._cooldown = cooldown
        if now < self._next_forget or not (self._moved or self._owed or self._gone):
            return
        self._next_forget = now + FORGET_EVERY
        keep = lambda m: self._remembered(m, now) is not None  # noqa: E731
        self._moved = {k: m for k, m in self._moved.items() if keep(m)}
        self._gone = {k: m for k, m in self._gone.items() if keep(m)}
        self._cooled = {(k, m) for k, m in self._cooled if now - m.at < m.window(cooldown)}
        for controller in [c for c, owed in self._owed.items() if not keep(owed[-1])]:
            del self._owed[controller]

    def _remembered(self, move: Move | None, now: float) -> Move | None:
        return move if move is not None and now - move.at < max(REMEMBERED, move.window(self._cooldown)) else None

    def next_change(self, now: float) -> float:
        """When, with nothing else changing, a pod's cooldown next ends."""
        return min((m.at + w for m in self._moved.values() if now < m.at + (w := m.window(self._cooldown))), default=math.inf)

    # -- the rules -------------------------------------------------------------------------
    def _rule(self, nodes: Sequence[Node]) -> Payback | None:
        """The payback rule of these nodes' pools (the strictest of each setting), or None if none asks for it."""
        pools = [p for n in nodes if (p := self.state.pool_config(n.pool)) is not None and p.disruption.consolidation_payback.enabled]
        if not pools:
            return None
        return Payback(min(p.disruption.consolidation_payback.horizon for p in pools), max(p.disruption.consolidation_payback.pod_startup for p in pools))

    def unpromising(self, snapshot: ClusterSnapshot, nodes: Sequence[Node], now: float) -> str:
        """Why no move of ``nodes`` can pay, before the what-if is asked ("" if one may): even
        with their pods in room kept anyway, what they save until their pods end is less
        than the pods' start-up and redone work take. Counted when it cannot."""
        rule = self._rule(nodes)
        if rule is None:
            return ""
        without, with_move = rule.weigh(self._removed(snapshot, nodes, {}, now), {})
        if with_move <= without:
            return ""
        self._count(PAYBACK)
        self.time_dependent = True  # its pods run on: it may pay later
        return f"no move of it can pay: it saves ${without:.4f} until its pods end, their start-up and redone work take ${with_move:.4f}"

    def _count(self, reason: str) -> None:
        self.rejected[reason] += 1
        self.metrics.consolidation_rejected.labels(reason).inc()

    def _removed(self, snapshot: ClusterSnapshot, nodes: Sequence[Node], to: Mapping[PodKey, NodeName], now: float) -> list[tuple[float, list[Evicted]]]:
        """Each of ``nodes``' price, and what payback knows of its pods (going ``to`` those nodes)."""
        return [(self.state.price_of(n), [self._evicted(n, pod, to.get(pod.key, ""), now) for pod in snapshot.by_node.held(n.name)]) for n in nodes]

    def verdict(self, snapshot: ClusterSnapshot, command: Command, now: float) -> str:
        """Why ``command`` is not worth its evictions ("" if it is); counted when it is not."""
        c = self.state
        nodes = [n for name in command.nodes if (n := c.nodes.get(name)) is not None]
        pools = {p.name: p for n in nodes if (p := c.pool_config(n.pool)) is not None}
        why, reason = "", ""
        rule = self._rule(nodes)
        if rule is not None:
            removed = self._removed(snapshot, nodes, command.destinations, now)
            why, reason = rule.verdict(removed, self._destinations(snapshot, command, now)), PAYBACK
        balanced = [p for p in pools.values() if p.disruption.consolidation_policy is ConsolidationPolicy.BALANCED]
        if not why and balanced:
            cost, disruption = self._totals(snapshot, {p.name for p in balanced})
            move = sum(node_disruption(snapshot.by_node.held(n.name)) for n in nodes)
            why, reason = balanced_verdict(command.savings, move, cost, disruption, min(p.disruption.threshold for p in balanced)), BALANCED
        if why:
            self._count(reason)
            self.time_dependent = True  # pods run on, and the pools change: it may pass later
        return why

    def _left(self, node: str, pod: Pod, now: float) -> tuple[float, float | None]:
        """Seconds ``pod`` has run on ``node``, and how long it is expected to run still (None: for good)."""
        ran = self.run_times.ran(node, pod.key, now)
        return ran, self.run_lengths.left(controller_of(pod), ran) if pod.completes else None

    def _evicted(self, node: Node, pod: Pod, to: str, now: float) -> Evicted:
        ran, left = self._left(node.name, pod, now)
        return Evicted(ran, left, share_of(pod, node.allocatable.cpu, node.allocatable.memory, self.state.price_of(node)), to)

    def _destinations(self, snapshot: ClusterSnapshot, command: Command, now: float) -> dict[str, Destination]:
        """The nodes ``command``'s pods would go to: a new one kept by nothing else, an
        existing one for as long as its own pods keep it."""
        out = {spec.name: Destination(spec.price, 0.0) for spec in command.replacements}
        for name in set(command.destinations.values()) - out.keys():
            node = self.state.nodes.get(name)
            if node is None:
                continue
            until = 0.0
            for pod in snapshot.by_node.held(name):
                left = self._left(name, pod, now)[1]
                until = max(until, math.inf if left is None else left)
            out[name] = Destination(self.state.price_of(node), until)
        return out

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
