"""One pause shared by every caller of an endpoint that answers "slow down".

EC2's request limit is per account and region, not per call: when each boot, orphan listing
and heartbeat backs off on its own, the endpoint sees the sum of their retries, and calls per
minute rise under sustained throttling. A throttling answer therefore pauses every caller:
the pause doubles with each throttling answer to a call sent after the last pause ended
(from ``INITIAL`` up to ``CAP``) and is forgotten at the first success.

botocore's adaptive retry mode shares a token bucket the same way, but it waits inside
botocore, where neither a shutdown nor a loop pass's deadline can end the wait; this pause is
waited out with the caller's own stop-aware sleep, within the pass's deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from cloud.errors import DeadlinePassed
from nodemanager.deadline import remaining

INITIAL = 1.0  # seconds
CAP = 60.0


class SharedPause:
    def __init__(self, now: Callable[[], float], sleep: Callable[[float], object]) -> None:
        self._now = now
        self._sleep = sleep
        self._lock = threading.Lock()
        self._pause = 0.0
        self._until = 0.0
        self.throttled_answers = 0

    def wait(self, operation: str) -> None:
        """Wait out the pause, if one runs; a pause that ends past the pass's deadline
        refuses the call instead."""
        with self._lock:
            left = self._until - self._now()
        if left <= 0:
            return
        budget = remaining()
        if budget is not None and budget < left:
            raise DeadlinePassed(operation)
        self._sleep(left)

    def throttled(self, sent: float) -> None:
        """A throttling answer to a call sent at ``sent``."""
        with self._lock:
            self.throttled_answers += 1
            if sent < self._until - self._pause:
                return  # sent before the running pause began: that pause already counts it
            self._pause = min(CAP, self._pause * 2 if self._pause else INITIAL)
            self._until = self._now() + self._pause

    def succeeded(self) -> None:
        """The endpoint answers again: the pause ends for every caller."""
        with self._lock:
            self._pause = 0.0
            self._until = min(self._until, self._now())
