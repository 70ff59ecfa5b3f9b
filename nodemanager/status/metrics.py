"""Prometheus metrics, in a registry of their own (no process-wide globals).

Names (a stable contract, documented in docs/operations/status.md); base units throughout:
    nodemanager_nodes{pool,state}                     gauge
    nodemanager_pending_pods                          gauge   pods waiting for a node
    nodemanager_unschedulable_pods                    gauge   pods no pool could ever hold
    nodemanager_pod_scheduling_seconds                histogram  a pod's creation to its binding
    nodemanager_node_startup_seconds                  histogram  an instance's launch to its Ready node
    nodemanager_pool_nodes{pool}, _cpu_cores, _memory_bytes          gauges  what the pool holds
    nodemanager_pool_limit_nodes{pool}, _cpu_cores, _memory_bytes    gauges  its limits (absent: none)
    nodemanager_boots_total{pool,instance_type,capacity_type}   counter
    nodemanager_boot_failures_total{reason}           counter
    nodemanager_launch_fallbacks_total{pool}          counter nodes a fleet launched as another offering than planned
    nodemanager_boot_holds_total                      counter pods held after a boot of no use to them
    nodemanager_boot_brakes_total{pool}               counter times the boot brake paused a pool
    nodemanager_terminations_total{reason}            counter
    nodemanager_decisions_total                       counter
    nodemanager_loop_duration_seconds{loop}           histogram
    nodemanager_fleet_hourly_cost_dollars             gauge   price of the live fleet per hour
    nodemanager_fleet_hourly_bound_dollars            gauge   the LP bound's hourly rate for the pods running
    nodemanager_cloud_errors_total{operation,code}    counter failed cloud calls (each attempt)
    nodemanager_cloud_throttled_total{operation}      counter cloud answers "slow down"
    nodemanager_api_errors_total{method,code}         counter failed Kubernetes API requests
    nodemanager_leader                                gauge   1 while this replica acts
    nodemanager_disruption_held_nodes                 gauge   expired or drifted nodes not replaced yet
    nodemanager_consolidation_rejected_total{reason}  counter consolidations turned down: payback, balanced, cooldown
    nodemanager_capacity_reservation_instances{reservation,state}  gauge  a selected reservation's instances: total, available, used
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily

from nodemanager.tally import ErrorTally

# The `_created` series of every counter and histogram say when the process started, which
# `process_start_time_seconds` says once: they only doubled the series to store.
disable_created_metrics()

POD_WAIT_BUCKETS = (1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 1800, 3600)
STARTUP_BUCKETS = (10, 20, 30, 45, 60, 90, 120, 180, 240, 300, 600)


class Metrics:
    """The controller's metrics. ``scraped=False`` (the offline simulator, where no one could
    read them): every update is dropped and the registry stays empty; keeping them was over
    1% of a simulated day, a histogram observation for each of its 66,000 loop runs."""

    def __init__(self, scraped: bool = True) -> None:
        self.registry = CollectorRegistry()
        r = self.registry

        def made(kind: type, name: str, doc: str, labels: tuple[str, ...] = (), **options: Any) -> Any:
            return kind(name, doc, labels, registry=r, **options) if scraped else UNSCRAPED

        self.nodes = made(Gauge, "nodemanager_nodes", "Node records by pool and state.", ("pool", "state"))
        self.pending_pods = made(Gauge, "nodemanager_pending_pods", "Pods waiting for a node.")
        self.unschedulable_pods = made(Gauge, "nodemanager_unschedulable_pods", "Pods that no pool could ever hold.")
        self.boots = made(Counter, "nodemanager_boots_total", "Instances launched.", ("pool", "instance_type", "capacity_type"))
        self.boot_failures = made(Counter, "nodemanager_boot_failures_total", "Boots that failed, by reason.", ("reason",))
        reservation_doc = "A selected capacity reservation's instances: total, available, used (this controller's)."
        self.reservation_instances = made(Gauge, "nodemanager_capacity_reservation_instances", reservation_doc, ("reservation", "state"))
        self.launch_fallbacks = made(Counter, "nodemanager_launch_fallbacks_total", "Nodes a fleet launched as another offering than planned.", ("pool",))
        self.boot_holds = made(Counter, "nodemanager_boot_holds_total", "Pods held (no boot for them) after a node booted for them was of no use.")
        self.boot_brakes = made(Counter, "nodemanager_boot_brakes_total", "Times the boot brake paused a pool's boots.", ("pool",))
        self.terminations = made(Counter, "nodemanager_terminations_total", "Nodes terminated, by reason.", ("reason",))
        self.decisions = made(Counter, "nodemanager_decisions_total", "Scaler computations.")
        self.disruptions = made(Counter, "nodemanager_disruption_actions_total", "Nodes disrupted voluntarily, by reason and action.", ("reason", "action"))
        self.interruptions = made(Counter, "nodemanager_interruptions_total", "The cloud's warnings about our instances, by kind.", ("kind",))
        self.disruption_candidates = made(Gauge, "nodemanager_disruption_candidates", "Nodes consolidation may disrupt now.")
        self.disruption_held = made(Gauge, "nodemanager_disruption_held_nodes", "Expired or drifted nodes that a budget, a PDB or do-not-disrupt keeps.")
        self.consolidation_rejected = made(
            Counter, "nodemanager_consolidation_rejected_total", "Consolidations not worth their evictions, or of pods moved lately, by reason.", ("reason",)
        )
        self.loop_duration = made(
            Histogram, "nodemanager_loop_duration_seconds", "Time one loop body took.", ("loop",), buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10)
        )
        self.cost = made(Gauge, "nodemanager_fleet_hourly_cost_dollars", "Price of the live fleet for an hour.")
        self.bound = made(Gauge, "nodemanager_fleet_hourly_bound_dollars", "What no fleet could undercut for an hour of the pods running (the LP bound).")
        self.pod_scheduling = made(
            Histogram, "nodemanager_pod_scheduling_seconds", "From a pod's creation to its binding, as nodemanager saw it.", buckets=POD_WAIT_BUCKETS
        )
        self.node_startup = made(Histogram, "nodemanager_node_startup_seconds", "From an instance's launch to its Node being Ready.", buckets=STARTUP_BUCKETS)
        self.pool_nodes = made(Gauge, "nodemanager_pool_nodes", "Live nodes of the pool (as its limit counts them).", ("pool",))
        self.pool_cpu = made(Gauge, "nodemanager_pool_cpu_cores", "vCPU of the pool's live machines.", ("pool",))
        self.pool_memory = made(Gauge, "nodemanager_pool_memory_bytes", "Memory of the pool's live machines.", ("pool",))
        self.pool_limit_nodes = made(Gauge, "nodemanager_pool_limit_nodes", "The pool's limit on nodes.", ("pool",))
        self.pool_limit_cpu = made(Gauge, "nodemanager_pool_limit_cpu_cores", "The pool's limit on vCPU.", ("pool",))
        self.pool_limit_memory = made(Gauge, "nodemanager_pool_limit_memory_bytes", "The pool's limit on memory.", ("pool",))
        self.leader = made(Gauge, "nodemanager_leader", "1 while this replica acts (leads, or runs without leader election), else 0.")
        self.scraped = scraped

    def count_errors(self, tally: ErrorTally, kind: str) -> None:
        """Expose ``tally`` as ``nodemanager_<kind>_errors_total`` (and, for the cloud, its
        throttled answers), read at each scrape."""
        if self.scraped:
            self.registry.register(_TallyCollector(tally, kind))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _TallyCollector:
    def __init__(self, tally: ErrorTally, kind: str) -> None:
        self.tally = tally
        self.kind = kind

    def collect(self) -> list[CounterMetricFamily]:
        first = "operation" if self.kind == "cloud" else "method"
        what = "cloud calls (each attempt)" if self.kind == "cloud" else "Kubernetes API requests"
        errors = CounterMetricFamily(f"nodemanager_{self.kind}_errors", f"Failed {what}, by {first} and error code.", labels=[first, "code"])
        for (operation, code), n in sorted(self.tally.errors().items()):
            errors.add_metric([operation, code], n)
        if self.kind != "cloud":
            return [errors]
        throttled = CounterMetricFamily("nodemanager_cloud_throttled", "Cloud answers asking to slow down, by operation.", labels=["operation"])
        for operation, n in sorted(self.tally.throttled().items()):
            throttled.add_metric([operation], n)
        return [errors, throttled]

    def describe(self) -> list[CounterMetricFamily]:
        return []


class _Unscraped:
    """A metric no one reads: its labels are itself, its updates do nothing."""

    __slots__ = ()

    def labels(self, *_values: str) -> _Unscraped:
        return self

    def remove(self, *_values: str) -> None:
        pass

    def inc(self, amount: float = 1) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, value: float) -> None:
        pass

    def set_function(self, f: object) -> None:
        pass


UNSCRAPED = _Unscraped()
