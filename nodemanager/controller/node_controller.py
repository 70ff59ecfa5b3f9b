"""``NodeController``: the imperative shell around the scaler, and the state every loop
shares (the node records, the cache, the lock, the clock, the cloud and the cluster).

Every loop gathers, decides, then acts, and reads time only from the injected clock. The
state is shared under one lock, never held across a call to the cloud or the cluster: calls
asked for under it are made once it is released (``controller/lock.py``). Each concern is
a controller of its own over this state, none importing another (Karpenter's shape); the
state keeps what several share: the records, the sync with the cluster, the boots (of
provisioning's nodes and of disruption's and interruption's replacements):

* pool (7 s, ``provisioning.py``): sync the cache from cluster events, compute a Decision
  from one snapshot, apply it (records for new nodes and their boots, stops, bindings),
  then dispatch pods whose nodes are ready;
* heartbeat (10 s, ``lifecycle.py``): unhealthy and never-Ready nodes marked for termination;
* reaper (10 s, ``reaper.py``): marked nodes drained, terminated and their pods placed again;
* orphan GC (60 s, ``garbage_collection.py``): instances with our tag that no record knows;
* prices (12 h, ``prices.py``), colocation (``colocation.py``), disruption
  (``disruption.py``), interruption (``interruption.py``).

The truth lives outside: ``recover()`` rebuilds the records from the cloud's tags and the
cluster, and a boot's idempotency token derives from its node's name, so a retried boot
never launches a second instance.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import replace
from datetime import UTC, datetime

from cloud.base import BootRequest, CloudClient, Instance
from cloud.catalog import Catalog
from cloud.errors import InsufficientCapacity, OfferingError, QuotaExceeded, Throttled, ZoneUnavailable
from nodemanager.cache import CacheSnapshot, ClusterEventsHandler
from nodemanager.clock import Clock
from nodemanager.cluster.base import ClusterEvent, ClusterSource
from nodemanager.config.schema import Pool, ProviderConfig
from nodemanager.controller.boot_backoff import BootBackoff
from nodemanager.controller.boot_ledger import BootLedger, Brake
from nodemanager.controller.colocation import ColocationReconciler
from nodemanager.controller.dispenser import NodeDispenser
from nodemanager.controller.disruption import DisruptionController
from nodemanager.controller.executor import InlineExecutor
from nodemanager.controller.fleet_tally import FleetTally
from nodemanager.controller.garbage_collection import OrphanCollector
from nodemanager.controller.interruption import InterruptionController
from nodemanager.controller.lifecycle import NodeLifecycle
from nodemanager.controller.lock import ControllerLock
from nodemanager.controller.prices import PriceRefresher
from nodemanager.controller.provisioning import Provisioner
from nodemanager.controller.reaper import Reaper
from nodemanager.controller.records import NodeRecords
from nodemanager.controller.status_doc import status_document, summary_document
from nodemanager.controller.timers import LoopTimer
from nodemanager.dra.context import DeviceContext
from nodemanager.errors import NodeManagerError
from nodemanager.model import LIVE_STATES, ZERO, CapacityType, InstanceId, Node, NodeName, NodeState, Pod, PodKey, Taint
from nodemanager.model.journal import Mark, changed_since
from nodemanager.model.selectors import HARD_EFFECTS, untolerated
from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, Decision, NodeSpec, ScalerSettings, UnavailabilityKeeper
from nodemanager.scaler.cost_bound import CostBound
from nodemanager.scaler.pools import capacity_of
from nodemanager.scaler.unavailability import ANY_TYPE
from nodemanager.scheduling.plugins.placement import UNSCHEDULABLE_TAINT
from nodemanager.status.metrics import Metrics
from nodemanager.status.summary import status_text

RECENT_DECISIONS = 20  # decisions that booted or stopped something, kept for /status
BOUND_EVERY = 60.0  # seconds between two makings of the bound's rate for the pods running
STATUS_EVERY = 30.0  # seconds: the cluster's status ConfigMap is written at most this often
STATUS_AT_LEAST = 300.0  # ... and at least this often, changed or not
log = logging.getLogger("nodemanager.controller")

LOOPS = ("pool", "heartbeat", "reaper", "orphan_gc", "prices", "colocation", "disruption", "interruption")
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
TERMINATED_KEPT_FOR = 60.0  # seconds a Terminated record stays visible in /status
TERMINATED_KEPT_MAX = 100  # ... and at most this many of them (the newest)
STATUS_WAIT = 0.05  # seconds /status waits for the controller before answering with its last document


def boot_token(controller_id: str, node_name: str) -> str:
    """The idempotency token of a node's boot: stable across retries and restarts."""
    return hashlib.sha256(f"{controller_id}/{node_name}".encode()).hexdigest()[:32]


class NodeController:
    def __init__(
        self,
        config: ProviderConfig,
        catalog: Catalog,
        cloud: CloudClient,
        cluster: ClusterSource,
        clock: Clock,
        *,
        executor: Executor | None = None,
        metrics: Metrics | None = None,
        cache: ClusterEventsHandler | None = None,
    ) -> None:
        self.config = config
        self.catalog = catalog
        self.cloud = cloud
        self.cluster = cluster
        self.clock = clock
        self.executor = executor or InlineExecutor()
        self.metrics = metrics or Metrics()
        self.cache = cache or ClusterEventsHandler()
        self.scaler = BindingNodeScaler(ScalerSettings.from_config(config), catalog)
        self.keeper = UnavailabilityKeeper(config.nodes.unavailable_offering_ttl)
        self.backoff = BootBackoff()  # pools whose boots keep failing for no offering's reason
        self.ledger = BootLedger(config.nodes.boot_brake.window, config.nodes.boot_brake.boots_per_pod)  # what each boot was for
        self.held: dict[PodKey, str] = {}  # pods no node is booted for now (the ledger's holds), and why
        self.on_the_way: dict[PodKey, str] = {}  # pods with a node booting for them: no second one
        self.braked: dict[str, Brake] = {}  # pools the boot brake pauses now
        self.pods_gone = 0  # pods that left a node: a change that may let a held pod go
        self.dispenser = NodeDispenser(self)
        self.lock = ControllerLock()  # never held across a cloud or API call: calls wait for its release
        self._gauges_shown: dict[tuple[str, NodeState], int] = {}  # the node counts the gauges show
        self._gauges_version = -1  # the fleet tally's version they show
        self._startup: dict[str, tuple[Taint, ...]] = {}  # pool -> its startup taints (the config is fixed)
        self._last_status: tuple[float, dict[str, object]] | None = None  # (when, document): answered while the lock is held too long
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
        self.timers = {name: LoopTimer(observe=self.metrics.loop_duration.labels(name).observe) for name in LOOPS}
        for pool in config.pools:  # (the limits are fixed: set once)
            lim, m = pool.limits, self.metrics
            for gauge, limit in ((m.pool_limit_nodes, lim.nodes), (m.pool_limit_cpu, lim.cpu and lim.cpu / 1000), (m.pool_limit_memory, lim.memory)):
                if limit is not None:
                    gauge.labels(pool.name).set(limit)
        self.last_decision: Decision | None = None
        self.recent_decisions: deque[dict[str, object]] = deque(maxlen=RECENT_DECISIONS)  # what the last decisions booted or stopped (/status)
        self.bound_rate: tuple[float, float | None] = (-math.inf, None)  # when the bound's rate was made, and it ($/h)
        self._status_published: tuple[float, str] = (-math.inf, "")  # when the cluster's status ConfigMap was written, and what it said
        self.compute_ms: list[float] = []  # every computation's duration (simulation reports)
        self.started_at = clock.now()
        self.ready = False
        # When the cache last caught up with the cluster: a heartbeat is missed only if the
        # cluster could have told us of it (a pass starved by a cloud outage reads none).
        self.synced_at = clock.now()
        self._planned: tuple[Node, ...] = ()  # the nodes as the scaler plans with them
        # Each record's planning view, and where the records' and the cluster's change journals
        # stood when they were made, with the nodes then marked (see _planning_nodes).
        self._planned_views: dict[str, Node] = {}
        self._operator_held: dict[str, str] = {}  # nodes an operator has (cordoned, tainted), and why: see operator_hold
        self._planned_as_of: tuple[tuple[Mark, ...] | None, frozenset[str]] = (None, frozenset())
        self._pools = {p.name: p for p in config.pools}
        self.on_decision: Callable[[Decision, float], None] | None = None
        self.colocation = ColocationReconciler(self)
        self.provisioner = Provisioner(self)
        self.lifecycle = NodeLifecycle(self)
        self.gc = OrphanCollector(self)
        self.prices = PriceRefresher(self)
        self.reaper = Reaper(self)
        self.disruption = DisruptionController(self)
        self.interruption = InterruptionController(self, getattr(cloud, "interruptions", None))  # the cloud's queue, if it has one

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
        self.lock.after_release(self.cluster.record_event, kind, key, reason, message, warning=warning)

    def binding_of(self, pod: PodKey) -> str | None:
        """The node the scaler bound ``pod`` to (one at most), among the few that hold bindings."""
        for name in self.nodes.with_bindings():
            if pod in self.nodes[name].bound_pods:
                return name
        return None

    def node_has_pods(self, name: str) -> bool:
        """Pods the node is for (DaemonSet and mirror pods do not keep a node)."""
        return bool(self.nodes[name].bound_pods) or bool(self.cache.usage(name).pods)

    def _startup_taints(self, pool: str) -> tuple[Taint, ...]:
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
        """The record as the scaler plans with it: the cluster's taints and cordon, less the
        startup and ephemeral taints that a node we booted sheds on its own."""
        registered = self.cache.node(node.name)
        if registered is None or not (registered.taints or node.taints or registered.unschedulable or node.unschedulable):
            return node  # nothing to shed or to take: most nodes
        passing = self._startup_taints(node.pool)
        taints = tuple(t for t in registered.taints if t not in passing and t.key not in EPHEMERAL_TAINT_KEYS)
        if taints != node.taints or registered.unschedulable != node.unschedulable:
            return replace(node, taints=taints, unschedulable=registered.unschedulable)
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

    def _booting(self, name: str) -> bool:
        node = self.nodes.get(name)
        return node is not None and node.state in (NodeState.CREATING, NodeState.CREATED) and name not in self.marked

    def world(self) -> tuple:
        """What a held pod waits to see change: the Ready nodes (less those of no use to the
        pods they were booted for) and how many pods left a node."""
        ready = frozenset(self.nodes.in_states(NodeState.AVAILABLE, NodeState.CLAIMED)) - self.ledger.futile_nodes
        return (ready, self.pods_gone)

    def refresh_holds(self, now: float) -> None:
        """The ledger's holds and brakes as the next decision sees them."""
        self.held = self.ledger.held(now, self.world, self.cache.is_waiting)
        self.on_the_way = self.ledger.on_the_way(self._booting)
        self.braked, begun = self.ledger.braked(now)
        for brake in begun:
            log.warning("pool %s: %s (until %.0f)", brake.pool, brake.describe(), brake.until)
            self.metrics.boot_brakes.labels(brake.pool).inc()

    def mark_for_termination(self, name: str, reason: str, label: str) -> None:
        if name in self.nodes and name not in self.marked and self.nodes[name].state is not NodeState.TERMINATED:
            log.debug("node %s: marked for termination: %s", name, reason)
            self.marked[name] = (reason, label)

    # -- start-up -------------------------------------------------------------------------
    def recover(self) -> None:
        """Rebuild node records from the cloud (tags) and the cluster after a (re)start."""
        listed, instances = self.cluster.list(), self.cloud.list_instances()
        with self.lock:
            self.cache.apply(listed)
            now = self.synced_at = self.clock.now()
            for instance in instances:
                if instance.node_name in self.nodes or not instance.alive:
                    continue
                self.nodes[instance.node_name] = self._adopt(instance)
                log.info("adopted instance %s as node %s (%s)", instance.instance_id, instance.node_name, self.nodes[instance.node_name].state)
            self._sync_registrations(now, announce=False)  # adopted nodes registered long ago
            self.ready = True

    def _adopt(self, instance: Instance) -> Node:
        itype = self.catalog.get(instance.instance_type)
        node = Node(
            NodeName(instance.node_name),
            instance.pool,
            instance.instance_type,
            instance.capacity_type,
            instance.zone,
            allocatable=itype.allocatable_for(self.config.nodes.volume_size) if itype else ZERO,
            instance_id=InstanceId(instance.instance_id),
            created_at=instance.launched_at,
            image_id=instance.image_id,
            labels=dict(self.pool_config(instance.pool).labels) if self.pool_config(instance.pool) else {},
            taints=tuple(Taint(t.key, t.effect, t.value) for t in pool.taints) if (pool := self.pool_config(instance.pool)) else (),
        )
        return node.moved_to(NodeState.CREATED)

    # -- what the scaler plans from ------------------------------------------------------------
    def what_if(self, snapshot: ClusterSnapshot) -> Decision:
        """The scaler's decision on ``snapshot`` now (consolidation's and interruption's
        what-ifs: the same scaler that provisions)."""
        return self.scaler.compute(snapshot, self.clock.now())

    def price_of(self, node: Node) -> float:
        """What ``node`` costs an hour."""
        return self.catalog.hourly(node.instance_type, node.capacity_type, node.zone)

    def snapshot(self, now: float, cached: CacheSnapshot | None = None) -> ClusterSnapshot:
        """What the scaler decides from now: the cache's view (``cached``, if the caller has
        just taken it) and the node records."""
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
            self.disruption.reserved,
            cached.pdbs,
            held=self.held,
            on_the_way=self.on_the_way,
            operator_held=frozenset(self._operator_held),
            grouped=cached.grouped,
        )

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
            self._planned = tuple(map(views.__getitem__, self.nodes))
        return self._planned

    @property
    def operator_held(self) -> Mapping[str, str]:
        """The nodes an operator has (``operator_hold``), and why, as of the last planning view."""
        self._planning_nodes()
        return self._operator_held

    # -- booting ------------------------------------------------------------------------------
    def boot(self, spec: NodeSpec, now: float) -> None:
        """Boot one node outside a decision (a consolidation's replacement)."""
        self.create(spec, now)
        self.submit_boot(spec.name)

    def create(self, spec: NodeSpec, now: float) -> None:
        """The record of a node to boot (``submit_boot`` boots it)."""
        log.info(
            "booting %s: %s %s in %s for pool %s (%s)%s",
            spec.name,
            spec.instance_type,
            spec.capacity_type,
            spec.zone,
            spec.pool,
            f"{len(spec.pods)} pod(s): {', '.join(spec.pods[:5])}{'...' if len(spec.pods) > 5 else ''}" if spec.pods else "standby",
            f"; the pool's size floor is {spec.size_floor} (pools[].nodeSizeFloor)" if spec.size_floor else "",
        )
        what = f"{spec.instance_type} {spec.capacity_type} in {spec.zone}"
        self.event("Node", spec.name, "Booting", f"{what} for pool {spec.pool}" + (" (standby)" if spec.standby else ""))
        for pod in spec.pods:
            self.event("Pod", pod, "TriggeredScaleUp", f"booting node {spec.name} ({what}) for this pod")
        self.ledger.booted(spec.name, spec.pods)
        self.nodes[spec.name] = Node(
            spec.name,
            spec.pool,
            spec.instance_type,
            spec.capacity_type,
            spec.zone,
            allocatable=spec.allocatable,
            labels=dict(spec.labels),
            taints=spec.taints,
            bound_pods=spec.pods,
            created_at=now,
        )

    def resume_boots(self) -> None:
        """Nodes still Creating with no instance and no call in flight get their boot again
        (same name, same token): after a throttled call, for instance."""
        for name in self.nodes.in_states(NodeState.CREATING):
            if self.nodes[name].instance_id is None and name not in self.booting and name not in self.marked:
                self.submit_boot(name)

    def submit_boot(self, name: str) -> None:
        node = self.nodes[name]
        request = BootRequest(
            node_name=name,
            pool=node.pool,
            instance_type=node.instance_type,
            capacity_type=node.capacity_type,
            zone=node.zone,
            token=boot_token(self.cloud.controller_id, name),
            volume_bytes=self.config.nodes.volume_size,
            labels=dict(node.labels),
            taints=node.taints,
            startup_taints=self._startup_taints(node.pool),
        )
        self.booting.add(name)
        self.lock.after_release(self._start_boot, name, request)

    def _start_boot(self, name: str, request: BootRequest) -> None:
        """Outside the lock (an inline executor boots in the caller's thread)."""
        future = self.executor.submit(self.cloud.boot, request)
        future.add_done_callback(lambda f: self._boot_done(name, f))

    def _boot_done(self, name: str, future) -> None:  # type: ignore[no-untyped-def]
        with self.lock:
            self.booting.discard(name)
            node = self.nodes.get(name)
            if node is None:
                return
            now = self.clock.now()
            try:
                instance: Instance = future.result()
            except Throttled as exc:
                log.warning("boot of %s throttled, retrying next loop: %s", name, exc)
                self.metrics.boot_failures.labels("throttled").inc()
                return
            except OfferingError as exc:
                key = (exc.instance_type, exc.capacity_type, exc.zone)
                if self.keeper.mark(key, now, str(exc)):
                    log.warning("offering %s/%s/%s marked unavailable for %ss: %s", *key, self.keeper.ttl, exc)
                self._boot_failed(name, "insufficient_capacity" if isinstance(exc, InsufficientCapacity) else "unsupported", str(exc))
                return
            except ZoneUnavailable as exc:
                for capacity in CapacityType:
                    self.keeper.mark((ANY_TYPE, capacity, exc.zone), now, str(exc))
                self._boot_failed(name, "zone_unavailable", str(exc))
                return
            except QuotaExceeded as exc:
                self.keeper.mark((node.instance_type, node.capacity_type, node.zone), now, str(exc))
                self._boot_failed(name, "quota", str(exc))
                return
            except NodeManagerError as exc:  # any other refusal: the node is gone, its pods move on
                pause = self.backoff.failed(node.pool, now, str(exc))
                log.warning("pool %s: %s", node.pool, pause.describe())
                self._boot_failed(name, "cloud_error", str(exc))
                return
            self.backoff.succeeded(node.pool)
            if node.state is not NodeState.CREATING:
                return
            self._update(name, instance_id=InstanceId(instance.instance_id), image_id=instance.image_id)
            self.set_state(name, NodeState.CREATED)
            self.metrics.boots.labels(node.pool, node.instance_type, node.capacity_type.value).inc()
            self.ledger.launched(node.pool, name, now)
            log.info("node %s: instance %s launched", name, instance.instance_id)
            if name in self.marked:  # stopped while its boot was in flight
                self.reaper.run(now)

    def _boot_failed(self, name: str, label: str, reason: str) -> None:
        log.warning("node %s: boot failed (%s); its pods will be placed again", name, reason)
        self.metrics.boot_failures.labels(label).inc()
        self.set_state(name, NodeState.TERMINATED)
        self.marked.pop(name, None)
        self.ledger.failed(name)

    # -- sync ----------------------------------------------------------------------------------
    def poll(self) -> list[ClusterEvent] | None:
        """The cluster's changes since the last poll (None: it failed); outside the lock, as
        the first poll lists and a source without watch threads watches."""
        try:
            return self.cluster.poll()
        except Exception:
            log.exception("cluster poll failed; using the last known state")
            return None

    def sync(self, now: float, events: list[ClusterEvent] | None) -> None:
        """The cache caught up with the cluster's events, registrations recorded, finished
        pods' nodes given back, old records purged."""
        if events is not None:
            self.synced_at = now
        self.cache.apply(events or [])
        self.cache.expire(now)
        self._sync_registrations(now)
        for pod in self.cache.take_finished():
            self.pods_gone += 1
            if pod.node_name in self.nodes and not pod.of_node:
                self.dispenser.return_node(pod.node_name, unused=False)
        self._purge(now)

    def _sync_registrations(self, now: float, announce: bool = True) -> None:
        for name in self.nodes.in_states(NodeState.CREATED):
            node, registered = self.nodes[name], self.cache.node(name)
            if registered is not None and registered.ready:
                log.info("node %s: registered and Ready after %.0fs", name, now - node.created_at)
                self.lock.after_release(self.cluster.label_node, name, node.labels)
                if announce:
                    self.event("Node", name, "Registered", f"Ready {now - node.created_at:.0f}s after boot")
                    self.metrics.node_startup.observe(max(0.0, now - node.created_at))
                self.set_state(name, NodeState.AVAILABLE)
                if self.cache.usage(name).pods:
                    self.set_state(name, NodeState.CLAIMED)

    # -- the loops: each concern's controller, over this state, under its lock ------------------
    def pool_loop(self) -> None:
        with self.timers["pool"].timing(self.clock):
            self.provisioner.run()

    def heartbeat_loop(self) -> None:
        with self.timers["heartbeat"].timing(self.clock), self.lock:
            self.lifecycle.run(self.clock.now())

    def reaper_loop(self) -> None:
        with self.timers["reaper"].timing(self.clock):
            self.reaper.run(self.clock.now())

    def _purge(self, now: float) -> None:
        terminated = self.nodes.in_states(NodeState.TERMINATED)
        ended = sorted((self.terminated_at.get(n, now), n) for n in terminated)
        crowded = {name for _, name in ended[: max(0, len(ended) - TERMINATED_KEPT_MAX)]}
        for name in terminated:
            if name in crowded or now - self.terminated_at.get(name, now) >= TERMINATED_KEPT_FOR:
                self.lock.after_release(self.cluster.remove_node, name)  # once more: a dying kubelet may have registered it again
                del self.nodes[name]
                self.ledger.forget_node(name)
                self.terminated_at.pop(name, None)
                self.drain_blocked.discard(name)
        for name in self.nodes.in_states(NodeState.TERMINATING):
            if name not in self.marked:
                self.marked[name] = ("terminating", "terminating")  # confirm on the next reap

    def orphan_gc_loop(self) -> None:
        with self.timers["orphan_gc"].timing(self.clock):
            self.gc.run()

    def prices_loop(self) -> None:
        with self.timers["prices"].timing(self.clock):
            self.prices.run()

    def reprice(self, catalog: Catalog) -> None:
        """Plan with ``catalog`` from now on (fresher prices), deciding again at once."""
        self.catalog = catalog
        self.scaler = BindingNodeScaler(ScalerSettings.from_config(self.config), catalog)
        self.provisioner.invalidate()

    def disruption_loop(self) -> None:
        with self.timers["disruption"].timing(self.clock), self.lock:
            self.disruption.run(self.clock.now())  # on the cache as the pool loop last synced it

    def interruption_loop(self) -> None:
        messages = self.interruption.receive()  # a long poll: outside the lock
        with self.timers["interruption"].timing(self.clock), self.lock:
            self.interruption.handle(messages, self.clock.now())

    def colocation_loop(self) -> None:
        """Recalculate every Ready node's batch resources; write them when NeedSync says so."""
        with self.timers["colocation"].timing(self.clock):
            with self.lock:
                wanted = self.colocation.wanted()
            if wanted:
                metrics = self.colocation.read_metrics()
                with self.lock:
                    self.colocation.reconcile_all(metrics, self.clock.now())

    # -- reading ----------------------------------------------------------------------------
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
        self.lock.after_release(self.cluster.publish_status, text)

    def refresh_bound(self, now: float) -> None:
        """The LP bound's hourly rate for the pods running now (what no fleet of the pools'
        offerings could undercut for them): beside the fleet's price in /status and the
        metrics, made at most every ``BOUND_EVERY`` (an LP per group of pools). The offline
        simulator, whose report bounds the whole run, makes none."""
        if not self.metrics.scraped or (now - self.bound_rate[0] < BOUND_EVERY and self.bound_rate[1]):
            return  # (an empty cluster's bound is made again at the next pass: it costs nothing)
        cached = self.cache.snapshot()
        running = [p for p in cached.pods if p.node_name in self.nodes and not p.of_node]  # on our nodes: what the fleet's price pays for
        rate = CostBound(self.scaler.views_for(cached.daemon_sets), running).rate(running)
        self.bound_rate = (now, rate)
        self.metrics.bound.set(rate)

    def refresh_gauges(self) -> None:
        """Node, pod and cost gauges; the node counts and the cost are set again only when
        a record came, went or changed what they are made of, or the prices changed."""
        self.fleet.update(self.catalog)
        if self.fleet.version != self._gauges_version:  # (the price asked for in between, by /status, caught up too)
            counts, shown = dict(self.fleet.counts), self._gauges_shown
            for pool, state in shown.keys() - counts.keys():  # a state no node is in leaves the metrics
                self.metrics.nodes.remove(pool, state.value)
            for (pool, state), n in counts.items():
                if shown.get((pool, state)) != n:  # (most record changes move no count: a binding, a heartbeat)
                    self.metrics.nodes.labels(pool, state.value).set(n)
            self.metrics.cost.set(self.fleet.cost_per_hour())
            for pool in self.config.pools if self.metrics.scraped else ():  # (each walks the records)
                nodes, cpu, memory = self.pool_usage(pool.name)
                self.metrics.pool_nodes.labels(pool.name).set(nodes)
                self.metrics.pool_cpu.labels(pool.name).set(cpu / 1000)
                self.metrics.pool_memory.labels(pool.name).set(memory)
            self._gauges_shown, self._gauges_version = counts, self.fleet.version
        now = self.clock.now()
        for pod in self.cache.take_bound():
            self.metrics.pod_scheduling.observe(max(0.0, now - pod.created_at))
        self.metrics.pending_pods.set(self.cache.waiting_count())
        self.metrics.unschedulable_pods.set(len(self.last_decision.unschedulable) if self.last_decision else 0)

    def status(self, wait: float = STATUS_WAIT) -> dict[str, object]:
        """The /status document, built under the lock from a consistent state. No loop holds
        the lock across a call, but a decision over a large cluster may take a while: after
        ``wait`` seconds the last document built is answered instead, saying how old it is."""
        if not self.lock.acquire(timeout=wait):
            return self._stale_status()
        try:
            doc = status_document(self)
            self._last_status = (self.clock.now(), doc)
            return doc
        finally:
            self.lock.release()

    def _stale_status(self) -> dict[str, object]:
        busy = {"busy": True, "busy_note": f"a loop has held the controller for over {STATUS_WAIT:g}s (a long decision)"}
        if self._last_status is None:
            return {"controller": {"id": self.cloud.controller_id, "ready": self.ready, "as_of": None, **busy}}
        as_of, doc = self._last_status
        controller = doc["controller"]
        assert isinstance(controller, dict)
        return {**doc, "controller": {**controller, "as_of": as_of, **busy}}
