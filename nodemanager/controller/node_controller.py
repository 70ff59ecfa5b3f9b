"""``NodeController``: the operator. It builds the shared ``ClusterState`` and the controllers,
one per concern, each given the state and the few collaborators it calls, and runs their
loops. No controller knows this class (an import contract keeps it so).

Every loop gathers, decides, then acts, and reads time only from the injected clock; the
state is shared under one lock, never held across a call to the cloud or the cluster. The
loops and the modules they run:

* pool (7 s, ``provisioning.py``): sync the cache from cluster events (``sync.py``),
  compute a Decision from one snapshot, apply it (records for new nodes and their boots,
  ``boots.py``; stops; bindings), then dispatch pods whose nodes are ready
  (``dispenser.py``); gauges and the status ConfigMap (``reporting.py``);
* heartbeat (10 s, ``lifecycle.py``): unhealthy and never-Ready nodes marked for termination;
* reaper (10 s, ``reaper.py``): marked nodes drained, terminated and their pods placed again;
* orphan GC (60 s, ``garbage_collection.py``): instances with our tag that no record knows;
* prices (12 h, ``prices.py``), colocation (``colocation.py``), disruption
  (``disruption.py``), interruption (``interruption.py``), reservations (60 s,
  ``reservations.py``).

The truth lives outside: ``recover()`` rebuilds the records from the cloud's tags and the
cluster (``sync.py``).
"""

from __future__ import annotations

from concurrent.futures import Executor

from cloud.base import CloudClient
from cloud.catalog import Catalog
from nodemanager.cache import ClusterEventsHandler
from nodemanager.clock import Clock
from nodemanager.cluster.base import ClusterSource
from nodemanager.config.schema import ProviderConfig
from nodemanager.controller.boots import Boots
from nodemanager.controller.colocation import ColocationReconciler
from nodemanager.controller.dispenser import NodeDispenser
from nodemanager.controller.disruption import DisruptionController
from nodemanager.controller.executor import InlineExecutor
from nodemanager.controller.garbage_collection import OrphanCollector
from nodemanager.controller.interruption import InterruptionController
from nodemanager.controller.lifecycle import NodeLifecycle
from nodemanager.controller.prices import PriceRefresher
from nodemanager.controller.provisioning import Provisioner
from nodemanager.controller.reaper import Reaper
from nodemanager.controller.reporting import STATUS_WAIT, Reporting
from nodemanager.controller.reservations import ReservationController
from nodemanager.controller.state import ClusterState
from nodemanager.controller.sync import ClusterSync
from nodemanager.controller.timers import LoopTimer
from nodemanager.scaler import BindingNodeScaler, ScalerSettings
from nodemanager.status.metrics import Metrics

# (In virtual time, loops due at one instant run in this order: reservations first, so a
# decision made at the instant a reservation starts already has it.)
LOOPS = ("reservations", "pool", "heartbeat", "reaper", "orphan_gc", "prices", "colocation", "disruption", "interruption")


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
        self.cloud = cloud
        self.cluster = cluster
        self.clock = clock
        self.executor = executor or InlineExecutor()
        self.metrics = metrics = metrics or Metrics()
        self.state = state = ClusterState(config, catalog, clock, cache or ClusterEventsHandler(), cluster.record_event)
        self.timers = {name: LoopTimer(observe=metrics.loop_duration.labels(name).observe) for name in LOOPS}
        self.dispenser = NodeDispenser(state)
        self.sync = ClusterSync(state, cloud, cluster, metrics, self.dispenser)
        self.reaper = Reaper(state, cloud, cluster, metrics)
        self.boots = Boots(state, cloud, self.executor, metrics, reap=self.reaper.run)
        self.colocation = ColocationReconciler(state, cluster)
        self.lifecycle = NodeLifecycle(state, cluster)
        self.gc = OrphanCollector(state, cloud, metrics)
        self.prices = PriceRefresher(state, cloud, self.reprice)
        self.disruption = DisruptionController(state, cloud, metrics, self.boots)
        # the cloud's queue of interruption warnings, if it has one
        self.interruption = InterruptionController(state, getattr(cloud, "interruptions", None), metrics, self.boots, self.disruption)
        self.reservations = ReservationController(state, cloud, metrics, lambda: self.reprice(state.catalog), self.interruption.replace)
        self.reporting = Reporting(
            state,
            cluster,
            metrics,
            timers=self.timers,
            controller_id=cloud.controller_id,
            disruption=self.disruption,
            interruption=self.interruption,
            colocation=self.colocation,
            reservations=self.reservations,
        )
        self.provisioner = Provisioner(
            state,
            cluster,
            metrics,
            sync=self.sync,
            boots=self.boots,
            reporting=self.reporting,
            disruption=self.disruption,
            reaper=self.reaper,
            dispenser=self.dispenser,
        )

    def recover(self) -> None:
        """Read the capacity reservations, then rebuild node records from the cloud (tags)
        and the cluster after a (re)start."""
        self.reservations.run()
        self.sync.recover()

    def status(self, wait: float = STATUS_WAIT) -> dict[str, object]:
        """The /status document (see ``Reporting.status``)."""
        return self.reporting.status(wait)

    def reprice(self, catalog: Catalog) -> None:
        """Plan with ``catalog`` from now on (fresher prices, or reservations that came or
        went: the reservations last read are offered), deciding again at once."""
        catalog = catalog.with_reservations(self.state.reservations.values())
        self.state.catalog = catalog
        self.state.scaler = BindingNodeScaler(ScalerSettings.from_config(self.config), catalog)
        self.provisioner.invalidate()

    # -- the loops: each concern's controller, over this state, under its lock ------------------
    def pool_loop(self) -> None:
        with self.timers["pool"].timing(self.clock):
            self.provisioner.run()

    def heartbeat_loop(self) -> None:
        with self.timers["heartbeat"].timing(self.clock), self.state.lock:
            self.lifecycle.run(self.clock.now())

    def reaper_loop(self) -> None:
        with self.timers["reaper"].timing(self.clock):
            self.reaper.run(self.clock.now())

    def orphan_gc_loop(self) -> None:
        with self.timers["orphan_gc"].timing(self.clock):
            self.gc.run()

    def prices_loop(self) -> None:
        with self.timers["prices"].timing(self.clock):
            self.prices.run()

    def disruption_loop(self) -> None:
        with self.timers["disruption"].timing(self.clock), self.state.lock:
            self.disruption.run(self.clock.now())  # on the cache as the pool loop last synced it

    def interruption_loop(self) -> None:
        messages = self.interruption.receive()  # a long poll: outside the lock
        with self.timers["interruption"].timing(self.clock), self.state.lock:
            self.interruption.handle(messages, self.clock.now())

    def reservations_loop(self) -> None:
        with self.timers["reservations"].timing(self.clock):
            self.reservations.run()

    def colocation_loop(self) -> None:
        """Recalculate every Ready node's batch resources; write them when NeedSync says so."""
        with self.timers["colocation"].timing(self.clock):
            with self.state.lock:
                wanted = self.colocation.wanted()
            if wanted:
                metrics = self.colocation.read_metrics()
                with self.state.lock:
                    self.colocation.reconcile_all(metrics, self.clock.now())
