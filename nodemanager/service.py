"""``nodemanager run``: the long-running service in real time.

apscheduler runs each loop body at its interval (one run at a time per loop, missed runs
coalesced); boots go to a thread pool; the status endpoint serves from its own thread.
SIGTERM or SIGINT stops everything within a few seconds.
"""

from __future__ import annotations

import logging
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from apscheduler.schedulers.background import BackgroundScheduler

from cloud.catalog import Catalog
from nodemanager.clock import RealClock
from nodemanager.config.schema import ProviderConfig
from nodemanager.controller.node_controller import LOOPS, NodeController
from nodemanager.status.metrics import Metrics
from nodemanager.status.server import StatusServer, load_token
from nodemanager.wiring import build_controller

log = logging.getLogger("nodemanager")


def _guarded(controller: NodeController, name: str):  # type: ignore[no-untyped-def]
    body = getattr(controller, f"{name}_loop")

    def run() -> None:
        try:
            body()
        except Exception:
            log.exception("%s loop failed; it runs again at its next interval", name)

    return run


class Service:
    def __init__(self, config: ProviderConfig, catalog: Catalog, source: str) -> None:
        self.config = config
        self.source = source
        self.metrics = Metrics()
        self.executor = ThreadPoolExecutor(max_workers=config.nodes.max_boots_per_loop, thread_name_prefix="boot")
        self.stopping = threading.Event()  # set on shutdown: cloud retries stop waiting
        self.controller = build_controller(config, catalog, RealClock(), executor=self.executor, metrics=self.metrics, stop=self.stopping)
        self.server = StatusServer(config.status.listen, self.controller.status, lambda: self.controller.ready, self.metrics, load_token(config.status))
        self.scheduler = BackgroundScheduler(timezone=UTC)
        self.stopped = threading.Event()

    def start(self) -> None:
        log.info("nodemanager starting: %s; controller id %s", self.source, self.controller.cloud.controller_id)
        self.server.start()
        try:
            self.controller.recover()
        except BaseException:
            self.server.stop()  # nothing half-started stays behind
            raise
        intervals = self.config.loops.intervals()
        now = datetime.now(UTC)
        for name in LOOPS:
            job = _guarded(self.controller, name)
            self.scheduler.add_job(job, "interval", seconds=intervals[name], id=name, max_instances=1, coalesce=True, next_run_time=now)
        self.scheduler.start()
        log.info("loops running: %s", ", ".join(f"{n} every {intervals[n]:g}s" for n in LOOPS))

    def stop(self) -> None:
        log.info("stopping")
        self.stopping.set()
        self.scheduler.shutdown(wait=True)
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.server.stop()
        self.stopped.set()
        log.info("stopped")


def run_service(config: ProviderConfig, catalog: Catalog, source: str) -> int:
    service = Service(config, catalog, source)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    service.start()
    stop.wait()
    service.stop()
    return 0
