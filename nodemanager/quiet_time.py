"""Quiet stretches of a simulation, skipped: a trace of months where a few pods run for days
would otherwise cost a run of every loop at its period, all doing nothing.

A stretch is quiet when nothing can happen in it but what the cluster does on its own at a
known time (the next arrival, finish, operator's node action, startup taint's removal or a
Terminated node record forgotten):
no pod waits, no node is booting, stopping or marked, every loop has run since the last
change, and consolidation's last pass found nothing. The loops are then not run until that
time; each runs next at the instant of its own beat it would have run at, so the report is
the same as without the skip (a test plays workloads both ways). A skip ends early where
time alone may change what a loop does: an idle node's idle grace running out, and
consolidation's verdict (its retry of a move that was not yet worth it, a node's pods
reaching consolidateAfter, a pod's cooldown ending, the first node's expireAfter). Anything whose next change cannot be told turns skipping off: injected
failures and interruptions, scheduled disruption budgets, capacity reservations (they
start and end on their own), batch overcommit, pods whose usage varies, kubelets made to
hang, and a timeline being drawn.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from nodemanager.controller.sync import TERMINATED_KEPT_FOR
from nodemanager.model import STABLE_STATES, NodeState

if TYPE_CHECKING:
    from cloud.simulated import SimulatedCloud
    from nodemanager.cluster.simulated import SimulatedCluster
    from nodemanager.config.schema import ProviderConfig
    from nodemanager.controller.node_controller import NodeController

SHORTEST = 2.0  # loop periods: a stretch shorter than this many pool periods is simply played


class QuietTime:
    def __init__(self, config: ProviderConfig, controller: NodeController, cluster: SimulatedCluster, cloud: SimulatedCloud) -> None:
        self.controller = controller
        self.cluster = cluster
        self.cloud = cloud
        intervals = config.loops.intervals()
        self.pool_period = intervals["pool"]
        pools = config.pools
        # How long nothing must have changed before a stretch may be skipped: two runs of
        # every loop that may act on it, so each has seen what is now. Not the price loop (a
        # simulated cloud has no prices but the catalog's), colocation (off when skipping),
        # the reservations loop (no reservations when skipping) nor the orphan collector,
        # whose next pass is told directly (``OrphanCollector.idle``): waiting two of its minutes
        # after every change cost a busy month more than all its quiet ones.
        self.settle = 2 * max(seconds for name, seconds in intervals.items() if name not in ("prices", "colocation", "reservations", "orphan_gc"))
        self.expire_after = {p.name: p.disruption.expire_after for p in pools}
        self.idle_grace = config.nodes.idle_grace
        sim = config.cloud.simulated
        faults = sim is not None and (sim.throttle_rate or sim.instance_death_per_hour or sim.spot_interruption_per_hour)
        scheduled = any(b.schedule for p in pools for b in p.disruption.budgets)
        reserved = any(p.capacity_reservations for p in pools)
        self.possible = not (faults or scheduled or reserved or config.colocation_anywhere)
        self.skipped = 0.0  # simulated seconds skipped, all stretches together
        self._seen: tuple | None = None
        self._since = 0.0  # when ``_seen`` last changed

    def saw(self, now: float) -> None:
        """Note what the cluster and the controller look like after the loops ran at ``now``."""
        c = self.controller.state
        seen = (self.cluster.version, c.cache.generation, c.nodes.stamp, len(c.marked), len(c.unneeded_since), self.controller.disruption.busy)
        if seen != self._seen:
            self._seen, self._since = seen, now

    def until(self, now: float, horizon: float) -> float | None:
        """The time to skip to from ``now`` (at most ``horizon``), or None to play on."""
        if not self.possible or now - self._since < self.settle:
            return None
        c = self.controller.state
        if c.marked or c.cache.waiting_count() or any(n.state not in STABLE_STATES for n in c.nodes.values()):
            return None
        # An idle node is stopped by the pool loop's first pass once its idle grace is over (one
        # whose stop a budget defers is past it already: played). The skip ends a pool period
        # before that, so no rounding of the sum lets it pass over that pass.
        if any(now - since >= self.idle_grace for since in c.unneeded_since.values()):
            return None
        idle = min((since + self.idle_grace for since in c.unneeded_since.values()), default=math.inf) - self.pool_period
        consolidation = self.controller.disruption.quiet_until(now)
        own = self.cluster.next_own_change()
        if consolidation is None or own is None:
            return None
        expiring = (n.created_at + e for n in c.nodes.values() if n.state is not NodeState.TERMINATED and (e := self.expire_after.get(n.pool)) is not None)
        # a Terminated record is forgotten TERMINATED_KEPT_FOR after (the candidates change with it)
        purged = (c.terminated_at.get(name, now) + TERMINATED_KEPT_FOR for name in c.nodes.in_states(NodeState.TERMINATED))
        target = min(own, consolidation, min(expiring, default=math.inf), min(purged, default=math.inf), idle, horizon)
        if target - now < SHORTEST * self.pool_period or math.isinf(target) or not self.controller.gc.idle(self.cloud.live_ids()):
            return None
        return target
