"""``simulate``: play a workload against a provider.yaml in virtual time.

The same controller, scaler, simulated cloud and cluster as the service, driven by a
``VirtualClock`` that jumps from one due loop to the next, so a day plays in seconds.
The report (``--json``; its fields are a documented contract):

    ended        settled | until | stalled   why the run stopped
    pods         {total, bound, unschedulable, running, unfinished [{pod, reason}], pending_seconds {p50, p95, max},
                  evicted {count, pods, max_per_pod, work_redone_hours, pending_seconds {p50, p95, max}}}
    nodes        {booted, terminated, peak, by_instance_type}
    cost         {usd, lower_bound_usd, clairvoyant_usd, per_hour, by_pool, breakdown}   usd: each instance billed as EC2 bills it (from running,
                 a minute at least); breakdown: its parts, which add up to it (``cost_breakdown.py``)
    prices       {catalog, region, spot, spot_interruptions_per_hour}   where the prices come from, what spot is assumed to cost
    reservations [{id, instance_type, zone, type, count, selected, launched, instance_hours, usd, active_hours}]   (declared ones only)
    utilization  {cpu, memory}       requested / allocatable of Ready nodes, time-weighted
    decisions    {count, compute_ms {p50, p99, max}}
    unschedulable [{pod, reason}]
    disruption   {reason: {nodes, pods, savings_per_hour}}
    consolidation_rejected {payback, balanced, cooldown}   moves turned down, by reason
"""

from __future__ import annotations

import gc
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from cloud.base import InstanceState
from cloud.catalog import Catalog
from nodemanager.clock import VirtualClock
from nodemanager.cluster.arrivals import Arrival, Arrivals
from nodemanager.cluster.workload import ClusterObjects
from nodemanager.config.schema import ProviderConfig
from nodemanager.controller.executor import InlineExecutor
from nodemanager.controller.node_controller import NodeController
from nodemanager.controller.virtual import VirtualDriver
from nodemanager.cost_breakdown import Billed, Breakdown, OccupancyMeter, breakdown, round_down
from nodemanager.dra.context import DeviceContext
from nodemanager.model import STABLE_STATES, NodeState, Pod, PodKey
from nodemanager.model.journal import Mark, changed_since
from nodemanager.quiet_time import QuietTime
from nodemanager.reserved_capacity import ReservedCapacity, bound_pools
from nodemanager.scaler import Decision
from nodemanager.scaler.clairvoyant import ClairvoyantPacker, Run
from nodemanager.scaler.cost_bound import CostBound
from nodemanager.scaler.pools import pool_views
from nodemanager.status.metrics import Metrics
from nodemanager.timeline import Sample, Timeline
from nodemanager.wait_causes import WaitCauses
from nodemanager.wiring import simulated_cloud, simulated_cluster

# With no arrival to come and no bound pod with a duration still running, this long without
# a pod bound or finished means the pods still waiting wait for good (nodes may still be
# booting and failing, again and again): the run stops "stalled".
STALL_SECONDS = 3600.0


# After the workload settles, the fleet has this long to come to rest (every idle node
# stopped, no disruption under way); past it the run stops and the report says why not.
REST_LIMIT = 24 * 3600.0

GC_THRESHOLDS = (20_000, 20, 20)  # the cycle collector's, while a simulation runs (see ``Simulation.run``)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, math.ceil(q / 100 * len(ordered)) - 1)
    return ordered[rank]


@dataclass
class _Tracker:
    """Integrates what the report needs between two instants."""

    cpu_requested: float = 0.0  # milli-core-seconds of running pods' requests
    cpu_allocatable: float = 0.0
    memory_requested: float = 0.0  # byte-seconds
    memory_allocatable: float = 0.0
    peak: int = 0


class Simulation:
    def __init__(
        self,
        config: ProviderConfig,
        catalog: Catalog,
        workload: Sequence[Arrival],
        devices: DeviceContext | None = None,
        objects: ClusterObjects | None = None,
        *,
        timeline: bool = False,
        clairvoyant: bool = True,
        skip_quiet: bool = True,
    ) -> None:
        self.config = config
        self.catalog = catalog
        self.clock = VirtualClock(0.0)
        # Offline whatever provider.yaml says: the cloud and the cluster are always simulated.
        self.cloud = simulated_cloud(config, self.clock, objects.reservations if objects else ())
        self.reserved = ReservedCapacity(config, catalog, objects.reservations if objects else ())
        self._workload = Arrivals.of(workload)
        self.cluster = simulated_cluster(config, self.clock, self.cloud, self._workload, devices=devices, objects=objects)
        self.controller = NodeController(config, catalog, self.cloud, self.cluster, self.clock, executor=InlineExecutor(), metrics=Metrics(scraped=False))
        self.controller.provisioner.on_decision = self._on_decision
        self.total_pods = len(workload)
        # Each pod's arrival (when, for how long, its requests), built with the bound: copies
        # of one entry share their first pod's, so millions of pods hold a key each, not a pod.
        self._arrival_of: dict[PodKey, Arrival] = {}
        self.unschedulable: dict[PodKey, str] = {}
        self.tracker = _Tracker()
        self._load_as_of: tuple[int, int] | None = None  # (cluster version, records census) of _load
        self._load = (0, 0, 0, 0)
        # Each registered node's CPU and memory allocatable (from its record), their sums, and
        # where the records' and the registrations' journals stood when they were last summed.
        self._allocatable_of: dict[str, tuple[int, int]] = {}
        self._allocatable = (0, 0)
        self._allocatable_marks: tuple[Mark, ...] | None = None
        self._waiting_as_of: tuple[int, Decision | None, tuple[PodKey, ...]] | None = None
        views = pool_views(bound_pools(config.pools), catalog, config.nodes.volume_size, daemon_sets=objects.daemon_sets if objects else ())
        self.bound = CostBound(views, keyed=self._each_pod(self._workload))
        self._views = views
        self.clairvoyant = clairvoyant  # whether the report prices the clairvoyant fleet (a few seconds per 10,000 pods)
        self.ended = "until"  # why the last run stopped: settled, until, stalled or unsettled
        self.unsettled = ""  # why the fleet did not come to rest, when it did not
        # What --plot draws (``timeline``): sampled only when asked for, as the pods running
        # are a pass over every pod at each decision.
        self.timeline: Timeline | None = Timeline(config.loops.pool) if timeline else None
        self.waits = WaitCauses()
        self.occupancy = OccupancyMeter()  # each node's time empty or holding pods (the cost breakdown)
        # Quiet stretches skipped (the same report: see ``quiet_time``); not while a timeline is drawn.
        self.quiet = QuietTime(config, self.controller, self.cluster, self.cloud) if skip_quiet and not timeline and not self.cluster.usage_varies else None
        self._occupancy_marks: tuple[Mark, ...] | None = None

    def _each_pod(self, workload: Arrivals) -> Iterator[tuple[PodKey, Pod]]:
        """Each pod's key and the pod it is (a copy: its entry's first), noting its arrival."""
        for key, a in workload.keyed():
            self._arrival_of[key] = a
            yield key, a.pod

    def _on_decision(self, decision: Decision, now: float) -> None:
        self.unschedulable.update(decision.unschedulable)
        self.waits.decided(decision, now, self.controller.state.is_ready)

    def lower_bound_usd(self) -> float:
        """What no fleet could undercut for the pods that ran, for as long as each ran
        (``scaler/cost_bound.py``). A pod with a duration counts it once from its arrival,
        whenever and however often it ran, so a configuration that placed it later or moved
        it gets the same bound; only pods without one (or cut by --until) count the time
        they actually ran."""
        return self.bound.usd(self._counted(self.cluster.ran()), self.reserved.reserved(self.clock.now()))

    def _counted(self, ran: dict[PodKey, float]) -> dict[PodKey, float]:
        """The seconds the bound counts for each pod, from the seconds each was bound."""
        end, arrival_of = self.clock.now(), self._arrival_of  # a pod with a duration: its work once, however often it was evicted and ran again
        return {key: seconds if (a := arrival_of[key]).duration is None else min(a.duration, max(end - a.at, 0.0)) for key, seconds in ran.items()}

    def _integrate(self, dt: float) -> None:
        if dt <= 0:
            return
        t = self.tracker
        changed = (self.cluster.version, self.controller.state.nodes.census)
        if changed != self._load_as_of:  # pods and nodes as they are now (most steps change neither; a binding changes no allocatable)
            self._load_as_of, self._load = changed, self._load_now()
        cpu, memory, alloc_cpu, alloc_memory = self._load
        t.cpu_requested += cpu * dt
        t.memory_requested += memory * dt
        t.cpu_allocatable += alloc_cpu * dt
        t.memory_allocatable += alloc_memory * dt
        t.peak = max(t.peak, self.cloud.live_count())

    def _load_now(self) -> tuple[int, int, int, int]:
        """The running pods' CPU and memory requests and the registered nodes' allocatable."""
        return *self.cluster.bound_requests, *self._allocatable_now()

    def _allocatable_now(self) -> tuple[int, int]:
        """The registered nodes' CPU and memory allocatable, summed again only for the nodes
        that registered or left and the records set or removed since the last sum (a pass
        over every node whenever the census moved was a twentieth of a large simulation)."""
        changed, self._allocatable_marks = changed_since((self.controller.state.nodes.changes, self.cluster.registrations), self._allocatable_marks)
        held = self._allocatable_of
        if changed is None:
            changed = held.keys() | self.cluster.nodes.keys()
        cpu, memory = self._allocatable
        for name in changed:
            if (gone := held.pop(name, None)) is not None:
                cpu, memory = cpu - gone[0], memory - gone[1]
            node = self.controller.state.nodes.get(name) if name in self.cluster.nodes else None
            if node is not None:
                added = held[name] = node.allocatable.cpu_memory()
                cpu, memory = cpu + added[0], memory + added[1]
        self._allocatable = (cpu, memory)
        return self._allocatable

    def clairvoyant_usd(self) -> float:
        """What a fleet that knew every arrival and duration, booted at once and kept no idle
        node would have paid for the pods that ran (``scaler/clairvoyant.py``): each from its
        arrival for its duration (or until now); a pod without one for as long as it ran, as
        the bound counts it (run until now from its arrival, the pods of a large snapshot,
        placed over an hour, ran twice as long in it as in any fleet that placed them)."""
        end, bound = self.clock.now(), self.cluster.first_bound
        ran = self.cluster.ran()
        runs = [
            Run(a.pod, a.at, min(end, a.at + a.duration) if a.duration is not None else min(end, a.at + ran[key]), key)
            for key, a in self._workload.keyed()
            if key in bound
        ]
        return ClairvoyantPacker(self._views).plan(runs).usd()

    def _observe_occupancy(self, now: float) -> None:
        """The occupancy meter told of the nodes that registered, left, or whose workload
        pods changed in the last step (all of them, when the journals cannot say)."""
        changed, self._occupancy_marks = changed_since((self.cluster.registrations, self.cluster.occupancy), self._occupancy_marks)
        if changed is None:
            changed = self.occupancy.nodes() | self.cluster.nodes.keys()
        for name in changed:
            registered = name in self.cluster.nodes
            pods = self.cluster.workload_on(name) if registered else []
            holder = self.bound.holder_price(pods) if pods else None
            self.occupancy.set(name, now, registered, (math.inf if holder is None else holder) if pods else None)

    def breakdown(self, lower_bound: float) -> Breakdown:
        """Where the cost went (``cost_breakdown.py``), given ``lower_bound_usd()``."""
        now = self.clock.now()
        instances = []
        for span in self.cloud.spans():
            i = span.instance
            billed = Billed(i.node_name, self.reserved.hourly(i), span.running, span.until, span.seconds)
            instances.append((billed, self.occupancy.spans(i.node_name, now)))
        return breakdown(instances, lower_bound, self.bound.usd(self.cluster.ran(), self.reserved.reserved(now)))

    def _sample(self, now: float, timeline: Timeline) -> None:
        live = [n for n in self.controller.state.nodes.values() if n.state not in (NodeState.TERMINATING, NodeState.TERMINATED)]
        shape_of = self.bound.shape_of
        running = Counter(shape for key, s in self.cluster.pods.items() if s.pod.node_name and not s.pod.of_node and (shape := shape_of(key)) is not None)
        billed = math.fsum(self.reserved.hourly(i) for i in self.cloud.running())
        timeline.add(Sample(now, Counter(n.instance_type for n in live), Counter(n.pool for n in live), len(self._waiting()), billed, 0.0, running))

    def _waiting(self) -> tuple[PodKey, ...]:
        """Workload pods not bound and not reported unschedulable by the last decision (asked
        at every step once all have arrived: made again only when pods or the decision changed)."""
        last, kept = self.controller.state.last_decision, self._waiting_as_of
        if kept is None or kept[0] != self.cluster.version or kept[1] is not last:
            pods = self.cluster.pods.items()
            waiting = tuple(k for k, s in pods if not s.pod.of_node and not s.pod.node_name and (last is None or k not in last.unschedulable))
            kept = self._waiting_as_of = (self.cluster.version, last, waiting)
        return kept[2]

    def _in_flight(self) -> bool:
        """Something will happen without any new decision: a bound pod with a duration
        still runs, or a node is booting or being stopped."""
        nodes = self.controller.state.nodes.values()
        return self._pods_will_finish() or self.controller.disruption.busy or any(n.state not in STABLE_STATES for n in nodes)

    def restless(self) -> str:
        """Why the fleet may still change with no new arrival ("" when it will not, but for a
        consolidation a cooldown holds back: that may come hours later, and is not waited for)."""
        c = self.controller.state
        if not self._settled():  # (a replacement under way counts here: ``_in_flight``)
            return "pods are waiting or running, or nodes are booting or stopping"
        if c.unneeded_since:
            return f"{len(c.unneeded_since)} idle node(s) wait to be stopped (nodes.idleGrace, the Empty budgets)"
        if c.marked:  # (a drain a PodDisruptionBudget holds keeps its node's state)
            return "nodes are being drained"
        return ""  # (a consolidation consolidationCooldown holds back is not waited for)

    def _settled(self) -> bool:
        """Every pod has arrived, and each has finished, is bound for good (no duration) or
        can never run; and the fleet is stable (nothing booting or stopping)."""
        return not self.cluster.arrivals_left() and not self._waiting() and not self._in_flight()

    def work_done(self) -> tuple[int, int]:
        """How far the run is, in steps of the pods' lives (each arrives, is bound, then
        ends: finishes or is deleted, or is bound for good) out of three per pod. The cost of
        simulating follows the pods, not the clock: a trace of a few pods for months and
        thousands in its last weeks is nearly all still to do when the clock is at four
        fifths, and this says so. (A pod never bound for good counts its arrival alone.)"""
        cluster = self.cluster
        arrived = self.total_pods - cluster.arrivals_left()
        for_good = sum(1 for s in cluster.pods.values() if s.duration is None and s.bound_at is not None)
        ended = arrived - len(cluster.pods) + for_good
        return arrived + len(cluster.first_bound) + ended, 3 * self.total_pods

    def _progress_mark(self) -> tuple:
        """Changes whenever a pod arrives, is bound for the first time, is evicted (it waits
        anew: an interruption or a Capacity Block's end after an hour of calm is no stall) or
        finishes."""
        return (len(self.cluster.first_bound), self.cluster.arrivals_left(), len(self.cluster.pods), self.cluster.evictions.total())

    def _pods_will_finish(self) -> bool:
        return any(s.duration is not None and s.pod.node_name for s in self.cluster.pods.values())

    def _quiet(self) -> bool:
        """Nothing lives (no pod, no instance): the next thing that can happen is an arrival."""
        return not self.cluster.pods and not self.cloud.live_count() and not self.controller.state.nodes

    def run(self, until: float | None = None, progress: Callable[[float, float], None] | None = None) -> dict[str, object]:
        """Play the workload until it settles (then long enough for idle nodes to be
        stopped), until ``until`` if given, or until it stalls (see ``STALL_SECONDS``)."""
        gc.freeze()  # what exists now (the workload, the catalog) lives all run: full collections need not walk it
        # Collections less often: a step makes thousands of objects that live until its
        # decision ends, and at the default thresholds (700, 10, 10) the collector walked them
        # again and again to free nothing (a tenth of a busy run); cycles are still collected.
        thresholds = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLDS)
        try:
            return self._run(until, progress)
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()

    def _run(self, until: float | None, progress: Callable[[float, float], None] | None) -> dict[str, object]:
        self.controller.recover()
        driver = VirtualDriver(self.controller, self.clock, self.config.loops.intervals())
        loops = self.config.loops  # after settling: time for idle nodes to be stopped and reaped
        drain = self.config.nodes.idle_grace + 2 * max(loops.pool, loops.heartbeat, loops.reaper) + loops.pool
        settled_at: float | None = None
        resting_since: float | None = None  # at rest (see ``restless``) since, once settled
        horizon = until if until is not None else math.inf
        last = 0.0
        mark, changed_at = self._progress_mark(), 0.0
        self.ended = "until"
        while (now := driver.next_due()) <= horizon:
            upcoming = self.cluster.next_arrival()
            if upcoming is not None and upcoming > now and self._quiet():
                driver.jump_to(min(upcoming, horizon))  # an empty cluster until then: nothing to simulate
                now = driver.next_due()
                if now > horizon:
                    break
            self._integrate(now - last)
            last = driver.step()
            self._observe_occupancy(last)
            if self.timeline is not None and self.timeline.due(last):
                self._sample(last, self.timeline)
            if progress is not None:
                progress(now, horizon)
            if (current := self._progress_mark()) != mark:
                mark, changed_at = current, now
            if self.quiet is not None:
                self._skip_quiet(driver, last, horizon, settled_at is None)
            if until is None:
                if settled_at is None and self._settled():
                    settled_at = now
                if settled_at is not None:
                    why = self.restless()
                    resting_since = None if why else (resting_since if resting_since is not None else now)
                    if resting_since is not None and now >= max(resting_since, settled_at) + drain:
                        self.ended = "settled"
                        break
                    if now >= settled_at + REST_LIMIT:
                        self.ended, self.unsettled = "unsettled", why
                        break
                if settled_at is None and now - changed_at >= STALL_SECONDS and not self.cluster.arrivals_left() and not self._pods_will_finish():
                    # Nothing waits: only nodes never settle (say, standby that cannot boot).
                    self.ended = "stalled" if self._waiting() else "settled"
                    break
        if until is not None:
            self._integrate(horizon - last)
            self.clock.advance_to(horizon)
        return self.report()

    def _skip_quiet(self, driver: VirtualDriver, now: float, horizon: float, unsettled: bool) -> None:
        """Skip a quiet stretch from ``now`` if one starts here; never one in which a run
        with no ``until`` would end (settled, or stalled with nothing left to come)."""
        assert self.quiet is not None
        self.quiet.saw(now)
        if (target := self.quiet.until(now, horizon)) is None:  # (first: it is cheap while things change)
            return
        if math.isinf(horizon) and not (unsettled and (self.cluster.arrivals_left() or self._pods_will_finish())):
            return
        before = driver.next_due()
        self.quiet.skipped += driver.jump_to(target) - before

    def fleet(self) -> tuple[float, Counter[str], int, dict[str, float]]:
        """The fleet's cost so far (every instance's price × the seconds EC2 bills for it:
        from ``running`` until terminated, a minute at least; see ``SimulatedCloud.billed``),
        boots by instance type, how many have been terminated, and the cost by pool."""
        launched: Counter[str] = Counter()
        terminated = 0
        by_pool = dict.fromkeys((p.name for p in self.config.pools), 0.0)
        for instance, seconds in self.cloud.billed():
            by_pool[instance.pool] = by_pool.get(instance.pool, 0.0) + self.reserved.hourly(instance) * seconds / 3600.0
            launched[instance.instance_type] += 1
            terminated += instance.state is InstanceState.TERMINATED
        return sum(by_pool.values()), launched, terminated, by_pool

    def _evicted(self) -> dict[str, object]:
        """What disruption (consolidation, expiry, drift, interruption, a node lost) cost the
        pods: their evictions, the work the evicted pods had done and do again (with
        ``evictedPods: restart``), and how long they waited to be bound again."""
        evictions = self.cluster.evictions
        return {
            "count": sum(evictions.values()),
            "pods": len(evictions),
            "max_per_pod": max(evictions.values(), default=0),
            "work_redone_hours": round(self.cluster.work_redone / 3600, 3),
            "pending_seconds": _spread(self.cluster.waited_again),
        }

    def price_basis(self) -> dict[str, object]:
        """Where the costs come from, and what the simulation assumes about spot."""
        sim, prices = self.config.cloud.simulated, self.config.catalog
        fraction = f"{prices.spot_price_fraction:g} x on-demand"
        spot = (
            f"the latest price per type and zone in {prices.spot_price_history} (catalog.spotPriceHistory), {fraction} where it has none"
            if prices.spot_price_history
            else f"{fraction} in every zone (catalog.spotPriceFraction): no live spot prices offline"
        )
        return {
            "catalog": self.catalog.source,
            "region": self.catalog.region,
            "spot": spot,
            "spot_interruptions_per_hour": sim.spot_interruption_per_hour if sim else 0.0,
        }

    def report(self) -> dict[str, object]:
        end = self.clock.now()
        cost, launched, terminated, by_pool = self.fleet()
        lower_bound = self.lower_bound_usd()
        if self.timeline is not None:  # the plot's bound rate: the pods running at the prices of this bound
            self.timeline.priced(self.bound.prices(self._counted(self.cluster.ran())))
        hours = end / 3600 if end > 0 else 1.0
        waits = [bound - (a.at if (a := self._arrival_of.get(key)) is not None else 0.0) for key, bound in self.cluster.first_bound.items()]
        still_unschedulable = {k: r for k, r in self.unschedulable.items() if k not in self.cluster.first_bound}
        last = self.controller.state.last_decision
        waiting = last.waiting if last is not None else {}
        unfinished = {k: waiting.get(k) or "not placed yet" for k in self._waiting()}
        running = sum(1 for s in self.cluster.pods.values() if not s.pod.of_node and s.pod.node_name)
        t = self.tracker
        compute = self.controller.state.compute_ms
        return {
            "simulated_seconds": round(end, 3),
            "ended": self.ended,
            **({"unsettled": self.unsettled} if self.ended == "unsettled" else {}),
            "pods": {
                "total": self.total_pods,
                "bound": len(self.cluster.first_bound),
                "unschedulable": len(still_unschedulable),
                "running": running,  # bound and not finished at the end: pods without a duration run on
                "unfinished": [{"pod": k, "reason": r} for k, r in sorted(unfinished.items())],
                "pending_seconds": _spread(waits),
                "waits_by_cause": self.waits.report(),
                "evicted": self._evicted(),
            },
            "nodes": {
                "booted": sum(launched.values()),
                "terminated": terminated,
                "peak": t.peak,
                "by_instance_type": dict(sorted(launched.items())),
                "launch_failures": sum(n for (call, _), n in self.cloud.errors.errors().items() if call in ("RunInstances", "CreateFleet")),
                "launch_fallbacks": sum(1 for instance, _ in self.cloud.all_instances() if instance.refused),
            },
            "cost": {
                "usd": round(cost, 4),
                "lower_bound_usd": round_down(lower_bound),
                "clairvoyant_usd": round(self.clairvoyant_usd(), 4) if self.clairvoyant else None,
                "per_hour": round(cost / hours, 4),  # the run's mean rate
                "by_pool": {pool: {"usd": round(usd, 4), "per_hour": round(usd / hours, 4)} for pool, usd in sorted(by_pool.items())},
                "breakdown": self.breakdown(lower_bound).rounded(),
            },
            "utilization": {
                "cpu": round(t.cpu_requested / t.cpu_allocatable, 4) if t.cpu_allocatable else 0.0,
                "memory": round(t.memory_requested / t.memory_allocatable, 4) if t.memory_allocatable else 0.0,
            },
            "decisions": {
                "count": len(compute),
                "compute_ms": {"p50": round(percentile(compute, 50), 3), "p99": round(percentile(compute, 99), 3), "max": round(max(compute, default=0.0), 3)},
            },
            "unschedulable": [{"pod": k, "reason": r} for k, r in sorted(still_unschedulable.items())],
            "prices": self.price_basis(),
            **({"reservations": self.reserved.report(self.cloud.spans(), end)} if self.reserved.declared else {}),
            "disruption": self.controller.disruption.summary(),
            "consolidation_rejected": dict(self.controller.disruption.worth.summary()),
            "colocation": {
                "enabled": self.config.colocation_anywhere,
                "batch_pods": sum(1 for a in self._arrival_of.values() if a.pod.batch),
                "batch_bound": sum(1 for k, a in self._arrival_of.items() if a.pod.batch and k in self.cluster.first_bound),
            },
        }


def _spread(seconds: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(seconds, 50), 3), "p95": round(percentile(seconds, 95), 3), "max": round(max(seconds, default=0.0), 3)}
