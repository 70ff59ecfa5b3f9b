"""The pydantic type for duration fields (parsing lives in ``nodemanager.durations``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

from nodemanager.durations import format_duration, parse_duration

MAX_SECONDS = 366 * 86400.0  # a year: a longer setting is a typo, and timers past it overflow


def parse_setting(value: object) -> float:
    """A duration setting: as ``parse_duration``, at most a year."""
    seconds = parse_duration(value)
    if seconds > MAX_SECONDS:
        raise ValueError(f"must be at most a year (366d), got {value!r}")
    return seconds


#: A duration field: parsed to float seconds, dumped back as ``90s`` / ``5m``.
Duration = Annotated[float, BeforeValidator(parse_setting), PlainSerializer(format_duration, return_type=str)]
