"""The /status document: a read-only picture of the controller, cache and keeper."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodemanager import __version__
from nodemanager.config.schema import Pool
from nodemanager.model import LIVE_STATES, CapacityType, Node, Pod

if TYPE_CHECKING:
    from nodemanager.controller.node_controller import NodeController


def status_document(c: NodeController) -> dict[str, object]:
    """Call with the controller's lock held."""
    now = c.clock.now()
    return {
        **summary_document(c),
        "loops": {name: timer.as_dict() for name, timer in c.timers.items()},
        "nodes": [_node(c, n) for _, n in sorted(c.nodes.items())],
        "unavailable": c.keeper.dump(now),
        "boots": c.ledger.status(),
        "decisions": list(c.recent_decisions),
        "interruption": c.interruption.status(),
        "config": c.config.model_dump(mode="json", by_alias=True),
    }


def summary_document(c: NodeController) -> dict[str, object]:
    """The part of /status the cluster's status ConfigMap summarises (no node by node, no
    configuration): made every 30 s within a pool pass. Call with the lock held."""
    decision = c.last_decision
    waiting = []
    for pod in c.cache.waiting():
        reason = ""
        if decision is not None:
            reason = decision.unschedulable.get(pod.key) or decision.waiting.get(pod.key) or ""
            if not reason and pod.key in decision.bindings:
                reason = _planned_reason(c, pod, decision.bindings[pod.key])
        waiting.append({"pod": pod.key, "reason": reason or "not yet considered", "since": pod.created_at})
    counts = c.cache.counts()
    counts["unschedulable"] = len(decision.unschedulable) if decision else 0
    return {
        "controller": {"id": c.cloud.controller_id, "version": __version__, "started_at": c.started_at, "now": c.clock.now(), "leader": True, "ready": c.ready},
        "pods": {"counts": counts, "waiting": waiting},
        "pools": [_pool(c, p) for p in c.config.pools],
        "disruption": c.disruption.status(),
        "cost_per_hour": round(c.cost_per_hour(), 6),
        "bound_per_hour": None if c.bound_rate[1] is None else round(c.bound_rate[1], 6),  # the LP bound for the pods running (once a minute)
    }


def _planned_reason(c: NodeController, pod: Pod, name: str) -> str:
    """Why a pod planned onto a node is not running there yet, in the words that fit."""
    if not c.is_ready(name):
        return f"planned onto {name}, waiting for it to be Ready"
    if not c.cluster.schedules_pods:
        return f"room for it on {name}; waiting for the cluster's scheduler to bind it"
    blocker = c.bind_blocker(pod, name)
    return f"planned onto {name}; not bound yet: {blocker}" if blocker else f"planned onto {name}; binding"


def _node(c: NodeController, node: Node) -> dict[str, object]:
    usage = c.cache.usage(node.name)
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
        "taints": [str(t) for t in c.cluster_taints(node)],
        "cordoned": c.cordoned(node.name),
        "bound_pods": list(node.bound_pods),
        "requested": usage.requested.to_quantities(),
        "allocatable": node.allocatable.to_quantities(),
        "created_at": node.created_at,
        "ready_at": node.ready_at,
        "last_heartbeat": c.cache.heartbeats.get(node.name),
        "unneeded_since": c.unneeded_since.get(node.name),
        "terminating": c.marked.get(node.name, (None,))[0],
        "batch": c.colocation.document(node),
    }


def _pool(c: NodeController, pool: Pool) -> dict[str, object]:
    live = [n for n in c.nodes.values() if n.pool == pool.name and n.state in LIVE_STATES]
    wanted = sum(s.count for s in pool.standby)
    present = 0
    for entry in pool.standby:
        itype = entry.instance_type or c.config.nodes.default_instance_type
        capacity = CapacityType.SPOT if entry.spot else CapacityType.ON_DEMAND
        idle = [n for n in live if n.instance_type == itype and n.capacity_type is capacity and not c.node_has_pods(n.name)]
        present += min(entry.count, len(idle))
    nodes, cpu, memory = c.pool_usage(pool.name)
    return {
        "name": pool.name,
        "packing": pool.packing.value,
        "standby": {"wanted": wanted, "present": present},
        "limits": pool.limits.model_dump(mode="json"),
        "usage": {"nodes": nodes, "cpu": f"{cpu // 1000}", "memory": f"{memory // 2**30}Gi"},
        "backoff": None if (pause := c.backoff.get(pool.name)) is None else {"failures": pause.failures, "until": pause.until, "reason": pause.reason},
    }
