"""``Reporting``: what the controller shows of itself. The /status document (and its summary
in the cluster's status ConfigMap), the metrics' gauges, and the LP bound's rate for the
pods running, set beside the fleet's price."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from nodemanager import __version__
from nodemanager.cluster.base import ClusterSource
from nodemanager.config.schema import Pool
from nodemanager.controller.colocation import ColocationReconciler
from nodemanager.controller.disruption import DisruptionController
from nodemanager.controller.interruption import InterruptionController
from nodemanager.controller.reservations import ReservationController
from nodemanager.controller.state import ClusterState
from nodemanager.controller.timers import LoopTimer
from nodemanager.model import LIVE_STATES, CapacityType, Node, NodeState, Pod
from nodemanager.scaler.cost_bound import CostBound
from nodemanager.status.metrics import Metrics
from nodemanager.status.summary import status_text

BOUND_EVERY = 60.0  # seconds between two makings of the bound's rate for the pods running
STATUS_EVERY = 30.0  # seconds: the cluster's status ConfigMap is written at most this often
STATUS_AT_LEAST = 300.0  # ... and at least this often, changed or not
STATUS_WAIT = 0.05  # seconds /status waits for the controller before answering with its last document


class Reporting:
    def __init__(
        self,
        state: ClusterState,
        cluster: ClusterSource,
        metrics: Metrics,
        *,
        timers: dict[str, LoopTimer],
        controller_id: str,
        disruption: DisruptionController,
        interruption: InterruptionController,
        colocation: ColocationReconciler,
        reservations: ReservationController,
    ) -> None:
        self.state = state
        self.cluster = cluster
        self.metrics = metrics
        self.timers = timers
        self.controller_id = controller_id
        self.disruption = disruption
        self.interruption = interruption
        self.colocation = colocation
        self.reservations = reservations
        self.bound_rate: tuple[float, float | None] = (-math.inf, None)  # when the bound's rate was made, and it ($/h)
        self._status_published: tuple[float, str] = (-math.inf, "")  # when the cluster's status ConfigMap was written, and what it said
        self._last_status: tuple[float, dict[str, object]] | None = None  # (when, document): answered while the lock is held too long
        self._gauges_shown: dict[tuple[str, NodeState], int] = {}  # the node counts the gauges show
        self._gauges_version = -1  # the fleet tally's version they show
        for pool in state.config.pools:  # (the limits are fixed: set once)
            lim, m = pool.limits, metrics
            for gauge, limit in ((m.pool_limit_nodes, lim.nodes), (m.pool_limit_cpu, lim.cpu and lim.cpu / 1000), (m.pool_limit_memory, lim.memory)):
                if limit is not None:
                    gauge.labels(pool.name).set(limit)

    def publish_status(self, now: float) -> None:
        """The short status in the cluster (``kubectl get configmap``): written when it changed
        and ``STATUS_EVERY`` has passed, and every ``STATUS_AT_LEAST`` so readers see it is
        current; the call is made once the lock is released."""
        if not self.cluster.publishes_status or now - self._status_published[0] < STATUS_EVERY:
            return
        text = status_text(summary_document(self), datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        body = text.split("\n", 1)[1]  # without its time
        if body == self._status_published[1] and now - self._status_published[0] < STATUS_AT_LEAST:
            return
        self._status_published = (now, body)
        self.state.lock.after_release(self.cluster.publish_status, text)

    def refresh_bound(self, now: float) -> None:
        """The LP bound's hourly rate for the pods running now (what no fleet of the pools'
        offerings could undercut for them): beside the fleet's price in /status and the
        metrics, made at most every ``BOUND_EVERY`` (an LP per group of pools). The offline
        simulator, whose report bounds the whole run, makes none."""
        if not self.metrics.scraped or (now - self.bound_rate[0] < BOUND_EVERY and self.bound_rate[1]):
            return  # (an empty cluster's bound is made again at the next pass: it costs nothing)
        cached = self.state.cache.snapshot()
        running = [p for p in cached.pods if p.node_name in self.state.nodes and not p.of_node]  # on our nodes: what the fleet's price pays for
        rate = CostBound(self.state.scaler.views_for(cached.daemon_sets), running).rate(running)
        self.bound_rate = (now, rate)
        self.metrics.bound.set(rate)

    def refresh_gauges(self) -> None:
        """Node, pod and cost gauges; the node counts and the cost are set again only when
        a record came, went or changed what they are made of, or the prices changed."""
        self.state.fleet.update(self.state.catalog)
        if self.state.fleet.version != self._gauges_version:  # (the price asked for in between, by /status, caught up too)
            counts, shown = dict(self.state.fleet.counts), self._gauges_shown
            for pool, phase in shown.keys() - counts.keys():  # a state no node is in leaves the metrics
                self.metrics.nodes.remove(pool, phase.value)
            for (pool, phase), n in counts.items():
                if shown.get((pool, phase)) != n:  # (most record changes move no count: a binding, a heartbeat)
                    self.metrics.nodes.labels(pool, phase.value).set(n)
            self.metrics.cost.set(self.state.fleet.cost_per_hour())
            for pool in self.state.config.pools if self.metrics.scraped else ():  # (each walks the records)
                nodes, cpu, memory = self.state.pool_usage(pool.name)
                self.metrics.pool_nodes.labels(pool.name).set(nodes)
                self.metrics.pool_cpu.labels(pool.name).set(cpu / 1000)
                self.metrics.pool_memory.labels(pool.name).set(memory)
            self._gauges_shown, self._gauges_version = counts, self.state.fleet.version
        now = self.state.clock.now()
        for pod in self.state.cache.take_bound():
            self.metrics.pod_scheduling.observe(max(0.0, now - pod.created_at))
        self.metrics.pending_pods.set(self.state.cache.waiting_count())
        self.metrics.unschedulable_pods.set(len(self.state.last_decision.unschedulable) if self.state.last_decision else 0)

    def status(self, wait: float = STATUS_WAIT) -> dict[str, object]:
        """The /status document, built under the lock from a consistent state. No loop holds
        the lock across a call, but a decision over a large cluster may take a while: after
        ``wait`` seconds the last document built is answered instead, saying how old it is."""
        if not self.state.lock.acquire(timeout=wait):
            return self._stale_status()
        try:
            doc = status_document(self)
            self._last_status = (self.state.clock.now(), doc)
            return doc
        finally:
            self.state.lock.release()

    def _stale_status(self) -> dict[str, object]:
        busy = {"busy": True, "busy_note": f"a loop has held the controller for over {STATUS_WAIT:g}s (a long decision)"}
        if self._last_status is None:
            return {"controller": {"id": self.controller_id, "ready": self.state.ready, "as_of": None, **busy}}
        as_of, doc = self._last_status
        controller = doc["controller"]
        assert isinstance(controller, dict)
        return {**doc, "controller": {**controller, "as_of": as_of, **busy}}


def status_document(r: Reporting) -> dict[str, object]:
    """Call with the controller's lock held."""
    now = r.state.clock.now()
    return {
        **summary_document(r),
        "loops": {name: timer.as_dict() for name, timer in r.timers.items()},
        "nodes": [_node(r, n) for _, n in sorted(r.state.nodes.items())],
        "unavailable": r.state.keeper.dump(now),
        "boots": r.state.ledger.status(),
        "decisions": list(r.state.recent_decisions),
        "interruption": r.interruption.status(),
        "reservations": r.reservations.status(),
        "config": r.state.config.model_dump(mode="json", by_alias=True),
    }


def summary_document(r: Reporting) -> dict[str, object]:
    """The part of /status the cluster's status ConfigMap summarises (no node by node, no
    configuration): made every 30 s within a pool pass. Call with the lock held."""
    decision = r.state.last_decision
    waiting = []
    for pod in r.state.cache.waiting():
        reason = ""
        if decision is not None:
            reason = decision.unschedulable.get(pod.key) or decision.waiting.get(pod.key) or ""
            if not reason and pod.key in decision.bindings:
                reason = _planned_reason(r, pod, decision.bindings[pod.key])
        waiting.append({"pod": pod.key, "reason": reason or "not yet considered", "since": pod.created_at})
    counts = r.state.cache.counts()
    counts["unschedulable"] = len(decision.unschedulable) if decision else 0
    return {
        "controller": {
            "id": r.controller_id,
            "version": __version__,
            "started_at": r.state.started_at,
            "now": r.state.clock.now(),
            "leader": True,
            "ready": r.state.ready,
        },
        "pods": {"counts": counts, "waiting": waiting},
        "pools": [_pool(r, p) for p in r.state.config.pools],
        "disruption": r.disruption.status(),
        "cost_per_hour": round(r.state.cost_per_hour(), 6),
        "bound_per_hour": None if r.bound_rate[1] is None else round(r.bound_rate[1], 6),  # the LP bound for the pods running (once a minute)
    }


def _planned_reason(r: Reporting, pod: Pod, name: str) -> str:
    """Why a pod planned onto a node is not running there yet, in the words that fit."""
    if not r.state.is_ready(name):
        return f"planned onto {name}, waiting for it to be Ready"
    if not r.cluster.schedules_pods:
        return f"room for it on {name}; waiting for the cluster's scheduler to bind it"
    blocker = r.state.bind_blocker(pod, name)
    return f"planned onto {name}; not bound yet: {blocker}" if blocker else f"planned onto {name}; binding"


def _node(r: Reporting, node: Node) -> dict[str, object]:
    usage = r.state.cache.usage(node.name)
    return {
        "name": node.name,
        "instance_id": node.instance_id,
        "image_id": node.image_id or None,
        "instance_type": node.instance_type,
        "capacity_type": node.capacity_type.value,
        "zone": node.zone,
        "pool": node.pool,
        "state": node.state.value,
        "pods": sorted(usage.pods),
        "node_pods": sorted(usage.node_pods),
        "taints": [str(t) for t in r.state.cluster_taints(node)],
        "cordoned": r.state.cordoned(node.name),
        "bound_pods": list(node.bound_pods),
        "requested": usage.requested.to_quantities(),
        "allocatable": node.allocatable.to_quantities(),
        "created_at": node.created_at,
        "ready_at": node.ready_at,
        "last_heartbeat": r.state.cache.heartbeats.get(node.name),
        "unneeded_since": r.state.unneeded_since.get(node.name),
        "terminating": r.state.marked.get(node.name, (None,))[0],
        "batch": r.colocation.document(node),
    }


def _pool(r: Reporting, pool: Pool) -> dict[str, object]:
    live = [n for n in r.state.nodes.values() if n.pool == pool.name and n.state in LIVE_STATES]
    wanted = sum(s.count for s in pool.standby)
    present = 0
    for entry in pool.standby:
        itype = entry.instance_type or r.state.config.nodes.default_instance_type
        capacity = CapacityType.SPOT if entry.spot else CapacityType.ON_DEMAND
        idle = [n for n in live if n.instance_type == itype and n.capacity_type is capacity and not r.state.node_has_pods(n.name)]
        present += min(entry.count, len(idle))
    nodes, cpu, memory = r.state.pool_usage(pool.name)
    return {
        "name": pool.name,
        "packing": pool.packing.value,
        "standby": {"wanted": wanted, "present": present},
        "limits": pool.limits.model_dump(mode="json"),
        "usage": {"nodes": nodes, "cpu": f"{cpu // 1000}", "memory": f"{memory // 2**30}Gi"},
        "backoff": None if (pause := r.state.backoff.get(pool.name)) is None else {"failures": pause.failures, "until": pause.until, "reason": pause.reason},
    }
