"""Kubernetes quantities: the one parser and formatter for every resource amount.

Everything downstream works in integers: CPU in milli-cores, memory and storage in
bytes, everything else as whole counts. Parsing is exact (``fractions.Fraction``), and
rounding up to the integer unit follows the API server (``Quantity.MilliValue`` and
``Quantity.Value`` both round up).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from nodemanager.errors import InvalidQuantity

#: The largest amount any resource may hold: Kubernetes stores quantities in int64.
MAX_AMOUNT = 2**63 - 1

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]+))?$"
)
# An exponent this large cannot describe any real resource; refusing it early keeps a
# hostile "1e999999999" from building a gigantic integer.
_MAX_EXPONENT = 40

#: Resources measured in bytes (formatted with binary suffixes).
BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})


def parse_quantity(value: object, field: str = "quantity") -> Fraction:
    """Parse a quantity string (or YAML number) exactly; ``field`` names it in errors."""
    if isinstance(value, bool):
        raise InvalidQuantity(field, value, "a quantity, not a boolean")
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidQuantity(field, value, "a finite number")
        text = repr(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise InvalidQuantity(field, value, "a quantity such as 500m, 2Gi or 1.5")
    match = _QUANTITY.match(text)
    if not match or not (match["int"] or match["frac"]):
        raise InvalidQuantity(field, value, "a quantity such as 500m, 2Gi or 1.5")
    digits = (match["int"] or "") + (match["frac"] or "")
    number = Fraction(int(digits), 10 ** len(match["frac"] or ""))
    if match["exp"] is not None:
        exponent = int(match["exp"])
        if abs(exponent) > _MAX_EXPONENT:
            raise InvalidQuantity(field, value, "an exponent within ±40")
        number *= Fraction(10) ** exponent
    else:
        suffix = match["suffix"] or ""
        number *= _BINARY.get(suffix) or _DECIMAL[suffix]
    return -number if match["sign"] == "-" else number


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def resource_amount(name: str, value: object, field: str | None = None) -> int:
    """The integer amount of resource ``name``: milli-cores for ``cpu``, else whole units.

    Negative and overflowing amounts are refused, as are fractional counts of
    resources that Kubernetes only accepts whole (extended resources, ``pods``).
    """
    if not isinstance(value, (str, int, float)):  # (refused below: a list is no key either)
        return _amount(name, value, field or name)
    key = (name, type(value), value)  # (the type too: 1 == 1.0 == True, and a bool is refused)
    known = _AMOUNTS.get(key)
    if known is not None:
        return known
    amount = _amount(name, value, field or name)
    if len(_AMOUNTS) >= _AMOUNTS_KEPT:
        _AMOUNTS.clear()
    _AMOUNTS[key] = amount
    return amount


# Amounts already worked out: a workload of a million pods spells a few dozen quantities.
_AMOUNTS: dict[tuple[str, type, object], int] = {}
_AMOUNTS_KEPT = 4096


def _amount(name: str, value: object, field: str) -> int:
    number = parse_quantity(value, field)
    if number < 0:
        raise InvalidQuantity(field, value, "a non-negative amount")
    if name == "cpu":
        amount = _ceil(number * 1000)
    else:
        is_byte_like = name in BYTE_RESOURCES or name.startswith("hugepages-")
        if not is_byte_like and number.denominator != 1:
            raise InvalidQuantity(field, value, f"a whole number of {name}")
        amount = _ceil(number)
    if amount > MAX_AMOUNT:
        raise InvalidQuantity(field, value, "an amount that fits in 64 bits")
    return amount


def format_quantity(name: str, amount: int) -> str:
    """The shortest exact Kubernetes spelling of an integer amount of ``name``.

    ``parse`` of the result gives back ``amount`` exactly (a tested round trip).
    """
    if name == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount == 0:
        return "0"
    if name in BYTE_RESOURCES or name.startswith("hugepages-"):
        for suffix, factor in reversed(_BINARY.items()):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    for suffix in ("E", "P", "T", "G", "M", "k"):
        factor = int(_DECIMAL[suffix])
        if amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)
