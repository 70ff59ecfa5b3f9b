"""The colocation strategy: Koordinator's defaults, and per-pool overrides merged over them."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from enum import StrEnum


class CalculatePolicy(StrEnum):
    USAGE = "usage"
    REQUEST = "request"
    MAX_USAGE_REQUEST = "maxUsageRequest"


@dataclass(frozen=True)
class ColocationStrategy:
    enable: bool = False
    cpu_reclaim_threshold_percent: int = 60
    memory_reclaim_threshold_percent: int = 65
    cpu_calculate_policy: CalculatePolicy = CalculatePolicy.USAGE
    memory_calculate_policy: CalculatePolicy = CalculatePolicy.USAGE
    degrade_time_minutes: int = 15
    update_time_threshold_seconds: int = 300
    resource_diff_threshold: float = 0.1
    batch_cpu_threshold_percent: int | None = None  # optional cap on batch-cpu, % of capacity
    batch_memory_threshold_percent: int | None = None

    def merged(self, overrides: dict[str, object]) -> ColocationStrategy:
        """A copy with every override that is not None applied."""
        known = {f.name for f in fields(self)}
        values = {k: v for k, v in overrides.items() if k in known and v is not None}
        for key in ("cpu_calculate_policy", "memory_calculate_policy"):
            if key in values:
                values[key] = CalculatePolicy(values[key])
        return replace(self, **values)
