"""The ops status endpoint: ``/`` (the status page), ``/status`` (JSON), ``/metrics``, ``/healthz``, ``/readyz``.
``/healthz`` is 503 while a loop is stuck (``nodemanager.liveness``).

Read-only: it never changes the controller. It listens on 127.0.0.1 unless told otherwise;
with a bearer token configured, everything but ``/healthz`` and ``/readyz`` (what probes
ask, which say nothing else) requires it. ``GET`` and ``HEAD`` are answered; TLS is an option.

The server is aiohttp's, on one asyncio event loop in a thread of its own: an idle or slow
connection costs a little memory, not a thread, so no number of slow clients can leave the
probes without an answer. aiohttp (already installed: the Kubernetes client depends on it)
arms its keep-alive timer when a connection opens and does not rearm it as bytes trickle in,
so a client must send a whole request within ``REQUEST_DEADLINE`` of connecting (or of its
previous reply), however slowly it sends it; uvicorn resets that timer on every byte, and
http.server gives every connection a thread. On top: at most ``PER_CLIENT`` connections from
one address and ``MAX_CONNECTIONS`` in all (past either, an at once 503 and a close), and the
documents built off the loop, in a small pool, so a slow ``/status`` build never delays a
probe. ``/status`` replies are built at most once a second and shared (``SharedBuild``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hmac
import json
import logging
import ssl
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from nodemanager.config.schema import parse_listen
from nodemanager.status.metrics import Metrics
from nodemanager.status.page import login_page, render_page

log = logging.getLogger("nodemanager.status")

BACKLOG = 4096  # connections the kernel queues before they are accepted (capped by net.core.somaxconn)
REQUEST_DEADLINE = 10.0  # seconds to send a whole request after connecting or after the last reply
PER_CLIENT = 64  # connections open at once from one address
MAX_CONNECTIONS = 4096  # connections open at once in all (each costs a file descriptor and a few KB)
BUILDERS = 2  # threads building /status and /metrics replies
STATUS_MAX_AGE = 1.0  # seconds a /status reply is answered again before it is rebuilt
TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"
SESSION_COOKIE = "nodemanager-session"
LOGIN_BYTES = 4096  # the login form's body at most
BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"


class StatusServer:
    def __init__(
        self,
        listen: str,
        status: Callable[[], dict[str, object]],
        ready: Callable[[], bool],
        metrics: Metrics,
        token: str | None = None,
        *,
        tls: ssl.SSLContext | None = None,
        max_age: float = STATUS_MAX_AGE,
        live: Callable[[], tuple[bool, str]] = lambda: (True, "ok\n"),
    ) -> None:
        self.listen = listen
        self._builders = concurrent.futures.ThreadPoolExecutor(max_workers=BUILDERS, thread_name_prefix="status-build")
        self.status = SharedBuild(lambda: _status_reply(status), max_age, self._builders)
        self.ready = ready
        self.live = live
        self.metrics = metrics
        self.token = token
        self.tls = tls
        self._address: tuple[str, int] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self.open = Counter[str]()  # connections open, by client address (touched on the loop only)

    @property
    def address(self) -> tuple[str, int]:
        assert self._address is not None, "start() first"
        return self._address

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    def start(self) -> None:
        """Bind and serve in a thread of its own; a failure to bind raises here, naming
        ``status.listen``."""
        bound: concurrent.futures.Future[tuple[str, int]] = concurrent.futures.Future()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve(bound)), name="status", daemon=True)
        self._thread.start()
        self._address = bound.result(timeout=30)
        log.info("status endpoint on %s://%s:%d/status", self.scheme, *self.address)

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None:
            with contextlib.suppress(RuntimeError):  # its loop already ended (it never bound)
                self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._builders.shutdown(wait=False, cancel_futures=True)

    async def _serve(self, bound: concurrent.futures.Future[tuple[str, int]]) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        server = web.Server(self._handle, keepalive_timeout=REQUEST_DEADLINE, access_log=None, handler_cancellation=True)
        host, port = parse_listen(self.listen)
        try:
            listener = await self._loop.create_server(lambda: _Admission(self, server()), host, port, ssl=self.tls, backlog=BACKLOG, reuse_address=True)
        except OSError as exc:
            bound.set_exception(OSError(f"status.listen: cannot listen on {self.listen}: {exc.strerror or exc}"))
            return
        address = listener.sockets[0].getsockname()
        bound.set_result((str(address[0]), int(address[1])))
        try:
            await self._stopped.wait()
        finally:
            listener.close()
            await server.shutdown(timeout=1)
            await listener.wait_closed()

    def _authorized(self, request: web.BaseRequest) -> bool:
        """The bearer token in the header, or the status page's session cookie (which a
        login with the token set)."""
        if self.token is None:
            return True
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode()):
            return True
        return hmac.compare_digest(request.cookies.get(SESSION_COOKIE, "").encode(), self._session().encode())

    def _session(self) -> str:
        """The session cookie's value: derived from the token, never the token itself."""
        assert self.token is not None
        return hmac.new(self.token.encode(), b"nodemanager status page session", "sha256").hexdigest()

    async def _login(self, request: web.BaseRequest) -> web.StreamResponse:
        """The status page's form: the right token sets the session cookie and goes to the page."""
        if self.token is None:
            return web.Response(status=303, headers={"Location": "/"})
        if (request.content_length or 0) > LOGIN_BYTES:
            return _reply(413, b"too large\n", TEXT)
        form = urllib.parse.parse_qs((await request.content.read(LOGIN_BYTES)).decode(errors="replace"))
        given = form.get("token", [""])[0].strip()
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return _reply(401, login_page(wrong=True).encode(), HTML)
        reply = web.Response(status=303, headers={"Location": "/"})
        reply.set_cookie(SESSION_COOKIE, self._session(), httponly=True, samesite="Strict", secure=self.tls is not None, path="/")
        return reply

    async def _page(self, request: web.BaseRequest) -> web.StreamResponse:
        if not self._authorized(request):
            return _reply(401, login_page(wrong=False).encode(), HTML)
        code, body = await self.status.get()
        if code != 200:
            return _reply(code, body, "application/json")
        page = await asyncio.get_running_loop().run_in_executor(self._builders, lambda: render_page(json.loads(body)).encode())
        return _reply(200, page, HTML)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path
        if path == "/login" and request.method == "POST":
            return await self._login(request)
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, body=b"only GET and HEAD\n", content_type="text/plain", headers={"Allow": "GET, HEAD"})
        if path == "/":
            return await self._page(request)
        if path == "/healthz":
            live, text = self.live()
            return _reply(200 if live else 503, text.encode(), TEXT)
        if path == "/readyz":
            ready = self.ready()
            return _reply(200 if ready else 503, b"ready\n" if ready else b"not ready\n", TEXT)
        if not self._authorized(request):
            return web.Response(status=401, headers={"WWW-Authenticate": 'Bearer realm="nodemanager"'})
        loop = asyncio.get_running_loop()
        if path == "/metrics":
            return _reply(200, await loop.run_in_executor(self._builders, self.metrics.exposition), CONTENT_TYPE_LATEST)
        if path == "/status":
            code, body = await self.status.get()
            return _reply(code, body, "application/json")
        return _reply(404, b"not found: try /, /status, /metrics, /healthz or /readyz\n", TEXT)


def _reply(code: int, body: bytes, content_type: str) -> web.Response:
    return web.Response(status=code, body=body, headers={"Content-Type": content_type})


class _Admission(asyncio.Protocol):
    """Admits a connection to aiohttp's protocol unless its address, or the server, has too
    many open: past either, an at once 503 and a close."""

    def __init__(self, server: StatusServer, inner: Any) -> None:
        self.server = server
        self.inner = inner
        self.peer: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peername = transport.get_extra_info("peername")
        peer = str(peername[0]) if peername else ""
        open_ = self.server.open
        if open_[peer] >= PER_CLIENT or open_.total() >= MAX_CONNECTIONS:
            assert isinstance(transport, asyncio.WriteTransport)
            transport.write(BUSY)
            transport.close()
            return
        self.peer = peer
        open_[peer] += 1
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is None:
            return
        open_ = self.server.open
        open_[self.peer] -= 1
        if open_[self.peer] <= 0:
            del open_[self.peer]
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.peer is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.peer is not None else None

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


def _status_reply(status: Callable[[], dict[str, object]]) -> tuple[int, bytes]:
    try:
        return 200, json.dumps(status(), indent=2, sort_keys=True, default=str).encode() + b"\n"
    except Exception:
        log.exception("building /status failed")
        return 500, b'{"error": "building the status document failed; see the logs"}\n'


class SharedBuild:
    """The status reply, built at most once per ``max_age`` seconds, off the event loop.

    A request within ``max_age`` of the last build's start gets that build's reply at once,
    without leaving the loop; one that arrives while a build runs awaits the same build. A
    flood of requests costs one build a second, not one each (serializing the document is
    most of a request's cost), and every reply is at most ``max_age`` older than its
    request. Used on one event loop only, so it needs no lock."""

    def __init__(self, build: Callable[[], tuple[int, bytes]], max_age: float, executor: concurrent.futures.Executor | None = None) -> None:
        self._build = build  # never raises: a failure is an answer too
        self._max_age = max_age
        self._executor = executor
        self._building: asyncio.Future[tuple[int, bytes]] | None = None
        self._result: tuple[float, tuple[int, bytes]] | None = None  # when its build started, the reply

    async def get(self) -> tuple[int, bytes]:
        if self._result is not None and time.monotonic() - self._result[0] < self._max_age:
            return self._result[1]
        if self._building is None:
            started = time.monotonic()
            building = asyncio.get_running_loop().run_in_executor(self._executor, self._build)
            self._building = building

            def done(future: asyncio.Future[tuple[int, bytes]]) -> None:
                self._building = None
                if not future.cancelled():
                    self._result = (started, future.result())

            building.add_done_callback(done)
        return await asyncio.shield(self._building)
