"""``BootBackoff``: a pool whose boots keep failing for reasons no offering explains pauses.

Capacity and quota errors mark an offering unavailable (``UnavailabilityKeeper``), so the
scaler tries another. Other refusals (a subnet, image or security group the cloud no longer
knows, a bad launch template, an endpoint answering errors) fail every boot of the pool
alike: without a pause each loop would boot again and fail again, a retry storm. After each
such failure the pool's boots pause for ``BASE_SECONDS`` doubled per consecutive failure, at
most ``CAP_SECONDS``; one boot that succeeds ends it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

BASE_SECONDS = 10.0
CAP_SECONDS = 300.0


@dataclass(frozen=True)
class Pause:
    failures: int  # consecutive rounds of boots that failed
    until: float
    reason: str  # the last failure

    def describe(self) -> str:
        until = datetime.fromtimestamp(self.until, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"boots paused until {until} after {self.failures} failed round(s) of boots in a row (last: {self.reason})"


class BootBackoff:
    def __init__(self) -> None:
        self._pauses: dict[str, Pause] = {}

    def failed(self, pool: str, now: float, reason: str) -> Pause:
        """A boot failed. One that fails while the pool is paused was started before the
        pause (boots of one round fail together): it does not make the pause longer."""
        last = self._pauses.get(pool)
        if last is not None and now < last.until:
            pause = replace(last, reason=reason)
        else:
            failures = (last.failures if last else 0) + 1
            pause = Pause(failures, now + min(CAP_SECONDS, BASE_SECONDS * 2 ** (failures - 1)), reason)
        self._pauses[pool] = pause
        return pause

    def succeeded(self, pool: str) -> None:
        self._pauses.pop(pool, None)

    def active(self, now: float) -> dict[str, Pause]:
        """Pools whose boots are paused now."""
        return {pool: p for pool, p in self._pauses.items() if p.until > now}

    def get(self, pool: str) -> Pause | None:
        return self._pauses.get(pool)
