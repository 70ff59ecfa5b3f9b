"""``ByIdentity``: a value derived from an object is made once per object, never shared
with an equal object, and the memo stays bounded."""

from __future__ import annotations

import weakref

from nodemanager.scaler.by_identity import ByIdentity


def test_made_once_per_object_and_never_for_an_equal_one() -> None:
    made: list[tuple[int, ...]] = []

    def total(xs: tuple[int, ...]) -> int:
        made.append(xs)
        return sum(xs)

    memo: ByIdentity[tuple[int, ...], int] = ByIdentity(limit=8)
    first, equal = tuple(range(5)), tuple(range(5))
    assert memo.get(first, total) == 10
    assert memo.get(first, total) == 10
    assert made == [first]
    assert memo.get(equal, lambda xs: -1) == -1  # another object: its own value, even when equal
    assert memo.get(first, total) == 10


class _Offerings(list):  # a list that can be referred to weakly
    pass


def test_an_entry_keeps_its_object_so_its_id_is_never_another_objects() -> None:
    memo: ByIdentity[_Offerings, int] = ByIdentity(limit=8)
    offerings = _Offerings([1, 2])
    memo.get(offerings, len)
    alive = weakref.ref(offerings)
    del offerings
    assert alive() is not None  # the memo holds it: no later object can take its id
    assert memo.get(alive(), lambda _: -1) == 2


def test_the_memo_starts_again_past_its_limit() -> None:
    memo: ByIdentity[tuple[int], int] = ByIdentity(limit=3)
    kept = [(i,) for i in range(10)]
    for key in kept:
        memo.get(key, lambda k: k[0])
        assert len(memo) <= 3
    assert memo.get(kept[-1], lambda k: -1) == 9  # the last one made is still kept
