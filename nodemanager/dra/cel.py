"""The CEL environment of device selectors, on the official CEL runtime (cel-expr-python).

``device.driver``, ``device.attributes["domain"].name`` and ``device.capacity["domain"].name``;
unqualified names live under the driver's domain; a domain the device does not have is an
empty map (so ``has(...)`` guards work); ``quantity("40Gi")`` and ``semver("1.2.3")`` with
``compareTo``, ``isGreaterThan`` and ``isLessThan``. Quantities and versions travel as
tagged strings because the runtime's typed overloads reject opaque values. A compile
error, a runtime error or a result that is not a bool is a ``CelError``, never a non-match.
Expressions are compiled once and cached.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

from cel_expr_python import cel

from nodemanager.dra.model import Device, Version
from nodemanager.errors import NodeManagerError
from nodemanager.model.quantity import parse_quantity

_QUANTITY, _SEMVER = "\ue000q:", "\ue000v:"  # private-use tags no attribute string carries
_DOMAIN_KEY = re.compile(r"""(?:attributes|capacity)\s*\[\s*(['"])([^'"]+)\1\s*\]""")
_SEMVER_TEXT = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


class CelError(NodeManagerError):
    """A selector that cannot be compiled or evaluated: fatal for the allocation."""


def _quantity(text: str) -> str:
    try:
        return f"{_QUANTITY}{parse_quantity(text)}"
    except ValueError as exc:
        raise CelError(f"quantity({text!r}): {exc}") from None


def _semver_key(text: str) -> tuple[Any, ...]:
    match = _SEMVER_TEXT.match(text)
    if not match:
        raise CelError(f"semver({text!r}): not a semantic version")
    major, minor, patch, pre = match.groups()
    # A pre-release sorts before the release; its identifiers compare numerically or by text.
    pre_key = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ((2, 0, ""),)
    return (int(major), int(minor), int(patch), pre_key)


def _semver(text: str) -> str:
    _semver_key(text)
    return f"{_SEMVER}{text}"


def _compare(a: str, b: str) -> int:
    if a.startswith(_QUANTITY) and b.startswith(_QUANTITY):
        x, y = Fraction(a[len(_QUANTITY) :]), Fraction(b[len(_QUANTITY) :])
    elif a.startswith(_SEMVER) and b.startswith(_SEMVER):
        x, y = _semver_key(a[len(_SEMVER) :]), _semver_key(b[len(_SEMVER) :])  # type: ignore[assignment]
    else:
        raise CelError("compareTo needs two quantities or two semantic versions")
    return (x > y) - (x < y)


_S, _I, _B = cel.Type.STRING, cel.Type.INT, cel.Type.BOOL
_ENV = cel.NewEnv(
    variables={"device": cel.Type.Map(_S, cel.Type.DYN)},
    functions=[
        cel.FunctionDecl("quantity", [cel.Overload("quantity_string", _S, [_S], impl=_quantity)]),
        cel.FunctionDecl("semver", [cel.Overload("semver_string", _S, [_S], impl=_semver)]),
        cel.FunctionDecl("compareTo", [cel.Overload("string_compareTo_string", _I, [_S, _S], is_member=True, impl=_compare)]),
        cel.FunctionDecl("isGreaterThan", [cel.Overload("string_isGreaterThan_string", _B, [_S, _S], is_member=True, impl=lambda a, b: _compare(a, b) > 0)]),
        cel.FunctionDecl("isLessThan", [cel.Overload("string_isLessThan_string", _B, [_S, _S], is_member=True, impl=lambda a, b: _compare(a, b) < 0)]),
    ],
)


@lru_cache(maxsize=4096)
def compile_selector(expression: str) -> tuple[Any, tuple[str, ...]]:
    """The compiled expression and the domains it names (each is given at least an empty map)."""
    try:
        compiled = _ENV.compile(expression)
    except Exception as exc:  # the runtime raises its own types for syntax and type errors
        raise CelError(f"compile error: {exc}") from None
    return compiled, tuple(sorted({m.group(2) for m in _DOMAIN_KEY.finditer(expression)}))


def device_value(device: Device, driver: str, domains: tuple[str, ...]) -> dict[str, Any]:
    attributes: dict[str, dict[str, Any]] = {d: {} for d in domains}
    for name, value in device.attributes.items():
        domain, _, ident = name.rpartition("/") if "/" in name else (driver, "", name)
        attributes.setdefault(domain, {})[ident] = f"{_SEMVER}{value.text}" if isinstance(value, Version) else value
    capacity: dict[str, dict[str, Any]] = {d: {} for d in domains}
    for name, amount in device.capacity.items():
        domain, _, ident = name.rpartition("/") if "/" in name else (driver, "", name)
        capacity.setdefault(domain, {})[ident] = f"{_QUANTITY}{amount}"
    return {"driver": driver, "attributes": attributes, "capacity": capacity}


def evaluate(expression: str, device: Device, driver: str) -> bool:
    compiled, domains = compile_selector(expression)
    try:
        value = compiled.eval(data={"device": device_value(device, driver, domains)})
    except CelError:
        raise
    except Exception as exc:
        raise CelError(f"runtime error: {exc}") from None
    kind = value.type().name()
    if kind == "ERROR":
        raise CelError(f"runtime error: {value.value()}")
    if kind.upper() != "BOOL":
        raise CelError(f"expression must be a bool, got {kind}")
    return bool(value.plain_value())


def attribute_lookup(device: Device, driver: str, name: str) -> Any:
    """matchAttribute's lookup: the fully qualified name, else the bare id when the domain
    is the driver's. None when the device lacks it."""
    if name in device.attributes:
        return device.attributes[name]
    domain, _, ident = name.rpartition("/")
    if domain == driver and ident in device.attributes:
        return device.attributes[ident]
    return None
