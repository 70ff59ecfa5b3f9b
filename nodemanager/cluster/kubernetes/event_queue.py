"""Events posted off the loops' thread, paced and bounded.

A scale-up of 10,000 pods made 20,000 events (each pod's TriggeredScaleUp and Scheduled): one
sender thread with an unbounded queue was still posting them at 65 requests a second minutes
after every pod ran. Now at most ``EVENT_QPS`` go out a second, and at most
``MAX_QUEUED_EVENTS`` wait (client-go's event broadcaster keeps 1,000 too); past that an event
is dropped, counted and said once per burst. Events only tell users why; the decisions are
in /status and the logs."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("nodemanager.kubernetes")

EVENT_QPS = 20.0  # events posted a second at most
MAX_QUEUED_EVENTS = 1000


class EventQueue:
    def __init__(
        self,
        send: Callable[[str, dict], None],
        stopped: threading.Event,
        *,
        qps: float = EVENT_QPS,
        limit: int = MAX_QUEUED_EVENTS,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._stopped = stopped  # set on stop: a paced wait ends, and no more events go
        self._gap = 1.0 / qps
        self._limit = limit
        self._now = now
        self._out = ThreadPoolExecutor(1, thread_name_prefix="k8s-events")
        self._lock = threading.Lock()
        self._waiting = 0
        self._next = 0.0  # when the next event may go
        self.dropped = 0

    def put(self, namespace: str, body: dict) -> None:
        """Post the event soon; or drop it when ``limit`` wait already."""
        with self._lock:
            full = self._waiting >= self._limit
            if full:
                self.dropped += 1
            else:
                self._waiting += 1
        if not full:
            self._out.submit(self._paced, namespace, body)
        elif self.dropped % MAX_QUEUED_EVENTS == 1:  # the first of a burst, and every thousand
            log.warning("%d events are waiting to be posted: dropping new ones (%d so far); /status and the log say every decision", self._limit, self.dropped)

    def _paced(self, namespace: str, body: dict) -> None:
        try:
            wait = self._next - self._now()
            if wait > 0 and self._stopped.wait(wait):
                return
            self._next = max(self._next, self._now()) + self._gap
            self._send(namespace, body)
        finally:
            with self._lock:
                self._waiting -= 1

    def drain(self) -> None:
        """Wait until every event put so far has gone (tests)."""
        self._out.submit(lambda: None).result()

    def close(self) -> None:
        self._out.shutdown(wait=False, cancel_futures=True)
