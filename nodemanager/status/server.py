"""The ops status endpoint: ``/status`` (JSON), ``/metrics``, ``/healthz``, ``/readyz``.

Read-only: it never changes the controller. It listens on 127.0.0.1 unless told
otherwise; with a bearer token configured, everything but ``/healthz`` and ``/readyz``
(what probes ask, which say nothing else) requires it. A client that stalls is dropped after
``CLIENT_TIMEOUT``; past ``MAX_CONNECTIONS`` at once, a new one gets 503 at once.
``/status`` replies are built at most once a second and shared (``SharedBuild``).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from nodemanager.config.schema import Status, parse_listen
from nodemanager.status.metrics import Metrics

log = logging.getLogger("nodemanager.status")

BACKLOG = 1024  # connections the kernel queues before they are accepted (past it, a client waits a SYN retry: 1 s)
CLIENT_TIMEOUT = 10.0  # seconds a client may take to send its request or read the reply
MAX_CONNECTIONS = 64  # handled at once
STATUS_MAX_AGE = 1.0  # seconds a /status reply is answered again before it is rebuilt


def load_token(settings: Status) -> str | None:
    """The bearer token from its file or environment variable, if one is configured."""
    if settings.bearer_token_file:
        token = Path(settings.bearer_token_file).read_text().strip()
        if not token:
            raise ValueError(f"status.bearerTokenFile: {settings.bearer_token_file} is empty")
        return token
    if settings.bearer_token_env:
        token = os.environ.get(settings.bearer_token_env, "").strip()
        if not token:
            raise ValueError(f"status.bearerTokenEnv: environment variable {settings.bearer_token_env} is not set")
        return token
    return None


class StatusServer:
    def __init__(
        self,
        listen: str,
        status: Callable[[], dict[str, object]],
        ready: Callable[[], bool],
        metrics: Metrics,
        token: str | None = None,
        *,
        max_age: float = STATUS_MAX_AGE,
    ) -> None:
        self.status = SharedBuild(lambda: _status_reply(status), max_age)
        self.ready = ready
        self.metrics = metrics
        self.token = token
        host, port = parse_listen(listen)
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = CLIENT_TIMEOUT

            def do_GET(self) -> None:
                server._handle(self)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("%s %s", self.address_string(), format % args)

        self.httpd = _BoundedServer((host, port), Handler)
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="status", daemon=True)
        self._thread.start()
        log.info("status endpoint on http://%s:%d/status", *self.address)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _authorized(self, request: BaseHTTPRequestHandler) -> bool:
        if self.token is None:
            return True
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode())

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        path = request.path.split("?", 1)[0]
        if path == "/healthz":
            return _send(request, 200, b"ok\n", "text/plain; charset=utf-8")
        if path == "/readyz":
            ready = self.ready()
            return _send(request, 200 if ready else 503, b"ready\n" if ready else b"not ready\n", "text/plain; charset=utf-8")
        if not self._authorized(request):
            request.send_response(401)
            request.send_header("WWW-Authenticate", 'Bearer realm="nodemanager"')
            request.send_header("Content-Length", "0")
            request.end_headers()
            return None
        if path == "/metrics":
            return _send(request, 200, self.metrics.exposition(), CONTENT_TYPE_LATEST)
        if path == "/status":
            return _send(request, *self.status.get(), "application/json")
        return _send(request, 404, b"not found: try /status, /metrics, /healthz or /readyz\n", "text/plain; charset=utf-8")


def _status_reply(status: Callable[[], dict[str, object]]) -> tuple[int, bytes]:
    try:
        return 200, json.dumps(status(), indent=2, sort_keys=True, default=str).encode() + b"\n"
    except Exception:
        log.exception("building /status failed")
        return 500, b'{"error": "building the status document failed; see the logs"}\n'


class SharedBuild:
    """The status reply, built at most once per ``max_age`` seconds.

    A request within ``max_age`` of the last build's start gets that build's reply; one that
    arrives while a build runs waits for it. A flood of requests costs one build a second,
    not one each (serializing the document is most of a request's cost), and every reply is
    at most ``max_age`` older than its request."""

    def __init__(self, build: Callable[[], tuple[int, bytes]], max_age: float) -> None:
        self._build = build  # never raises: a failure is an answer too
        self._max_age = max_age
        self._changed = threading.Condition()
        self._building = False
        self._result: tuple[float, tuple[int, bytes]] | None = None  # when its build started, the reply

    def get(self) -> tuple[int, bytes]:
        with self._changed:
            while True:
                if self._result is not None and time.monotonic() - self._result[0] < self._max_age:
                    return self._result[1]
                if self._building:
                    self._changed.wait()
                    continue
                self._building, started = True, time.monotonic()
                self._changed.release()
                try:
                    reply = self._build()
                finally:
                    self._changed.acquire()
                    self._building = False
                    self._changed.notify_all()
                self._result = (started, reply)
                return reply


def _send(request: BaseHTTPRequestHandler, code: int, body: bytes, content_type: str) -> None:
    request.send_response(code)
    request.send_header("Content-Type", content_type)
    request.send_header("Content-Length", str(len(body)))
    request.end_headers()
    request.wfile.write(body)


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most ``MAX_CONNECTIONS`` at once; a client hanging up
    is routine, logged at debug level."""

    daemon_threads = True
    request_queue_size = BACKLOG

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\n\r\n")
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("status client %s: %s", client_address, sys.exc_info()[1])
