"""The unavailability keeper: offerings that recently failed to boot, skipped until expiry.

Keyed by (instance type, capacity type, zone) so a spot shortage never blocks on-demand;
an instance type of ``*`` marks a whole zone (its subnets are out of addresses).
Entries are added only when absent: refreshing on every failure would extend an outage
forever, because the failures themselves keep coming while it lasts (Milpa's lesson).
"""

from __future__ import annotations

from dataclasses import dataclass

from nodemanager.model import CapacityType

OfferingKey = tuple[str, CapacityType, str]
ANY_TYPE = "*"  # as the instance type of a key: every type of that capacity type in that zone
DEFAULT_TTL = 180.0  # seconds; Karpenter's UnavailableOfferingsTTL


@dataclass(frozen=True, slots=True)
class UnavailableEntry:
    instance_type: str
    capacity_type: CapacityType
    zone: str
    until: float
    reason: str


class UnavailabilityKeeper:
    def __init__(self, ttl: float = DEFAULT_TTL) -> None:
        self.ttl = ttl
        self._entries: dict[OfferingKey, UnavailableEntry] = {}

    def mark(self, key: OfferingKey, now: float, reason: str = "") -> bool:
        """Mark ``key`` unavailable until ``now + ttl``; False if it already was (no extension)."""
        current = self._entries.get(key)
        if current is not None and current.until > now:
            return False
        self._entries[key] = UnavailableEntry(key[0], key[1], key[2], now + self.ttl, reason)
        return True

    def is_unavailable(self, key: OfferingKey, now: float) -> bool:
        return any((e := self._entries.get(k)) is not None and e.until > now for k in (key, (ANY_TYPE, key[1], key[2])))

    def sweep(self, now: float) -> None:
        for key in [k for k, e in self._entries.items() if e.until <= now]:
            del self._entries[key]

    def active(self, now: float) -> dict[OfferingKey, float]:
        """Offering -> until, for the scaler's snapshot."""
        return {k: e.until for k, e in sorted(self._entries.items()) if e.until > now}

    def dump(self, now: float) -> list[dict[str, object]]:
        """For the status endpoint."""
        return [
            {"instance_type": e.instance_type, "capacity_type": e.capacity_type.value, "zone": e.zone, "until": e.until, "reason": e.reason}
            for _, e in sorted(self._entries.items())
            if e.until > now
        ]
