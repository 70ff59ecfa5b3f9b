"""``Subnets``: the subnets nodes launch into, by zone (the configured ids, a tag selector, or
the default VPC's), looked up again after a few minutes; a subnet that ran out of addresses
is passed over for a while, and a zone whose every subnet did is out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cloud.aws.settings import AwsSettings

CACHE_SECONDS = 300.0  # looked up again after five minutes
EXHAUSTED_SUBNET_SECONDS = 180.0


class Subnets:
    def __init__(self, settings: AwsSettings, now: Callable[[], float], checked: Callable[..., Any]) -> None:
        self.settings = settings
        self.now = now
        self._checked = checked  # AwsCloud._checked: one EC2 call, its error translated
        self._found: tuple[float, dict[str, list[str]]] | None = None
        self._exhausted: dict[str, float] = {}  # subnet -> until when it is passed over

    def by_zone(self) -> dict[str, list[str]]:
        """Every subnet, by zone (ids sorted)."""
        if self._found is not None and self.now() - self._found[0] < CACHE_SECONDS:
            return self._found[1]
        if self.settings.subnets:
            params: dict[str, Any] = {"SubnetIds": list(self.settings.subnets)}
        elif self.settings.subnet_selector:
            params = {"Filters": [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(self.settings.subnet_selector.items())]}
        else:
            params = {"Filters": [{"Name": "default-for-az", "Values": ["true"]}]}
        by_zone: dict[str, list[str]] = {}
        for subnet in self._checked("describe_subnets", **params).get("Subnets", []):
            by_zone.setdefault(subnet["AvailabilityZone"], []).append(subnet["SubnetId"])
        self._found = (self.now(), {z: sorted(ids) for z, ids in by_zone.items()})
        return self._found[1]

    def usable(self, zone: str) -> list[str]:
        """The zone's subnets not passed over now."""
        now = self.now()
        return [s for s in self.by_zone().get(zone, []) if self._exhausted.get(s, 0.0) <= now]

    def ran_out(self, subnet: str) -> None:
        self._exhausted[subnet] = self.now() + EXHAUSTED_SUBNET_SECONDS

    def forget(self) -> None:
        """Look them up again at the next launch (one the cloud no longer knows was named)."""
        self._found = None
