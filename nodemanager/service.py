"""``nodemanager run``: the long-running service in real time.

apscheduler runs each loop body at its interval (one run at a time per loop, missed runs
coalesced); boots go to a thread pool; the status endpoint serves from its own thread.
SIGTERM or SIGINT stops everything within a few seconds.

With ``cluster.source: kubernetes`` and leader election on, a "leader" job tries for the
Lease every retryPeriod and the loops act only while this replica leads. Each term as
leader starts like a restarted process: a fresh controller rebuilt from the cloud's tags
and the cluster, so nothing a former term believed is trusted.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from apscheduler.schedulers.background import BackgroundScheduler

from cloud.catalog import Catalog
from cloud.errors import CloudError
from nodemanager.clock import RealClock
from nodemanager.cluster.kubernetes.reachability import UNREADY_AFTER, Reachability
from nodemanager.config.cluster_schema import ClusterSource
from nodemanager.config.files import load_token, status_tls
from nodemanager.config.schema import ProviderConfig
from nodemanager.controller.node_controller import LOOPS, NodeController
from nodemanager.deadline import pass_deadline
from nodemanager.liveness import Liveness
from nodemanager.logs import REDACT
from nodemanager.reload import ConfigFile, restart_in_place
from nodemanager.status.metrics import Metrics
from nodemanager.status.server import StatusServer
from nodemanager.wiring import build_cloud, build_cluster, build_controller

if TYPE_CHECKING:
    from nodemanager.cluster.kubernetes.leader import LeaderElector

STOP_GRACE = 10.0  # seconds a stop waits for running loops
EXIT_STUCK = 1  # the exit status when a loop had to be left running
SIGNAL_POLL = 0.2  # seconds between looks for a stop signal (see wait_for_stop_signal)
RECOVERY_STOP_WAIT = 0.5  # seconds a stop waits for a recovery that is still reading

log = logging.getLogger("nodemanager")
# Loops whose cloud and API calls get the pass deadline, so that a pass through an outage
# ends and the loop runs again (the price refresh makes one call, and retries next time).
WITH_DEADLINE = frozenset(LOOPS) - {"prices"}
INTERRUPTION_POLL = 5.0  # seconds an interruption-queue poll may wait for a message
APPLY_WAIT = 30.0  # seconds a live reload waits for running loops and boots in flight to end

# What the process holds built from the configuration (the cloud and cluster clients, the
# status server, the catalog they read): a change to any of these restarts the process.
HELD = ("controller_id", "cloud", "cluster", "catalog", "status")


def applies_live(old: ProviderConfig, new: ProviderConfig) -> bool:
    """Whether ``new`` changes only what the controller reads (pools, limits, budgets,
    standby, node timings, loops, scheduling, the batch tier)."""
    return all(getattr(old, key) == getattr(new, key) for key in HELD) and old.nodes.boot_image_spec == new.nodes.boot_image_spec


class LeaderGate:
    """The loops act only while this replica leads (always, without an elector); each term
    starts from a fresh controller recovered from the cloud and the cluster."""

    def __init__(self, elector: LeaderElector | None, new_controller: Callable[[], NodeController]) -> None:
        self.elector = elector
        self._new_controller = new_controller
        self.controller = new_controller()
        self.terms = 0
        self._in_term = False
        self._stale = False  # the configuration changed: the next term starts from a new controller
        self.closed = False  # stopping: no loop acts from now on
        self._lock = threading.Lock()
        if elector is not None:
            elector.on_stopped = self._term_ended

    def acting(self, *, recover: bool = True) -> bool:
        """Whether a loop may act now. Outside a term, a caller with ``recover`` begins one by
        recovering the controller (which raises when the cloud or the cluster cannot be
        read: the next such call tries again); any other caller waits for the term."""
        if self.closed or (self.elector is not None and not self.elector.leading()):
            return False
        if not recover and not self._in_term:
            return False
        with self._lock:
            if not self._in_term:
                if not recover:
                    return False
                # Leading again, or configured anew: start from the truth, not from old beliefs.
                # (The last term's controller answers /status until the new one has recovered.)
                fresh = self._new_controller() if self.terms or self._stale else self.controller
                fresh.recover()
                if self.closed:  # the stop came while recovering: this term never begins
                    return False
                self.controller, self._stale = fresh, False
                self.terms += 1
                self._in_term = True
        return True

    def _term_ended(self) -> None:
        self._in_term = False

    def new_term(self) -> None:
        """End the term: the next pool pass begins one with a new controller (the service's
        configuration changed)."""
        with self._lock:
            self._stale = True
            self._in_term = False

    @property
    def in_term(self) -> bool:
        """A term has begun: the controller recovered and its loops may act (until then, a
        loop that runs is recovering, which only reads)."""
        return self._in_term


class Service:
    def __init__(self, config: ProviderConfig, catalog: Catalog, source: str) -> None:
        self.config = config
        self.catalog = catalog
        self.source = source
        self.clock = RealClock()
        self.metrics = Metrics()
        self.executor = ThreadPoolExecutor(max_workers=config.nodes.max_boots_per_loop, thread_name_prefix="boot")
        self.stopping = threading.Event()  # set on shutdown: cloud retries stop waiting
        elector: LeaderElector | None = None
        identity = "nodemanager"
        kube = config.cluster.kubernetes
        # What every caller of the API server finds: one warning per outage, and /readyz.
        self.reachability = Reachability(self.clock) if config.cluster.source is ClusterSource.KUBERNETES else None
        # Failures that leave a recovery to be tried again: the cloud or the API server not answering.
        self._unanswered: tuple[type[BaseException], ...] = (CloudError,)
        if config.cluster.source is ClusterSource.KUBERNETES:
            from nodemanager.cluster.kubernetes.errors import NETWORK_ERRORS

            self._unanswered += NETWORK_ERRORS
        if config.cluster.source is ClusterSource.KUBERNETES and kube is not None and kube.leader_election.enabled:
            from nodemanager.cluster.kubernetes.connect import api_client
            from nodemanager.cluster.kubernetes.connect import identity as new_identity
            from nodemanager.cluster.kubernetes.leader import LeaderElector

            identity = new_identity()
            api = api_client(kube, self.reachability.errors if self.reachability is not None else None)
            elector = LeaderElector(api, kube.leader_election, identity, self.clock, reachability=self.reachability)
        self.elector = elector
        self.cloud = build_cloud(config, self.clock, catalog, self.stopping)
        self.cluster = build_cluster(config, self.clock, self.cloud, identity=identity, reachability=self.reachability)
        self.gate = LeaderGate(elector, self._new_controller)
        self.metrics.count_errors(self.cloud.errors, "cloud")
        if self.reachability is not None:
            self.metrics.count_errors(self.reachability.errors, "api")
        self.metrics.leader.set_function(lambda: 1.0 if self.elector is None or self.elector.leading() else 0.0)
        token = load_token(config.status)
        REDACT.add(token)
        intervals = config.loops.intervals()
        self.liveness = Liveness(self.clock, {n: intervals[n] for n in LOOPS}, dict.fromkeys(WITH_DEADLINE, config.loops.pass_deadline))
        self.server = StatusServer(
            config.status.listen, self.status, self._ready, self.metrics, token, tls=status_tls(config.status), live=self.liveness.report
        )
        self.scheduler = BackgroundScheduler(timezone=UTC)
        self.stopped = threading.Event()

    @property
    def controller(self) -> NodeController:
        return self.gate.controller

    def _new_controller(self) -> NodeController:
        controller = build_controller(
            self.config, self.catalog, self.clock, cloud=self.cloud, cluster=self.cluster, executor=self.executor, metrics=self.metrics
        )
        controller.interruption.wait = INTERRUPTION_POLL  # real time: a long poll, shorter than the stop grace
        return controller

    def _ready(self) -> bool:
        # A follower is ready to take over, unless a misconfiguration means nobody can lead;
        # neither is while the API server has not answered for UNREADY_AFTER.
        if self.reachability is not None and self.reachability.unreachable_for() >= UNREADY_AFTER:
            return False
        return self.controller.state.ready or (self.elector is not None and not self.elector.leading() and self.elector.problem is None)

    def status(self) -> dict[str, object]:
        """The controller's document; with leader election, whether this replica leads and
        who does (a follower's controller has not recovered anything: it is not acting)."""
        doc = self.controller.status()
        if self.elector is not None:
            controller = doc["controller"]
            assert isinstance(controller, dict)
            controller["leader"] = self.elector.leading()
            controller["leader_election"] = self.elector.describe()
        if self.reachability is not None:
            doc["controller"]["api_server"] = self.reachability.describe()  # type: ignore[index]
        return doc

    def _guarded(self, name: str):  # type: ignore[no-untyped-def]
        deadline = self.config.loops.pass_deadline if name in WITH_DEADLINE else None

        def run() -> None:
            self.liveness.began(name, recovering=name == "pool" and not self.gate.in_term)
            try:
                # The pool loop recovers the controller when a term begins (the others wait
                # for it): a cloud or an API server that does not answer leaves the service
                # live and unready, trying again. Not under the pass deadline: a large
                # cluster's first listing may take longer than a pass.
                acting = self._recover_or_act(name)
                if acting:
                    with pass_deadline(self.clock, deadline) if deadline else contextlib.nullcontext():
                        getattr(self.controller, f"{name}_loop")()
                elif name == "pool" and self.elector is not None and not self.elector.leading():
                    self.cluster.poll()  # a follower keeps its view current (and its queue short) for a quick takeover
            except Exception:
                log.exception("%s loop failed; it runs again at its next interval", name)
            finally:
                self.liveness.ended(name)

        return run

    def _recover_or_act(self, name: str) -> bool:
        if name != "pool" or self.gate.in_term:
            return self.gate.acting(recover=False)
        try:
            return self.gate.acting()
        except self._unanswered as exc:
            log.warning("recovery failed (%s); not ready, trying again in %gs", exc, self.config.loops.intervals()["pool"])
            return False

    def start(self) -> None:
        """Serve the endpoint and start the loops; the first pool pass recovers the
        controller (until it has, ``/readyz`` says not ready). Returns at once."""
        log.info("nodemanager starting: %s; controller id %s", self.source, self.cloud.controller_id)
        self.server.start()
        intervals = self.config.loops.intervals()
        now = datetime.now(UTC)
        if self.elector is not None:
            self.scheduler.add_job(
                self.elector.tick, "interval", seconds=self.elector.settings.retry_period, id="leader", max_instances=1, coalesce=True, next_run_time=now
            )
            log.info("leader election on as %s; the loops act only while leading", self.elector.identity)
        for name in LOOPS:
            self.scheduler.add_job(self._guarded(name), "interval", seconds=intervals[name], id=name, max_instances=1, coalesce=True, next_run_time=now)
        self.scheduler.start()
        log.info("loops running: %s", ", ".join(f"{n} every {intervals[n]:g}s" for n in LOOPS))

    def apply(self, config: ProviderConfig, catalog: Catalog, wait: float = APPLY_WAIT) -> bool:
        """Apply a new configuration without a restart when ``applies_live``: no loop acts
        while the running passes and the boots in flight end, then the next pool pass begins a
        term with a controller of the new configuration (recovered from the cloud and the
        cluster, as at any start); intervals change at once. False, having changed nothing,
        when it cannot (a part the process holds changed, or a loop did not end in ``wait``)."""
        if not applies_live(self.config, config):
            return False
        old = self.gate.controller
        self.gate.closed = True
        deadline = time.monotonic() + wait
        while (self.liveness.running() or old.state.booting) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.liveness.running() or old.state.booting:
            self.gate.closed = False
            return False
        self.config, self.catalog = config, catalog
        intervals = config.loops.intervals()
        for name in LOOPS:
            if self.liveness.intervals[name] != intervals[name]:
                self.scheduler.reschedule_job(name, trigger="interval", seconds=intervals[name])
                self.liveness.intervals[name] = intervals[name]
        self.liveness.allowances.update(dict.fromkeys(WITH_DEADLINE, config.loops.pass_deadline))
        self.gate.new_term()
        self.gate.closed = False
        return True

    def stop(self, grace: float = STOP_GRACE) -> bool:
        """Stop the loops, the watches and the endpoint. Cloud retries end as soon as
        ``stopping`` is set; a loop that still runs after ``grace`` seconds is not waited
        for (False: the caller should exit at once, and the election lease is not released
        while a loop may still act: it expires instead)."""
        log.info("stopping")
        self.stopping.set()
        self.gate.closed = True
        loops_done = threading.Event()

        def shut_down() -> None:
            self.scheduler.shutdown(wait=True)
            loops_done.set()

        threading.Thread(target=shut_down, name="stop", daemon=True).start()
        # Before a term has begun, a running loop is recovering, which only reads: no need
        # to wait for its call to the cloud or the API server to end.
        finished = loops_done.wait(grace if self.gate.in_term else min(grace, RECOVERY_STOP_WAIT))
        if not finished and not self.gate.in_term:
            # Still recovering (reading the cloud and the cluster): nothing has acted in this
            # term and nothing will (the gate is closed), so the lease may go at once.
            log.warning("stopped while recovering; the recovery is left to end by itself")
            finished = True
        if not finished:
            stuck = [name for name, timer in self.controller.timers.items() if timer.running] or ["waiting for the controller"]
            log.error("loop(s) %s still running %gs after the stop was asked; not waiting for them", ", ".join(stuck), grace)
        elif self.elector is not None:
            self.elector.release()
        stop_cluster = getattr(self.cluster, "stop", None)
        if stop_cluster is not None:
            stop_cluster()
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.server.stop()
        self.stopped.set()
        log.info("stopped" if finished else "stopped, leaving a loop behind")
        return finished


class Signals:
    """SIGTERM and SIGINT (stop) and SIGHUP (read the configuration again), caught from
    construction on; a signal that comes while the previous one is handled waits its turn.

    The handler only notes the signal: one that took a lock (``Event.set``) deadlocked when
    the signal came while this thread held that lock entering its wait, and the service ran
    on, deaf to the signal. The wait is a short sleep in a loop, not one blocking call: a
    signal the kernel hands to another thread is acted on only once this thread runs Python
    again, which a wait without a timeout never does."""

    CHANGED = 0  # not a signal: the configuration file changed

    def __init__(self) -> None:
        self.received: list[int] = []
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda signum, _frame: self.received.append(signum))

    def wait(self, poll: float = SIGNAL_POLL, look: Callable[[], bool] | None = None, every: float = math.inf) -> int:
        """The next signal; or ``CHANGED`` once ``look()`` (asked every ``every`` seconds) says so."""
        next_look = time.monotonic() + every
        while not self.received:
            if look is not None and time.monotonic() >= next_look:
                next_look = time.monotonic() + every
                if look():
                    return self.CHANGED
            time.sleep(poll)
        return self.received.pop(0)


def wait_for_stop_signal(start: Callable[[], None], poll: float = SIGNAL_POLL) -> int:
    """Call ``start``, then wait for SIGTERM, SIGINT or SIGHUP and return it."""
    signals = Signals()
    start()
    return signals.wait(poll)


def run_service(config: ProviderConfig, catalog: Catalog, source: str, path: str | None = None) -> int:
    """Serve until SIGTERM or SIGINT. With a configuration file (``path``), SIGHUP or a change
    of its content reads it again: refused whole if it has a problem, applied by restarting
    in place if it differs."""
    service = Service(config, catalog, source)
    signals = Signals()
    service.start()
    watched = ConfigFile(path, config) if path is not None else None
    while True:
        got = signals.wait(SIGNAL_POLL, watched.changed if watched else None, service.config.loops.config_check)
        if got in (signal.SIGHUP, Signals.CHANGED):
            why = "SIGHUP received" if got == signal.SIGHUP else f"{path} changed"
            if watched is None:
                log.info("%s: the embedded configuration has nothing to read again", why)
                continue
            log.info("%s: reading the configuration again", why)
            newer = watched.newer()
            if newer is None:
                continue
            if service.apply(*newer):
                watched.config = newer[0]
                log.warning("configuration %s changed: applied without a restart (the next pool pass starts from it)", path)
                continue
            log.warning("configuration %s changed where a restart is needed (cloud, cluster, catalog or status): restarting in place", path)
            service.stop()
            restart_in_place()  # (a loop left running goes with the process image)
        log.info("%s received", signal.Signals(got).name)
        if not service.stop():
            logging.shutdown()
            os._exit(EXIT_STUCK)  # a loop's thread would keep the interpreter from exiting
        return 0
