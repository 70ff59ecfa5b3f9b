"""Kubernetes events nodemanager posts on pods and Nodes (why a node boots, why a pod waits):
the same event on the same object is posted once, and events go out off the loops' thread,
paced (``EventQueue``)."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

from kubernetes import client

from nodemanager.clock import Clock
from nodemanager.cluster.kubernetes.errors import NETWORK_ERRORS, api_message
from nodemanager.cluster.kubernetes.event_queue import EventQueue
from nodemanager.cluster.kubernetes.reachability import Reachability
from nodemanager.deadline import api_timeout

log = logging.getLogger("nodemanager.kubernetes")
COMPONENT = "nodemanager"
EVENT_MEMORY = 10_000  # (object, reason) pairs remembered to avoid repeating an event


class EventRecorder:
    def __init__(
        self, core: client.CoreV1Api, clock: Clock, identity: str, stopped: threading.Event, *, threaded: bool = True, reachability: Reachability | None = None
    ) -> None:
        self._reachability = reachability  # an outage is told once, there, not by each event lost to it
        self.core = core
        self.clock = clock
        self.identity = identity
        self._said: dict[tuple[str, str], str] = {}
        self._failures = 0
        self._out: EventQueue | None = EventQueue(self._send, stopped) if threaded else None

    def said(self, kind: str, key: str, what: str) -> bool:
        """Whether ``what`` is what was last said of this object (it is remembered now)."""
        if self._said.get((kind, key)) == what:
            return True
        if len(self._said) >= EVENT_MEMORY:
            self._said.clear()
        self._said[(kind, key)] = what
        return False

    def post(self, namespace: str, name: str, involved: dict, reason: str, message: str, *, warning: bool = False) -> None:
        stamp = datetime.fromtimestamp(self.clock.now(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "metadata": {"generateName": f"{name}."},
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.identity,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        if self._out is None:
            self._send(namespace, body)
        else:  # off the loop's thread: an event never delays a decision
            self._out.put(namespace, body)

    def close(self) -> None:
        if self._out is not None:
            self._out.close()

    def _send(self, namespace: str, body: dict) -> None:
        try:
            self.core.create_namespaced_event(namespace, body, _preload_content=False, _request_timeout=api_timeout())
        except NETWORK_ERRORS as exc:
            if self._reachability is not None and self._reachability.unanswered("event write", exc):
                return
            level = logging.DEBUG if self._failures else logging.WARNING  # warn once, not per event
            self._failures += 1
            log.log(level, "event %s on %s not recorded (%d so far): %s", body["reason"], body["involvedObject"]["name"], self._failures, api_message(exc))
