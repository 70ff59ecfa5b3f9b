"""Durations as provider.yaml and workload files write them: ``90s``, ``5m``, ``1h30m``,
``250ms``, or a number of seconds."""

from __future__ import annotations

import math
import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: object) -> float:
    """Seconds in ``value``; raises ValueError with the accepted forms."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 90s, 5m or 1h, got {value!r}")
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:
            raise ValueError(f"must be a finite duration, got a number of {len(str(value))} digits") from None
    elif isinstance(value, str):
        text = value.strip()
        if text.startswith("-"):
            raise ValueError(f"must not be negative, got {value!r}")
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        else:
            pos, seconds = 0, 0.0
            for m in _PART.finditer(text):
                if m.start() != pos:
                    break
                seconds += float(m[1]) * _UNITS[m[2]]
                pos = m.end()
            if pos != len(text) or not text:
                raise ValueError(f"expected a duration such as 90s, 5m or 1h, got {value!r}")
    else:
        raise ValueError(f"expected a duration such as 90s, 5m or 1h, got {value!r}")
    if not math.isfinite(seconds):
        raise ValueError(f"must be a finite duration, got {value!r}")
    if seconds < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    if seconds and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"
