"""Failed calls to a remote API (EC2, SQS, the Kubernetes API server), counted by operation
and error code where the call is made, and read by ``/metrics`` when it is scraped: the
callers need not know the metrics, nor the metrics the callers."""

from __future__ import annotations

import threading


class ErrorTally:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._errors: dict[tuple[str, str], int] = {}
        self._throttled: dict[str, int] = {}

    def failed(self, operation: str, code: str, *, throttled: bool = False) -> None:
        """A call of ``operation`` answered with error ``code`` (or could not be made:
        the exception's class name); ``throttled``: the answer was "slow down"."""
        with self._lock:
            self._errors[operation, code] = self._errors.get((operation, code), 0) + 1
            if throttled:
                self._throttled[operation] = self._throttled.get(operation, 0) + 1

    def errors(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._errors)

    def throttled(self) -> dict[str, int]:
        with self._lock:
            return dict(self._throttled)
