"""The disruption controller: expired and drifted nodes replaced, underutilized nodes
consolidated, within budgets.

Each pass (every ``loops.disruption``) on a settled cluster (no pod waiting, no node
booting, none being removed) it first replaces one expired or drifted node, if any may go;
otherwise it lists the consolidation candidates, asks the scaler's consolidation planner
for the best consolidation, and proposes it. A proposal is acted on only after
``VALIDATION_DELAY`` seconds, if the cluster is still settled and the planner still agrees
(Karpenter's validation). A replacement is booted and Ready before the nodes it replaces
are marked; marked nodes are drained (the Eviction API, PodDisruptionBudgets) by the reaper.
Empty nodes are stopped by the pool loop after ``nodes.idleGrace``, within the Empty budgets.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import operator
from collections import Counter, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nodemanager.config.schema import DisruptionReason, Pool
from nodemanager.controller.budgets import allowed
from nodemanager.controller.consolidation_prices import ConsolidationPrices
from nodemanager.controller.labels import LABELS
from nodemanager.controller.move_worth import MoveWorth
from nodemanager.controller.tenure import Tenure, first_overtaking
from nodemanager.model import LIVE_STATES, Node, NodeName, NodeState
from nodemanager.model.pod import DO_NOT_DISRUPT_ANNOTATION
from nodemanager.scaler import ClusterSnapshot, StopOrder
from nodemanager.scaler.consolidation import Command
from nodemanager.scaler.drift import drifted

if TYPE_CHECKING:
    from cloud.base import CloudClient
    from cloud.catalog import Catalog
    from nodemanager.controller.boots import Boots
    from nodemanager.controller.state import ClusterState
    from nodemanager.status.metrics import Metrics

log = logging.getLogger("nodemanager.disruption")

VALIDATION_DELAY = 15.0  # a proposal waits this long, then must still hold (Karpenter's)
PAYBACK_RETRY = 120.0  # a pass that found only moves not worth their evictions is tried again after this long, if nothing changed
SINGLE_NODE_TRIES = 10  # single candidates evaluated per pass: each is one computation
ACTIONS_KEPT = 100  # recent actions in /status
SETTLED = (NodeState.AVAILABLE, NodeState.CLAIMED)
_DO_NOT_DISRUPT = operator.attrgetter("do_not_disrupt")
_RANK = operator.itemgetter(0, 1, 2)  # a candidate's (work lost per dollar, minus its price, name)
_BY_AGE = operator.attrgetter("created_at", "name")  # oldest first (the order expiry and drift renew nodes in)


@dataclass
class _Proposal:
    command: Command
    at: float


@dataclass
class _Replacing:
    command: Command
    reason: DisruptionReason
    since: float
    marked: bool = False


def _same_drift(a: Node, b: Node) -> bool:
    """Whether ``drifted`` reads the same of the two records."""
    return (
        a.instance_type == b.instance_type
        and a.capacity_type is b.capacity_type
        and a.zone == b.zone
        and a.labels == b.labels
        and a.taints == b.taints
        and a.image_id == b.image_id
    )


def _keeps_pods(snapshot: ClusterSnapshot, name: str, pool: Pool) -> str:
    """Why the pods on node ``name`` may not be moved by a voluntary disruption ("" if
    they may): one holds device claims (a placed pod's are allocated on this node: moved,
    it would run without its devices or wait), or one has no controller to make it again
    (evicted, it would be gone for good; ``disruption.evictBarePods`` allows it)."""
    held = snapshot.by_node.held(name)
    if not held:
        return ""
    claimed = next((p for p in held if p.claims), None)
    if claimed is not None:
        return f"pod {claimed.key} holds device claims allocated on this node ({', '.join(claimed.claims)}): its devices do not move"
    if not pool.disruption.evict_bare_pods:
        bare = next((p for p in held if p.unreplaceable), None)
        if bare is not None:
            return f"pod {bare.key} has no controller to make it again (pools[].disruption.evictBarePods is false)"
    return ""


def _cluster(state: ClusterState, inputs: tuple, reserved: frozenset[NodeName], now: float) -> tuple:
    """What a pass's snapshot was made of, as far as a what-if reads it: equal only for the
    same cluster (``inputs``), prices, devices, offerings and pools paused, and nodes held."""
    return (
        inputs,
        state.catalog,  # (the objects: kept here, they cannot be freed and their ids reused)
        state.devices,
        frozenset(state.keeper.active(now).items()),
        frozenset(state.backoff.active(now)),
        frozenset(state.braked),
        frozenset(state.operator_held.items()),
        reserved,
    )


class DisruptionController:
    def __init__(self, state: ClusterState, cloud: CloudClient, metrics: Metrics, boots: Boots) -> None:
        self.state = state
        self.cloud = cloud
        self.metrics = metrics
        self.boots = boots
        self.proposal: _Proposal | None = None
        self.replacing: _Replacing | None = None
        self.tenure = Tenure(state)
        self.progress = "starting"  # what the last pass found, for /status
        self.blocked: dict[NodeName, str] = {}  # candidates not consolidated, and why
        self.held: dict[NodeName, str] = {}  # expired or drifted nodes not replaced yet, and why
        self.candidates = 0
        self._fruitless: tuple | None = None  # the inputs of the last pass that found nothing
        self._fruitless_until = math.inf  # ... and until when that holds (a move not worth it now may be later)
        self.reranked_at = math.inf  # when the candidates' order changes next, with nothing else changing
        self.actions: deque[dict[str, object]] = deque(maxlen=ACTIONS_KEPT)
        self.totals: Counter[str] = Counter()  # nodes, pods, savings by reason (simulation report)
        self.worth = MoveWorth(state, metrics, self.tenure)
        self.planner = ConsolidationPrices(state).planner(
            worth=lambda snapshot, command: self.worth.verdict(snapshot, command, state.clock.now()),
            promising=lambda snapshot, nodes: self.worth.unpromising(snapshot, nodes, state.clock.now()),
        )
        self._drift: dict[str, tuple[Node, Pool, Catalog, str | None, str]] = {}  # node -> (its record, pool, catalog, image, why drifted) as last found

    # -- what the pool loop asks -----------------------------------------------------------
    @property
    def reserved(self) -> frozenset[NodeName]:
        """The replacements in flight: not idle while the pods they are for are still elsewhere."""
        return frozenset(s.name for s in self.replacing.command.replacements) if self.replacing is not None else frozenset()

    def within_budgets(self, stops: tuple[StopOrder, ...], now: float) -> tuple[list[StopOrder], list[StopOrder]]:
        """Idle stops the Empty budgets allow now, and those that must wait."""
        room: dict[str, int] = {}
        ok, deferred = [], []
        for order in stops:
            node = self.state.nodes.get(order.name)
            pool = self.state.pool_config(node.pool) if node is not None else None
            if pool is None:
                ok.append(order)
                continue
            if pool.name not in room:
                room[pool.name] = allowed(pool, DisruptionReason.EMPTY, now, *self._counts(pool.name))[0]
            if room[pool.name] > 0:
                room[pool.name] -= 1
                ok.append(order)
            else:
                deferred.append(order)
        if deferred:
            log.info("%d idle node(s) wait for an Empty disruption budget: %s", len(deferred), ", ".join(o.name for o in deferred[:5]))
        for order in ok:
            node = self.state.nodes.get(order.name)
            self._record(now, DisruptionReason.EMPTY, Command((order.name,), (), self.state.price_of(node) if node else 0.0, 0))
        return ok, deferred

    # -- the loop ------------------------------------------------------------------------
    def run(self, now: float) -> None:
        c = self.state
        self.worth.saw(self.tenure.track(now), now)
        self.worth.forget(now, max((p.disruption.consolidation_cooldown for p in c.config.pools), default=0.0))
        if self.replacing is not None:
            self._advance(now)
            return
        unsettled = self.unsettled()
        if unsettled:
            if self.proposal is not None:
                log.info("consolidation dropped before acting: %s", unsettled)
            self.proposal, self.progress = None, unsettled
            return
        if self.proposal is not None and now - self.proposal.at < VALIDATION_DELAY:
            return  # validated once the delay is over; until then the candidates stand as the proposal found them
        snapshot = self._without_idle(c.snapshot(now, self.reserved, c.cache.snapshot()))
        renewed = self.proposal is None and self._renew(snapshot, now)
        self.metrics.disruption_held.set(len(self.held))
        if renewed:
            return
        self.worth.time_dependent = False
        candidates, together, blocked = self._candidates(snapshot, now)
        self.metrics.disruption_candidates.set(len(candidates))
        if self.proposal is not None:
            proposed, self.proposal = self.proposal.command, None
            at = {n.name: i for i, n in enumerate(candidates)}
            nodes = [n for n in candidates if n.name in proposed.nodes]
            if len(nodes) < len(proposed.nodes):
                again, why = None, "a node is no longer a candidate"
            elif len(nodes) > 1 and max(at[n.name] for n in nodes) >= together:
                again, why = None, "PodDisruptionBudgets no longer allow these nodes together"
            else:
                again, why = self.planner.consolidate(snapshot, nodes)
            if again is None:
                log.info("consolidation dropped at validation: %s", why)
                self.progress = f"dropped at validation: {why}"
                return
            self._act(again, DisruptionReason.UNDERUTILIZED, now)
            return
        inputs = (c.cache.generation, c.nodes.stamp, frozenset(n.name for n in candidates), frozenset(c.unneeded_since), together)
        if inputs == self._fruitless and now < self._fruitless_until:
            return  # nothing changed since the last pass found nothing (but the candidates' order, as their pods age)
        found, why = self.planner.best(snapshot, candidates, SINGLE_NODE_TRIES, together, cluster=_cluster(c, inputs, self.reserved, now))
        self.blocked = {**blocked, **why}
        if found is None:
            # (a move turned down as not worth it now may be worth it later, as its pods run on:
            # asked again after a while, not at every pass)
            self._fruitless = inputs
            self._fruitless_until = now + PAYBACK_RETRY if self.worth.time_dependent else math.inf
            self.progress = f"nothing to consolidate among {len(candidates)} candidate(s)"
            return
        self.proposal = _Proposal(found, now)
        self.progress = f"proposed at {now:.0f}: {found.describe()}"
        work = sum(held.work(now) for name in found.nodes if (held := self.tenure.pods_since.get(name)) is not None)
        log.info(
            "consolidation proposed (acted on after %gs if it still holds): %s; %s (their pods have run %.0f pod-minutes there)",
            VALIDATION_DELAY,
            found.describe(),
            ", ".join(found.nodes),
            work / 60,
        )

    def _renew(self, snapshot: ClusterSnapshot, now: float) -> bool:
        """Expired and drifted nodes are replaced first, one at a time, within their pools'
        Expired and Drifted budgets: the capacity their pods need is booted, then they go.
        Expiration ignores do-not-disrupt; drift respects it and PodDisruptionBudgets.
        Whether one was started."""
        c = self.state
        self.held = {}
        allowance = {b.key: b.allowed(snapshot.pods) for b in snapshot.pdbs}
        current_image = getattr(self.cloud, "current_image", None)  # as last resolved: no call is made
        operator_held = c.operator_held
        for node in sorted((n for n in snapshot.nodes if n.state in SETTLED), key=_BY_AGE):
            pool = c.pool_config(node.pool)
            registered = c.cache.node(node.name)
            if pool is None or registered is None or not registered.ready:
                continue
            expire = pool.disruption.expire_after
            # Drift is judged on the record: the labels and taints the node was launched with,
            # never the Node's, which others change (a cordon, an operator's taint).
            record = c.nodes[node.name]
            if expire is not None and now - node.created_at >= expire:
                reason, why = DisruptionReason.EXPIRED, f"older than expireAfter {expire:g}s"
            elif drift := self._drifted(record, pool, current_image(node.instance_type) if current_image else None):
                reason, why = DisruptionReason.DRIFTED, drift
                held = snapshot.by_node.held(node.name)
                keep = next(filter(_DO_NOT_DISRUPT, held), None)
                over = next((b.key for b in snapshot.pdbs if allowance[b.key] < 1 and any(b.selects(p) for p in held)), None)
                if keep is not None or registered.do_not_disrupt or over is not None:
                    self.held[node.name] = f"drifted ({why}) but {'PodDisruptionBudget ' + over if over else DO_NOT_DISRUPT_ANNOTATION} holds it"
                    continue
            else:
                continue
            kept = operator_held.get(node.name) or _keeps_pods(snapshot, node.name, pool)
            if kept:
                self.held[node.name] = f"{reason.value.lower()} ({why}) but {kept}"
                continue
            left, budget = allowed(pool, reason, now, *self._counts(pool.name))
            if left <= 0:
                self.held[node.name] = f"{reason.value.lower()} ({why}); waits for {budget}"
                continue
            moved, cause = self.planner.relocate(snapshot, [node])
            if moved is None:
                self.held[node.name] = f"{reason.value.lower()} ({why}) but {cause}"
                continue
            log.info("node %s: %s (%s)", node.name, reason.value.lower(), why)
            self._act(moved, reason, now)
            return True
        return False

    def _drifted(self, node: Node, pool: Pool, image: str | None) -> str:
        """``drifted``, worked out again only when what it reads of the record, its pool, the
        catalog or the current image changed (every pass asks it of every settled node; its
        record changes with every binding)."""
        catalog = self.state.catalog
        kept = self._drift.get(node.name)
        if kept is not None and kept[1] is pool and kept[2] is catalog and kept[3] == image:
            if kept[0] is node:
                return kept[4]
            if _same_drift(kept[0], node):
                self._drift[node.name] = (node, *kept[1:])
                return kept[4]
        self._drift = self.state.nodes.pruned(self._drift)
        entry = self._drift[node.name] = (node, pool, catalog, image, drifted(node, pool, catalog, image))
        return entry[4]

    def _without_idle(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """The cluster as consolidation must see it: idle nodes are on their way out (after
        nodes.idleGrace), so moving pods onto one saves nothing; it only restarts them."""
        idle = self.state.unneeded_since
        nodes = tuple(dataclasses.replace(n, state=NodeState.TERMINATING) if n.name in idle else n for n in snapshot.nodes)
        return dataclasses.replace(snapshot, nodes=nodes)

    def unsettled(self) -> str:
        """Why disruption waits now ("" when the cluster is settled)."""
        c = self.state
        never = c.last_decision.unschedulable if c.last_decision is not None else {}
        if any(p.key not in never for p in c.cache.waiting()):  # a pod no pool can ever hold blocks nothing
            return "pods are waiting for nodes"
        if c.nodes.in_states(NodeState.CREATING, NodeState.CREATED):  # (the records' index: every pass asks)
            return "nodes are booting"
        if set(c.marked) - c.drain_blocked:  # a drain a budget holds for long blocks nothing else
            return "nodes are being removed"
        return ""

    def _counts(self, pool: str) -> tuple[int, int]:
        """The pool's live nodes (as the fleet tally counts them: every pass asks this of
        every pool, where a count of every record was a fiftieth of a busy day), and how
        many of them are being disrupted."""
        c = self.state
        c.fleet.update(c.catalog)
        counts = c.fleet.counts
        live = sum(counts[pool, state] for state in LIVE_STATES)
        return live, sum(1 for name in c.marked if (n := c.nodes.get(name)) is not None and n.pool == pool and n.state in LIVE_STATES)

    def _candidates(self, snapshot: ClusterSnapshot, now: float) -> tuple[list[Node], int, dict[NodeName, str]]:
        """Nodes consolidation may disrupt, cheapest to disrupt first (those of a pool whose
        Underutilized budget allows none left out); how many of the first may go together
        (within their pools' budgets and every PodDisruptionBudget); and why nodes that hold
        pods are not candidates. Single-node consolidation tries each of them, as
        Karpenter's does (cut to the budget first, with a budget of one node, a node no move
        could empty kept every other node of its pool for as long as it ran).
        Cheapest to disrupt: the least work lost per dollar an hour the node costs (the
        seconds its pods have run on it, summed), then the dearest. Ordered by their count of
        pods (Karpenter's eviction cost), nodes whose few pods had run long went first, and
        their pods started again: the README's day cost 3.3% more (the mean of six seeds)."""
        c = self.state
        by_node = snapshot.by_node
        operator_held = c.operator_held
        blocked: dict[NodeName, str] = {}
        found: list[tuple[float, float, str, Node, Pool]] = []
        for node in snapshot.nodes:
            if node.state not in SETTLED:
                continue
            pool = c.pool_config(node.pool)
            registered = c.cache.node(node.name)
            held = self.tenure.pods_since.get(node.name)
            if (
                pool is None
                or not pool.disruption.consolidates
                or registered is None
                or not registered.ready
                or held is None
                or not held.started
                or now - held.since < pool.disruption.consolidate_after
            ):
                continue
            keep = next(filter(_DO_NOT_DISRUPT, by_node.held(node.name)), None)  # (told in C: every pass asks it of every node)
            if keep is not None or registered.do_not_disrupt:
                blocked[node.name] = f"{DO_NOT_DISRUPT_ANNOTATION} on {'pod ' + keep.key if keep else 'the node'}"
            elif why := (
                operator_held.get(node.name)
                or _keeps_pods(snapshot, node.name, pool)
                or self.worth.cooling(by_node.held(node.name), pool.disruption.consolidation_cooldown, now)
            ):
                blocked[node.name] = why
            else:
                price = c.price_of(node)
                found.append((held.work(now) / price if price > 0 else math.inf, -price, node.name, node, pool))
        found.sort(key=_RANK)
        # the order (and so which candidates each budget keeps) changes with time alone, as pods run on
        self.reranked_at = first_overtaking(((self.tenure.pods_since[name], -minus_price) for _, minus_price, name, *_ in found), now)
        room: dict[str, tuple[int, str]] = {}  # pool -> (how many may go, the budget that says so)
        allowance = {b.key: b.allowed(snapshot.pods) for b in snapshot.pdbs}
        used: Counter[str] = Counter()  # evictions the candidates so far would take, by budget
        taken: Counter[str] = Counter()  # candidates so far, by pool
        out: list[Node] = []
        together = None  # the first candidate that would overdraw a budget with those before it
        for *_, node, pool in found:
            if pool.name not in room:
                room[pool.name] = allowed(pool, DisruptionReason.UNDERUTILIZED, now, *self._counts(pool.name))
            left, budget = room[pool.name]
            if left <= 0:
                blocked[node.name] = f"disruption budget: {budget or 'none left'}"
                continue
            if snapshot.pdbs:  # (none in most clusters: every pass weighs every candidate)
                # A budget that allows no eviction now keeps the node; one that allows fewer
                # than its pods here only slows the drain, which evicts as the budget allows
                # and tries the rest again (kubectl drain's and Karpenter's way).
                takes = Counter(b.key for p in by_node.held(node.name) for b in snapshot.pdbs if b.selects(p))
                over = next((k for k in sorted(takes) if allowance[k] < 1), None)
                if over is not None:
                    blocked[node.name] = f"PodDisruptionBudget {over} allows no eviction now; {takes[over]} of its pods run here"
                    continue
                used += takes
                if together is None and any(used[k] > allowance[k] for k in takes):
                    together = len(out)
            taken[pool.name] += 1
            if together is None and taken[pool.name] > left:
                together = len(out)
            out.append(node)
        self.candidates = len(out)
        return out, len(out) if together is None else together, blocked

    # -- acting --------------------------------------------------------------------------
    def _act(self, change: Command, reason: DisruptionReason, now: float) -> None:
        if not change.replacements:
            self._mark(change, reason, now)
            return
        self.replacing = _Replacing(change, reason, now)
        names = ", ".join(r.name for r in change.replacements)
        self.progress = f"booting {names} to replace {', '.join(change.nodes)} ({reason}): {change.describe()}"
        log.info("%s: booting %s before removing %s", reason, names, ", ".join(change.nodes))
        for spec in change.replacements:
            self.boots.boot(spec, now)

    def _advance(self, now: float) -> None:
        """Replacements in flight: once all are Ready, the nodes they replace go; if one
        failed, the change is abandoned (no pod has moved)."""
        r = self.replacing
        assert r is not None
        if r.marked:
            if not any(n in self.state.nodes and self.state.nodes[n].state is not NodeState.TERMINATED for n in r.command.nodes):
                self.replacing = None  # the replaced nodes are gone: the replacements are ordinary nodes now
            return
        for spec in r.command.replacements:
            node = self.state.nodes.get(spec.name)
            if node is None or node.state in (NodeState.TERMINATING, NodeState.TERMINATED) or spec.name in self.state.marked:
                log.warning("%s abandoned: replacement %s did not come up", r.reason, spec.name)
                self.progress = f"abandoned: replacement {spec.name} did not come up"
                self.replacing = None
                return
        if all(self.state.nodes[spec.name].state in SETTLED for spec in r.command.replacements):
            # While the replacements booted, an operator may have taken a node, or pods that
            # must not move may have landed on it: then it stays (the replacements are
            # ordinary nodes now, stopped if idle).
            snapshot = self.state.snapshot(now, self.reserved)
            for name in r.command.nodes:
                node = self.state.nodes.get(name)
                pool = self.state.pool_config(node.pool) if node is not None else None
                why = self.state.operator_held.get(name) or (_keeps_pods(snapshot, name, pool) if pool is not None else "")
                if why:
                    log.warning("%s of %s abandoned before any pod moved: %s", r.reason, name, why)
                    self.progress = f"abandoned: {name}: {why}"
                    self.replacing = None
                    return
            self._mark(r.command, r.reason, now)
            r.marked = True

    def _mark(self, change: Command, reason: DisruptionReason, now: float) -> None:
        action = "replace" if change.replacements else "delete"
        label = LABELS[reason]
        for name in change.nodes:
            self.worth.moved(filter(None, map(self.state.cache.pod, self.state.cache.held(name))), now)
            self.state.mark_for_termination(name, f"{label} ({action}): {change.describe()}", label)
        self.progress = f"acted at {now:.0f} ({reason}): {change.describe()}"
        log.info("%s: %s; removing %s", reason, change.describe(), ", ".join(change.nodes))
        self._record(now, reason, change)

    def _record(self, now: float, reason: DisruptionReason, done: Command) -> None:
        action = "replace" if done.replacements else "delete"
        entry = {
            "at": now,
            "reason": str(reason),
            "action": action,
            "nodes": list(done.nodes),
            "types": [f"{n.instance_type} {n.capacity_type}" for name in done.nodes if (n := self.state.nodes.get(name)) is not None],
            "replacements": [f"{r.instance_type} {r.capacity_type}" for r in done.replacements],
            "pods": done.pods,
        }
        self.actions.append({**entry, "savingsPerHour": round(done.savings, 4)})
        self.totals[f"{reason}.nodes"] += len(done.nodes)
        self.totals[f"{reason}.pods"] += done.pods
        self.totals[f"{reason}.savings"] += done.savings
        self.metrics.disruptions.labels(str(reason), action).inc(len(done.nodes))

    @property
    def busy(self) -> bool:
        """A consolidation is proposed, or replacements are under way."""
        return self.proposal is not None or self.replacing is not None

    def quiet_until(self, now: float) -> float | None:
        """While nothing changes, until when its passes do nothing (None: something is under
        way, or no pass has found nothing yet): the retry of a move not yet worth it, a
        node's pods reaching consolidateAfter, a pod's cooldown ending, the candidates'
        order changing (a budget may keep others)."""
        if self.busy or self._fruitless is None:
            return None
        c = self.state
        after = lambda name: (p := c.pool_config(c.nodes[name].pool)) and p.disruption.consolidate_after if name in c.nodes else None  # noqa: E731
        return min(self._fruitless_until, self.worth.next_change(now), self.tenure.first_past(now, after), self.reranked_at)

    def summary(self) -> dict[str, dict[str, float]]:
        """Nodes disrupted, pods moved and $/h saved (when acted), by reason."""
        reasons = sorted({key.split(".")[0] for key in self.totals})
        return {
            r: {"nodes": self.totals[f"{r}.nodes"], "pods": self.totals[f"{r}.pods"], "savings_per_hour": round(self.totals[f"{r}.savings"], 4)}
            for r in reasons
        }

    def status(self) -> dict[str, object]:
        return {
            "state": self.progress,
            "candidates": self.candidates,
            "proposal": self.proposal.command.describe() if self.proposal else None,
            "blocked": dict(sorted(self.blocked.items())[:20]),
            "held": dict(sorted(self.held.items())[:20]),  # expired or drifted, not replaced yet
            "rejected": dict(self.worth.summary()),  # consolidations turned down, by reason
            "recent": list(self.actions)[-20:],
        }
