"""The ops status endpoint: ``/status`` (JSON), ``/metrics``, ``/healthz``, ``/readyz``.

Read-only: it never changes the controller. It listens on 127.0.0.1 unless told
otherwise; with a bearer token configured, everything but ``/healthz`` requires it.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST

from nodemanager.config.schema import Status
from nodemanager.status.metrics import Metrics

log = logging.getLogger("nodemanager.status")


def parse_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


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
    ) -> None:
        self.status = status
        self.ready = ready
        self.metrics = metrics
        self.token = token
        host, port = parse_listen(listen)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server._handle(self)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("%s %s", self.address_string(), format % args)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
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
        if not self._authorized(request):
            request.send_response(401)
            request.send_header("WWW-Authenticate", 'Bearer realm="nodemanager"')
            request.send_header("Content-Length", "0")
            request.end_headers()
            return None
        if path == "/readyz":
            ready = self.ready()
            return _send(request, 200 if ready else 503, b"ready\n" if ready else b"not ready\n", "text/plain; charset=utf-8")
        if path == "/metrics":
            return _send(request, 200, self.metrics.exposition(), CONTENT_TYPE_LATEST)
        if path == "/status":
            try:
                body = json.dumps(self.status(), indent=2, sort_keys=True, default=str).encode()
            except Exception:
                log.exception("building /status failed")
                return _send(request, 500, b'{"error": "building the status document failed; see the logs"}\n', "application/json")
            return _send(request, 200, body + b"\n", "application/json")
        return _send(request, 404, b"not found: try /status, /metrics, /healthz or /readyz\n", "text/plain; charset=utf-8")


def _send(request: BaseHTTPRequestHandler, code: int, body: bytes, content_type: str) -> None:
    request.send_response(code)
    request.send_header("Content-Type", content_type)
    request.send_header("Content-Length", str(len(body)))
    request.end_headers()
    request.wfile.write(body)
