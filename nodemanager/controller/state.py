"""``ClusterState``: the picture every controller shares, and the operations on it they all
need. Each controller is given this state and the few collaborators it calls (the cloud,
the cluster, the metrics); none knows the operator that wires them (``node_controller``).

What it holds: the node records and their fleet tally, the cache of the cluster's objects,
the lock, the nodes marked for termination, draining or left to the cloud, the boots in
flight, what the boot ledger holds, the offerings marked unavailable, the last decision,
and the scaler (replaced when prices change). What one concern owns stays with it:
disruption's budgets and reserved nodes are asked of ``DisruptionView``.

The state is shared under one lock, never held across a call to the cloud or the cluster:
calls asked for under it are made once it is released (``controller/lock.py``).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from cloud.catalog import Catalog
from nodemanager.cache import CacheSnapshot, ClusterEventsHandler
from nodemanager.clock import Clock
from nodemanager.config.schema import Pool, ProviderConfig
from nodemanager.controller.boot_backoff import BootBackoff
from nodemanager.controller.boot_ledger import BootLedger, Brake
from nodemanager.controller.fleet_tally import FleetTally
from nodemanager.controller.lock import ControllerLock
from nodemanager.controller.records import NodeRecords
from nodemanager.dra.context import DeviceContext
from nodemanager.model import LIVE_STATES, Node, NodeName, NodeState, Pod, PodKey, Resources, Taint
from nodemanager.model.journal import Mark, changed_since
from nodemanager.model.labels import RESERVATION_ID
from nodemanager.model.reservation import Reservation
from nodemanager.model.resources import BATCH_RESOURCES
from nodemanager.model.selectors import HARD_EFFECTS, untolerated
from nodemanager.model.since import Since
from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, Decision, ScalerSettings, StopOrder, UnavailabilityKeeper
from nodemanager.scaler.pools import capacity_of
from nodemanager.scheduling.plugins.placement import UNSCHEDULABLE_TAINT

RECENT_DECISIONS = 20  # decisions that booted or stopped something, kept for /status
log = logging.getLogger("nodemanager.controller")

# Taints the cluster puts on a node while it starts (the node lifecycle controller, the
# cloud controller manager); a node nodemanager booted is planned onto as if they were gone
# (Karpenter's known ephemeral taints), and bound to once they are.
EPHEMERAL_TAINT_KEYS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/network-unavailable",
        "node.cloudprovider.kubernetes.io/uninitialized",
    }
)


class DisruptionView(Protocol):
    """What other controllers ask of disruption: the replacement nodes it keeps for the pods
    they are to take, and whether its budgets let idle nodes go now."""

    @property
    def reserved(self) -> frozenset[NodeName]: ...

    def within_budgets(self, stops: Sequence[StopOrder], now: float) -> tuple[list[StopOrder], list[StopOrder]]: ...


class ClusterState:
    def __init__(self, config: ProviderConfig, catalog: Catalog, clock: Clock, cache: ClusterEventsHandler, post_event: Callable[..., None]) -> None:
        self.config = config
        self.catalog = catalog
        self.clock = clock
        self.cache = cache
        self._post_event = post_event  # the cluster's record_event
        self.scaler = BindingNodeScaler(ScalerSettings.from_config(config), catalog)
        self.keeper = UnavailabilityKeeper(config.nodes.unavailable_offering_ttl)
        self.backoff = BootBackoff()  # pools whose boots keep failing for no offering's reason
        self.ledger = BootLedger(config.nodes.boot_brake.window, config.nodes.boot_brake.boots_per_pod)  # what each boot was for
        self.held: dict[PodKey, str] = {}  # pods no node is booted for now (the ledger's holds), and why
        self.on_the_way: dict[PodKey, str] = {}  # pods with a node booting for them: no second one
        self.braked: dict[str, Brake] = {}  # pools the boot brake pauses now
        self.pods_gone = 0  # pods that left a node: a change that may let a held pod go
        self.lock = ControllerLock()  # never held across a cloud or API call: calls wait for its release
        self._startup: dict[str, tuple[Taint, ...]] = {}  # pool -> its startup taints (the config is fixed)
        self.nodes = NodeRecords()
        self.fleet = FleetTally(self.nodes)
        self.marked: dict[str, tuple[str, str]] = {}  # node -> (reason, metric label)
        self.terminated_at: dict[str, float] = {}
        self.booting: set[str] = set()  # nodes whose boot call is in flight
        self.draining: dict[str, float] = {}  # node -> when its drain began
        self.left_to_cloud: dict[str, float] = {}  # warned spot node -> until when EC2 may reclaim it before the reaper terminates it
        self.drain_blocked: set[str] = set()  # voluntary drains waiting past drainTimeout on PodDisruptionBudgets
        self.unneeded_since: dict[NodeName, float] = {}
        self.devices: DeviceContext | None = None  # as last read, while pods with claims wait
        self.reservations: dict[str, Reservation] = {}  # the capacity reservations the pools select, as last read
        self.replacing: set[NodeName] = set()  # nodes booted for the pods of a node that goes once they are Ready (a Capacity Block's end)
        self.last_decision: Decision | None = None
        self.recent_decisions: deque[dict[str, object]] = deque(maxlen=RECENT_DECISIONS)  # what the last decisions booted or stopped (/status)
        self.compute_ms: list[float] = []  # every computation's duration (simulation reports)
        self.started_at = clock.now()
        self.ready = False
        # When the cache last caught up with the cluster: a heartbeat is missed only if the
        # cluster could have told us of it (a pass starved by a cloud outage reads none).
        self.synced_at = clock.now()
        self._planned: tuple[Node, ...] = ()  # the nodes as the scaler plans with them
        self.planned_since: Since[Node] | None = None  # what changed in them at their last change
        # Each record's planning view, and where the records' and the cluster's change journals
        # stood when they were made, with the nodes then marked (see _planning_nodes).
        self._planned_views: dict[str, Node] = {}
        self._operator_held: dict[str, str] = {}  # nodes an operator has (cordoned, tainted), and why: see operator_hold
        self._planned_as_of: tuple[tuple[Mark, ...] | None, frozenset[str]] = (None, frozenset())
        self._pools = {p.name: p for p in config.pools}

    # -- records --------------------------------------------------------------------------
    def pool_config(self, name: str) -> Pool | None:
        return self._pools.get(name)

    def set_state(self, name: str, state: NodeState) -> Node:
        node = self.nodes[name].moved_to(state)
        if state is NodeState.AVAILABLE and node.ready_at is None:
            node = node.with_changes(ready_at=self.clock.now())
        self.nodes[name] = node
        if state is NodeState.TERMINATED:
            self.terminated_at[name] = self.clock.now()
        return node

    def update_node(self, name: str, **changes: object) -> None:
        """Change fields of a node record other than its state."""
        self._update(name, **changes)

    def _update(self, name: str, **changes: object) -> None:
        self.nodes[name] = self.nodes[name].with_changes(**changes)

    def event(self, kind: str, key: str, reason: str, message: str, *, warning: bool = False) -> None:
        """Post a Kubernetes event once the lock is released (at once outside it)."""
        self.lock.after_release(self._post_event, kind, key, reason, message, warning=warning)

    def binding_of(self, pod: PodKey) -> str | None:
        """The node the scaler bound ``pod`` to (one at most)."""
        return self.nodes.binding_of(pod)

    def node_has_pods(self, name: str) -> bool:
        """Pods the node is for (DaemonSet and mirror pods do not keep a node)."""
        return bool(self.nodes[name].bound_pods) or bool(self.cache.usage(name).pods)

    def startup_taints(self, pool: str) -> tuple[Taint, ...]:
        found = self._startup.get(pool)
        if found is None:
            config = self.pool_config(pool)
            found = self._startup[pool] = tuple(Taint(t.key, t.effect, t.value) for t in config.startup_taints) if config else ()
        return found

    def cluster_taints(self, node: Node) -> tuple[Taint, ...]:
        """The node's taints: the cluster's (its spec is the truth) once registered, else
        what it will register with."""
        registered = self.cache.node(node.name)
        return registered.taints if registered is not None else node.taints

    def cordoned(self, name: str) -> bool:
        registered = self.cache.node(name)
        return registered is not None and registered.unschedulable

    def _planning_view(self, node: Node) -> Node:
        """The record as the scaler plans with it: the cluster's labels (those it launched
        with, and what an operator or an agent put on the Node since), allocatable (what the
        kubelet reports, once it has: the catalog's is an estimate) as kube-scheduler reads
        them, taints and cordon, less the startup and ephemeral taints that a node we booted
        sheds on its own."""
        registered = self.cache.node(node.name)
        if registered is None:
            return node
        labels = node.labels
        if any(labels.get(k) != v for k, v in registered.labels.items()):
            labels = {**labels, **registered.labels}
        allocatable = _reported_allocatable(node.allocatable, registered.allocatable)
        if not (registered.taints or node.taints or registered.unschedulable or node.unschedulable):
            if labels is node.labels and allocatable is node.allocatable:
                return node  # nothing to shed or to take: most nodes
            return replace(node, labels=labels, allocatable=allocatable)
        passing = self.startup_taints(node.pool)
        taints = tuple(t for t in registered.taints if t not in passing and t.key not in EPHEMERAL_TAINT_KEYS)
        if taints != node.taints or registered.unschedulable != node.unschedulable or labels is not node.labels or allocatable is not node.allocatable:
            return replace(node, labels=labels, allocatable=allocatable, taints=taints, unschedulable=registered.unschedulable)
        return node

    @staticmethod
    def operator_hold(record: Node, planned: Node) -> str:
        """Why an operator has the node ("" if no one has), from its record and its planning
        view (``_planning_view``: the Node's taints less those a starting node sheds): it is
        cordoned, or carries a taint nodemanager did not launch it with (an operator's, or any
        other ``node.kubernetes.io/`` one). Such a node is never disrupted voluntarily: no
        consolidation, drift, expiry or idle stop takes it."""
        if planned.unschedulable:
            return "cordoned: an operator has the node"
        foreign = next((t for t in planned.taints if t not in record.taints), None) if planned is not record else None
        return f"taint {foreign}, which nodemanager did not set: an operator has the node" if foreign else ""

    def bind_blocker(self, pod: Pod, name: str) -> str | None:
        """Why ``pod`` may not be bound to node ``name`` right now (None: it may): the node is
        cordoned or carries a taint the pod does not tolerate (startup taints still there)."""
        registered = self.cache.node(name)
        if registered is None:
            return "node has not registered"
        if registered.unschedulable and not any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return "node is cordoned"
        bad = untolerated(registered.taints, pod.tolerations, HARD_EFFECTS)
        return f"node has taint {bad[0]}" if bad else None

    def is_ready(self, name: str) -> bool:
        node = self.nodes.get(name)
        return node is not None and node.state in (NodeState.AVAILABLE, NodeState.CLAIMED)

    def booting_now(self, name: str) -> bool:
        node = self.nodes.get(name)
        return node is not None and node.state in (NodeState.CREATING, NodeState.CREATED) and name not in self.marked

    def world(self) -> tuple:
        """What a held pod waits to see change: the Ready nodes (less those of no use to the
        pods they were booted for) and how many pods left a node."""
        ready = frozenset(self.nodes.in_states(NodeState.AVAILABLE, NodeState.CLAIMED)) - self.ledger.futile_nodes
        return (ready, self.pods_gone)

    def mark_for_termination(self, name: str, reason: str, label: str) -> None:
        if name in self.nodes and name not in self.marked and self.nodes[name].state is not NodeState.TERMINATED:
            log.debug("node %s: marked for termination: %s", name, reason)
            self.marked[name] = (reason, label)

    def what_if(self, snapshot: ClusterSnapshot) -> Decision:
        """The scaler's decision on ``snapshot`` now (consolidation's and interruption's
        what-ifs: the same scaler that provisions)."""
        return self.scaler.compute(snapshot, self.clock.now())

    def price_of(self, node: Node) -> float:
        """What ``node`` costs an hour."""
        return self.catalog.hourly(node.instance_type, node.capacity_type, node.zone)

    def snapshot(self, now: float, reserved: frozenset[NodeName], cached: CacheSnapshot | None = None) -> ClusterSnapshot:
        """What the scaler decides from now: the cache's view (``cached``, if the caller has
        just taken it), the node records, and the nodes kept for pods that are still elsewhere
        (``reserved`` by disruption, and ``replacing``)."""
        cached = cached or self.cache.snapshot()
        pods = cached.pods
        devices = self.devices if cached.claims else None
        # A node marked for termination (perhaps draining) takes no more pods and counts
        # against no limit: the scaler sees it as already terminating.
        nodes = self._planning_nodes()
        return ClusterSnapshot(
            pods,
            nodes,
            self.keeper.active(now),
            dict(self.unneeded_since),
            devices,
            cached.daemon_sets,
            cached.volumes,
            cached.namespaces,
            cached.pod_selecting,
            {**{pool: brake.describe() for pool, brake in self.braked.items()}, **{pool: pause.describe() for pool, pause in self.backoff.active(now).items()}},
            reserved | frozenset(self.replacing) if self.replacing else reserved,
            cached.pdbs,
            held=self.held,
            on_the_way=self.on_the_way,
            operator_held=frozenset(self._operator_held),
            reservations_left=self.reservations_left(),
            grouped=cached.grouped,
            nodes_since=self.planned_since,
        )

    def reservations_left(self) -> dict[str, int]:
        """Per reservation, the instances new nodes may still take: what the cloud said was
        available, less the nodes launched into it since (a launch it has not counted yet)."""
        if not self.reservations:
            return {}
        left = {r.id: r.available for r in self.reservations.values()}
        for node in self.nodes.values():
            r = self.reservations.get(node.labels.get(RESERVATION_ID, ""))
            if r is not None and node.created_at > r.seen_at and node.state is not NodeState.TERMINATED:
                left[r.id] -= 1
        return left

    def _planning_nodes(self) -> tuple[Node, ...]:
        """Every record as the scaler plans with it, made again only when the records, the
        nodes marked for termination or the cluster's Nodes (but for heartbeats) changed,
        and then only for the nodes whose record, Node or mark changed (a view of every
        record at every decision was a thirtieth of a busy simulation)."""
        views, marked, (marks, was_marked) = self._planned_views, frozenset(self.marked), self._planned_as_of
        changed, marks = changed_since((self.nodes.changes, self.cache.node_changes), marks)
        everything = changed is None
        if changed is None:
            views.clear()
            self._operator_held.clear()
            changed = set(self.nodes)
        else:
            changed |= marked ^ was_marked
        self._planned_as_of = (marks, marked)
        if everything or changed:  # (nothing changed: the same tuple, which the scaler tells by identity)
            held = self._operator_held
            for name in changed:
                node = self.nodes.get(name)
                if node is None:
                    views.pop(name, None)
                    held.pop(name, None)
                    continue
                planned = self._planning_view(node)
                if why := self.operator_hold(node, planned):
                    held[name] = why
                else:
                    held.pop(name, None)
                views[name] = replace(node, state=NodeState.TERMINATING) if name in marked else planned
            before, self._planned = self._planned, tuple(map(views.__getitem__, self.nodes))
            self.planned_since = None if everything else Since(before, self._planned, {name: views.get(name) for name in changed})
        return self._planned

    @property
    def operator_held(self) -> Mapping[str, str]:
        """The nodes an operator has (``operator_hold``), and why, as of the last planning view."""
        self._planning_nodes()
        return self._operator_held

    # -- reading ---
    def cost_per_hour(self) -> float:
        """The live fleet's hourly price."""
        self.fleet.update(self.catalog)
        return self.fleet.cost_per_hour()

    def pool_usage(self, pool: str) -> tuple[int, int, int]:
        """What a pool's live nodes hold, as its limits count it: nodes, milli-vCPU and
        bytes of the machines (not their allocatable)."""
        nodes = cpu = memory = 0
        for node in self.nodes.values():
            if node.pool == pool and node.state in LIVE_STATES:
                nodes += 1
                if (itype := self.catalog.get(node.instance_type)) is not None:
                    machine = capacity_of(itype)
                    cpu, memory = cpu + machine[0], memory + machine[1]
        return nodes, cpu, memory


def _reported_allocatable(record: Resources, reported: Resources) -> Resources:
    """The allocatable to plan a node with: what its kubelet reports, where it has, but the
    batch resources, which colocation keeps in the record; ``record`` itself if that is
    the same (or nothing is reported yet)."""
    if not reported:
        return record
    batch = {k: v for k, v in record.items() if k in BATCH_RESOURCES}
    merged = Resources({**{k: v for k, v in reported.items() if k not in BATCH_RESOURCES}, **batch})
    return record if merged == record else merged
