"""A loop pass's deadline, read by the cloud and API calls the pass makes.

The service runs every pass of a loop (but the price refresh) under ``pass_deadline``.
Through an outage a cloud call retries for up to half a minute; a pass that makes one call
per node would otherwise last for minutes, and its loop would not run again meanwhile
(the calls are made with the controller's lock released, so other loops do). Under a deadline, the AWS client
stops retrying when its next wait would end past it and makes no new call once it has
passed, and a Kubernetes API call waits for its reply no longer than what is left (but at
least ``MIN_API_WAIT``). Outside a pass (start-up, boots on their own threads, simulation)
there is no deadline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from nodemanager.clock import Clock

API_CONNECT = 5.0  # seconds to connect to the API server
API_READ = 30.0  # seconds an API call may wait for its reply, at most
MIN_API_WAIT = 1.0  # seconds an API call may wait even past the deadline (a healthy server answers in milliseconds)

_current: ContextVar[tuple[Clock, float] | None] = ContextVar("pass_deadline", default=None)


@contextmanager
def pass_deadline(clock: Clock, seconds: float) -> Iterator[None]:
    """Calls made inside have until ``seconds`` from now."""
    token = _current.set((clock, clock.now() + seconds))
    try:
        yield
    finally:
        _current.reset(token)


def remaining() -> float | None:
    """Seconds left to the current pass's deadline (negative once past); None outside a pass."""
    current = _current.get()
    if current is None:
        return None
    clock, at = current
    return at - clock.now()


def api_timeout() -> tuple[float, float]:
    """``_request_timeout`` for a Kubernetes API call: connect, then read within the deadline."""
    left = remaining()
    return API_CONNECT, API_READ if left is None else min(API_READ, max(MIN_API_WAIT, left))
