"""The configuration reference, written from the schema itself: one table per block of
``provider.yaml``, each key with its type, default and the description its field carries.
The docs site builds its configuration page from this, so the schema is the one place a
setting is described."""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, SecretStr, TypeAdapter
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from nodemanager.config.blocks import ByteQuantity, CpuQuantity
from nodemanager.config.durations import Duration
from nodemanager.config.schema import ProviderConfig

#: Annotated types shown by name rather than by the type under them.
_NAMED = ((Duration, "duration"), (CpuQuantity, "CPU quantity"), (ByteQuantity, "byte quantity"))


def blocks(model: type[BaseModel] = ProviderConfig, path: str = "") -> Iterator[tuple[str, type[BaseModel]]]:
    """Every block of the configuration, depth first: its key path and its model."""
    yield path, model
    for name, info in model.model_fields.items():
        inner = _model_of(info.annotation)
        if inner is not None:
            key = f"{path}.{info.alias or name}" if path else (info.alias or name)
            yield from blocks(inner, key + ("[]" if _is_list(info.annotation) else ""))


def markdown() -> str:
    """The reference as Markdown: a section per block, a table row per key."""
    out: list[str] = []
    for path, model in blocks():
        out.append(f"## `{path}`" if path else "## Top level")
        out.append("")
        if model.__doc__ and model is not ProviderConfig:
            out.append(" ".join(model.__doc__.split()).replace("``", "`"))
            out.append("")
        out.append("| Key | Type | Default | Meaning |")
        out.append("|---|---|---|---|")
        for name, info in model.model_fields.items():
            key = info.alias or name
            nested = _model_of(info.annotation)
            anchor = f"{path}.{key}" if path else key
            label = f"[`{key}`](#{_anchor(anchor + ('[]' if _is_list(info.annotation) else ''))})" if nested else f"`{key}`"
            default = "see below" if nested and not _is_list(info.annotation) and info.default is not None and not info.is_required() else _default(info)
            out.append(f"| {label} | {_type_name(info)} | {default} | {' '.join((info.description or '').split())} |")
        out.append("")
    return "\n".join(out)


def _anchor(path: str) -> str:
    """The id mkdocs' toc extension gives the heading ``## `path` ``."""
    return "".join(ch for ch in path.lower() if ch.isalnum() or ch in "-_")


def _members(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(a for a in typing.get_args(annotation) if a is not type(None))
    return (annotation,)


def _is_list(annotation: Any) -> bool:
    return any(typing.get_origin(a) is list for a in _members(annotation))


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for member in _members(annotation):
        inner = typing.get_args(member)[0] if typing.get_origin(member) is list else member
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            return inner
    return None


def _type_name(info: FieldInfo) -> str:
    carried = {id(m) for m in info.metadata}
    for member in _members(info.annotation):
        if typing.get_origin(member) is Annotated:
            carried |= {id(m) for m in typing.get_args(member)[1:]}
    for named, label in _NAMED:
        if {id(m) for m in typing.get_args(named)[1:]} <= carried:
            return label
    return " or ".join(_describe(m) for m in _members(info.annotation))


def _describe(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{v}`" for v in typing.get_args(annotation))
    if origin is list:
        return f"list of {_describe(typing.get_args(annotation)[0])}"
    if origin is dict:
        key, value = typing.get_args(annotation)
        return f"map of {_describe(key)} to {_describe(value)}"
    if origin is Annotated:
        return _describe(typing.get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "block"
    if annotation is SecretStr:
        return "string (secret)"
    return {str: "string", int: "integer", float: "number", bool: "boolean", object: "any"}.get(annotation, str(annotation))


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.default_factory() if info.default_factory is not None else info.default  # type: ignore[call-arg]
    if value is None or value is PydanticUndefined:
        return "none"
    whole = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    dumped = TypeAdapter(whole).dump_python(value, mode="json", by_alias=True, exclude_none=True)
    if isinstance(dumped, str):
        return f"`{dumped}`"
    return f"`{json.dumps(dumped, separators=(', ', ': '))}`".replace("|", "\\|")
