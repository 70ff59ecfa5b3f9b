from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodemanager.errors import InvalidQuantity
from nodemanager.model.quantity import MAX_AMOUNT, format_quantity, parse_quantity, resource_amount


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("500m", Fraction(1, 2), id="milli"),
        pytest.param("1.5", Fraction(3, 2), id="decimal"),
        pytest.param("2Gi", 2 * 2**30, id="binary"),
        pytest.param("1G", 10**9, id="decimal-suffix"),
        pytest.param("1e3", 1000, id="exponent"),
        pytest.param("1E-3", Fraction(1, 1000), id="negative-exponent"),
        pytest.param("100Ki", 102400, id="kibi"),
        pytest.param(".5", Fraction(1, 2), id="leading-dot"),
        pytest.param("+3", 3, id="plus-sign"),
        pytest.param("0.1", Fraction(1, 10), id="no-float-drift"),
        pytest.param(7, 7, id="yaml-int"),
        pytest.param(0.25, Fraction(1, 4), id="yaml-float"),
        pytest.param("250u", Fraction(1, 4000), id="micro"),
        pytest.param("3n", Fraction(3, 10**9), id="nano"),
        pytest.param("1Ei", 2**60, id="exbi"),
    ],
)
def test_parse_quantity_exact(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5 Gi", "Gi", "1Gb", "1e", "--1", "1e999", True, None, [1], float("nan"), float("inf")])
def test_parse_quantity_rejects_garbage_naming_field_and_value(text):
    with pytest.raises(InvalidQuantity) as err:
        parse_quantity(text, "spec.containers[0].resources.requests.cpu")
    assert "spec.containers[0].resources.requests.cpu" in str(err.value)
    assert repr(text) in str(err.value)


@pytest.mark.parametrize(
    ("name", "text", "amount"),
    [
        ("cpu", "500m", 500),
        ("cpu", "1.5", 1500),
        ("cpu", "100u", 1),  # rounds up to a milli-core, as MilliValue() does
        ("cpu", "2", 2000),
        ("memory", "1Gi", 2**30),
        ("memory", "1.5Gi", 3 * 2**29),
        ("memory", "100m", 1),  # a tenth of a byte rounds up to one byte
        ("ephemeral-storage", "20G", 20 * 10**9),
        ("nvidia.com/gpu", "2", 2),
        ("pods", "110", 110),
        ("hugepages-2Mi", "0.5Gi", 2**29),
    ],
)
def test_resource_amount_integer_units(name, text, amount):
    assert resource_amount(name, text) == amount


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("memory", "-1Gi", "non-negative"),
        ("cpu", "-100m", "non-negative"),
        ("nvidia.com/gpu", "1.5", "whole number"),
        ("pods", "500m", "whole number"),
        ("memory", "8Ei", "64 bits"),
        ("cpu", "9223372036854775807", "64 bits"),
    ],
)
def test_resource_amount_refuses(name, text, expected):
    with pytest.raises(InvalidQuantity, match=expected) as err:
        resource_amount(name, text, f"requests.{name}")
    assert err.value.field == f"requests.{name}"
    assert err.value.value == text


def test_largest_amount_is_accepted():
    assert resource_amount("memory", str(MAX_AMOUNT)) == MAX_AMOUNT


@pytest.mark.parametrize(
    ("name", "amount", "text"),
    [
        ("cpu", 500, "500m"),
        ("cpu", 2000, "2"),
        ("memory", 2**30, "1Gi"),
        ("memory", 1536 * 2**20, "1536Mi"),
        ("memory", 10**9, "1G"),
        ("memory", 1001, "1001"),
        ("pods", 110, "110"),
        ("nvidia.com/gpu", 0, "0"),
    ],
)
def test_format_quantity(name, amount, text):
    assert format_quantity(name, amount) == text


@given(st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "ephemeral-storage"]), st.integers(min_value=0, max_value=MAX_AMOUNT))
def test_format_then_parse_round_trips(name, amount):
    assert resource_amount(name, format_quantity(name, amount)) == amount


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(["", "k", "M", "G", "Ki", "Mi", "Gi", "m"]))
def test_parse_scales_exactly_by_suffix(number, suffix):
    factor = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "m": Fraction(1, 1000)}[suffix]
    assert parse_quantity(f"{number}{suffix}") == number * factor


@given(st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False))
def test_decimal_cpu_has_no_float_drift(value):
    assert resource_amount("cpu", str(value)) == int(value * 1000)
