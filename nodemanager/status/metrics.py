"""Prometheus metrics, in a registry of their own (no process-wide globals).

Names (a stable contract, documented in the README):
    nodemanager_nodes{pool,state}                     gauge
    nodemanager_pending_pods                          gauge   pods waiting for a node
    nodemanager_unschedulable_pods                    gauge   pods no pool could ever hold
    nodemanager_boots_total{pool,instance_type,capacity_type}   counter
    nodemanager_boot_failures_total{reason}           counter
    nodemanager_terminations_total{reason}            counter
    nodemanager_decisions_total                       counter
    nodemanager_loop_duration_seconds{loop}           histogram
    nodemanager_cost_per_hour_dollars                 gauge   price of the live fleet
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.nodes = Gauge("nodemanager_nodes", "Node records by pool and state.", ["pool", "state"], registry=r)
        self.pending_pods = Gauge("nodemanager_pending_pods", "Pods waiting for a node.", registry=r)
        self.unschedulable_pods = Gauge("nodemanager_unschedulable_pods", "Pods that no pool could ever hold.", registry=r)
        self.boots = Counter("nodemanager_boots_total", "Instances launched.", ["pool", "instance_type", "capacity_type"], registry=r)
        self.boot_failures = Counter("nodemanager_boot_failures_total", "Boots that failed, by reason.", ["reason"], registry=r)
        self.terminations = Counter("nodemanager_terminations_total", "Nodes terminated, by reason.", ["reason"], registry=r)
        self.decisions = Counter("nodemanager_decisions_total", "Scaler computations.", registry=r)
        self.disruptions = Counter(
            "nodemanager_disruption_actions_total", "Nodes disrupted voluntarily, by reason and action.", ["reason", "action"], registry=r
        )
        self.interruptions = Counter("nodemanager_interruptions_total", "The cloud's warnings about our instances, by kind.", ["kind"], registry=r)
        self.disruption_candidates = Gauge("nodemanager_disruption_candidates", "Nodes consolidation may disrupt now.", registry=r)
        self.loop_duration = Histogram(
            "nodemanager_loop_duration_seconds", "Time one loop body took.", ["loop"], registry=r, buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10)
        )
        self.cost = Gauge("nodemanager_cost_per_hour_dollars", "Hourly price of the live fleet.", registry=r)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
