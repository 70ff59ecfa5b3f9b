"""The pydantic type for duration fields (parsing lives in ``nodemanager.durations``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

from nodemanager.durations import format_duration, parse_duration

#: A duration field: parsed to float seconds, dumped back as ``90s`` / ``5m``.
Duration = Annotated[float, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)]
