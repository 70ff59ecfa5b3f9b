"""Whether the API server answers, as every caller that talks to it finds: the watches, the
lease, the writes.

An outage is one warning when it begins and one line when it ends, not a warning per retry
of every watch and every lease renewal (13 watches and a lease every 2 s made a page of
warnings a minute). ``unreachable_for`` tells ``/readyz`` how long it has lasted."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kubernetes.client.exceptions import ApiException

from nodemanager.clock import Clock
from nodemanager.cluster.kubernetes.errors import api_message
from nodemanager.tally import ErrorTally

log = logging.getLogger("nodemanager.kubernetes")

# /readyz turns unready once the API server has not answered for this long: short enough for
# a Service or a probe to notice a replica cut off from its cluster, long enough that one
# dropped watch or one slow renewal does not flap it.
UNREADY_AFTER = 30.0


class Reachability:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None  # when the first failure of the current outage came
        self.outages = 0
        self.failures = 0  # calls that found it unreachable, in all
        self.errors = ErrorTally()  # every failed request by method and status (connect.api_client counts them)

    def asking(self) -> Callable[[], None]:
        """For a call about to be made: what to call once it is answered. An answer to a call
        made before the current outage began (in flight as the server went away) does not
        end the outage."""
        asked = self.outages
        return lambda: self.answered(asked)

    def answered(self, asked: int | None = None) -> None:
        """The server answered a call; ``asked``: ``outages`` when the call was made."""
        with self._lock:
            if asked is not None and asked < self.outages:
                return
            since, self._since = self._since, None
        if since is not None:
            log.warning("API server answers again after %.0fs unreachable", self.clock.now() - since)

    def failed(self, what: str, problem: str) -> None:
        with self._lock:
            first = self._since is None
            self.failures += 1
            if first:
                self._since = self.clock.now()
                self.outages += 1
        if first:
            log.warning("API server unreachable (%s: %s); retrying, and saying so again only when it answers", what, problem)
        else:
            log.debug("API server still unreachable (%s: %s)", what, problem)

    def unanswered(self, what: str, exc: BaseException) -> bool:
        """A call that failed: True (and the outage counted, told once) when the server did
        not answer at all; False for an answer that refused it, which is the caller's to tell."""
        if isinstance(exc, ApiException):
            return False
        self.failed(what, api_message(exc))
        return True

    def unreachable_for(self) -> float:
        with self._lock:
            since = self._since
        return 0.0 if since is None else max(0.0, self.clock.now() - since)

    def describe(self) -> dict[str, object]:
        return {"unreachable_seconds": round(self.unreachable_for(), 1), "outages": self.outages, "failed_calls": self.failures}
