import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodemanager.errors import InvalidManifest, InvalidQuantity
from nodemanager.model import ZERO, Resources

names = st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"])
vectors = st.dictionaries(names, st.integers(min_value=0, max_value=10**12)).map(Resources)


def test_parse_and_access():
    r = Resources.parse({"cpu": "1.5", "memory": "2Gi", "nvidia.com/gpu": 1})
    assert (r.cpu, r.memory, r["nvidia.com/gpu"], r["pods"]) == (1500, 2 * 2**30, 1, 0)
    assert r.to_quantities() == {"cpu": "1500m", "memory": "2Gi", "nvidia.com/gpu": "1"}


def test_parse_errors_name_the_field():
    with pytest.raises(InvalidQuantity, match=r"spec\.overhead\.memory: .*'lots'"):
        Resources.parse({"memory": "lots"}, "spec.overhead")
    with pytest.raises(InvalidManifest, match=r"spec\.overhead"):
        Resources.parse(["cpu"], "spec.overhead")


def test_arithmetic_and_fit():
    a = Resources({"cpu": 500, "memory": 100})
    b = Resources({"cpu": 250, "nvidia.com/gpu": 1})
    assert a + b == Resources({"cpu": 750, "memory": 100, "nvidia.com/gpu": 1})
    assert (a + b) - b == a
    assert a.max(b) == Resources({"cpu": 500, "memory": 100, "nvidia.com/gpu": 1})
    assert b.fits(a + b)
    assert not b.fits(a)  # a has no GPU
    assert b.shortfall(a) == ["nvidia.com/gpu"]
    assert a * 3 == Resources({"cpu": 1500, "memory": 300})
    assert ZERO.fits(ZERO)


def test_zero_entries_do_not_change_identity():
    assert Resources({"cpu": 0, "memory": 5}) == Resources({"memory": 5})
    assert hash(Resources({"cpu": 0, "memory": 5})) == hash(Resources({"memory": 5}))


signed = st.dictionaries(names, st.integers(min_value=-5, max_value=5)).map(Resources)


@given(signed, signed)
def test_arithmetic_never_keeps_a_zero_and_equal_vectors_hash_alike(a, b):
    """Sums and differences leave out the amounts that come to zero (a sum without one keeps
    the dict it made): equal vectors compare, and hash, equal however they were made."""
    for made in (a + b, a - b, Resources.total([a, b]), (a - b) + b):
        assert 0 not in made._amounts.values()
        assert made == Resources(dict(made._amounts))
        assert hash(made) == hash(Resources(dict(made._amounts)))
    assert a - a == ZERO
    assert not (a - a)
    assert (a - b) + b == a
    assert hash((a - b) + b) == hash(a)


@given(vectors, vectors)
def test_sum_fits_both_and_subtraction_inverts(a, b):
    total = a + b
    assert a.fits(total)
    assert b.fits(total)
    assert total - b == a
    assert (a <= b) == a.fits(b)


@given(vectors, vectors, vectors)
def test_fit_is_transitive(a, b, c):
    if a.fits(b) and b.fits(c):
        assert a.fits(c)


@given(vectors, vectors, vectors)
def test_fits_within_is_fits_of_the_difference(request, capacity, used):
    assert request.fits_within(capacity, used) == request.fits(capacity - used)
