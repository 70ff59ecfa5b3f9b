"""``BootBackoff``: a pool whose boots keep failing for reasons no offering explains pauses.

Capacity and quota errors mark an offering unavailable (``UnavailabilityKeeper``), so the
scaler tries another. Other refusals (a subnet, image or security group the cloud no longer
knows, a bad launch template, an endpoint answering errors) fail every boot of the pool
alike: without a pause each loop would boot again and fail again, a retry storm. After each
such failure the pool's boots pause for ``BASE_SECONDS`` doubled per consecutive failure, at
most ``CAP_SECONDS``; one boot that succeeds ends it.
"""

from __future__ import annotations

from dataclasses import dataclass

BASE_SECONDS = 10.0
CAP_SECONDS = 300.0


@dataclass(frozen=True)
class Pause:
    failures: int  # consecutive failed boots
    until: float
    reason: str  # the last failure

    def describe(self) -> str:
        return f"boots paused until {self.until:.0f} after {self.failures} failed boot(s) in a row (last: {self.reason})"


class BootBackoff:
    def __init__(self) -> None:
        self._pauses: dict[str, Pause] = {}

    def failed(self, pool: str, now: float, reason: str) -> Pause:
        failures = (self._pauses[pool].failures if pool in self._pauses else 0) + 1
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
