"""Prometheus metrics, in a registry of their own (no process-wide globals).

Names (a stable contract, documented in docs/operations/status.md):
    nodemanager_nodes{pool,state}                     gauge
    nodemanager_pending_pods                          gauge   pods waiting for a node
    nodemanager_unschedulable_pods                    gauge   pods no pool could ever hold
    nodemanager_boots_total{pool,instance_type,capacity_type}   counter
    nodemanager_boot_failures_total{reason}           counter
    nodemanager_boot_holds_total                      counter pods held after a boot of no use to them
    nodemanager_boot_brakes_total{pool}               counter times the boot brake paused a pool
    nodemanager_terminations_total{reason}            counter
    nodemanager_decisions_total                       counter
    nodemanager_loop_duration_seconds{loop}           histogram
    nodemanager_cost_per_hour_dollars                 gauge   price of the live fleet
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


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
        self.boot_holds = made(Counter, "nodemanager_boot_holds_total", "Pods held (no boot for them) after a node booted for them was of no use.")
        self.boot_brakes = made(Counter, "nodemanager_boot_brakes_total", "Times the boot brake paused a pool's boots.", ("pool",))
        self.terminations = made(Counter, "nodemanager_terminations_total", "Nodes terminated, by reason.", ("reason",))
        self.decisions = made(Counter, "nodemanager_decisions_total", "Scaler computations.")
        self.disruptions = made(Counter, "nodemanager_disruption_actions_total", "Nodes disrupted voluntarily, by reason and action.", ("reason", "action"))
        self.interruptions = made(Counter, "nodemanager_interruptions_total", "The cloud's warnings about our instances, by kind.", ("kind",))
        self.disruption_candidates = made(Gauge, "nodemanager_disruption_candidates", "Nodes consolidation may disrupt now.")
        self.loop_duration = made(
            Histogram, "nodemanager_loop_duration_seconds", "Time one loop body took.", ("loop",), buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10)
        )
        self.cost = made(Gauge, "nodemanager_cost_per_hour_dollars", "Hourly price of the live fleet.")

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


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


UNSCRAPED = _Unscraped()
