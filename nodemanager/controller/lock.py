"""The controller's lock, and the calls that wait for its release.

Every loop reads and changes the controller's state under one lock, and none may hold it
across a call to the cloud or the API server: through an outage such a call waits or
retries for many seconds, and every other loop (binding pods, /status) would wait with it.
A call asked for while the lock is held (an event, a label, a Node deletion, a drain and
the termination after it, a bind) is queued and made by the same thread, under the same
pass deadline, once that thread has released the lock; asked for outside it, it is made
at once. A call that records its outcome takes the lock again to do so.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

log = logging.getLogger("nodemanager.controller")


class ControllerLock:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._local = threading.local()  # per thread: depth, the queued calls, whether they are being made

    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    def held(self) -> bool:
        """Whether the calling thread holds the lock."""
        return self._depth() > 0

    def acquire(self, timeout: float = -1) -> bool:
        if not (self._lock.acquire() if timeout == -1 else self._lock.acquire(timeout=timeout)):  # (a timeout's keyword costs: every loop takes the lock)
            return False
        self._local.depth = self._depth() + 1
        return True

    def release(self) -> None:
        self._local.depth = depth = self._depth() - 1
        self._lock.release()
        if depth == 0 and getattr(self._local, "queued", None):  # (most releases queued nothing: every loop takes the lock)
            self._make_queued()

    def __enter__(self) -> ControllerLock:
        self.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self.release()

    def after_release(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Make ``call`` now if this thread does not hold the lock, else once it releases it."""
        if not self.held():
            call(*args, **kwargs)
            return
        self._queued().append(partial(call, *args, **kwargs))

    def _queued(self) -> deque[Callable[[], Any]]:
        queued: deque[Callable[[], Any]] | None = getattr(self._local, "queued", None)
        if queued is None:
            queued = self._local.queued = deque()
        return queued

    def _make_queued(self) -> None:
        # A queued call that records its outcome takes and releases the lock again: the
        # calls it queues then join the list being made instead of nesting another pass.
        if getattr(self._local, "making", False):
            return
        self._local.making = True
        try:
            queued = self._queued()
            while queued:
                call = queued.popleft()
                try:
                    call()
                except Exception:
                    log.exception("a call made after releasing the controller failed")
        finally:
            self._local.making = False
