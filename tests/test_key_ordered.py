"""The cache's pod stores keep their pods in key order whatever sequence of assignments,
deletions and pops made them, as a sort of the dict would list them."""

import dataclasses

import pytest
from builders import pod
from hypothesis import given
from hypothesis import strategies as st

from nodemanager.cache.key_ordered import KeyOrdered
from nodemanager.model import Pod

KEYS = ["default/a", "default/b", "default/b2", "jobs/a", "default/aa"]
change = st.tuples(st.sampled_from(["set", "del", "pop"]), st.sampled_from(KEYS), st.sampled_from(["100m", "1", "2"]), st.booleans())


def as_pod(key: str, cpu: str, claims: bool = False) -> Pod:
    namespace, name = key.split("/")
    return dataclasses.replace(pod(name, cpu=cpu), namespace=namespace, claims=(f"{namespace}/gpu",) if claims else ())


@given(st.lists(change, max_size=40))
def test_pods_come_out_in_key_order(changes: list[tuple[str, str, str, bool]]) -> None:
    """... and the store counts the pods that use a resource claim."""
    store: KeyOrdered[Pod] = KeyOrdered(lambda p: p)
    plain: dict[str, Pod] = {}
    for op, key, cpu, claims in changes:
        if op == "set":
            store[key] = plain[key] = as_pod(key, cpu, claims)
        elif op == "del" and key in plain:
            del store[key], plain[key]
        elif op == "pop":
            assert store.pop(key, None) == plain.pop(key, None)
    assert dict(store) == plain
    assert store.pods() == tuple(p for _, p in sorted(plain.items()))
    assert store.claimed == sum(1 for p in plain.values() if p.claims)


def test_a_missing_key_raises_and_other_mutators_are_refused() -> None:
    store: KeyOrdered[Pod] = KeyOrdered(lambda p: p)
    store["default/a"] = as_pod("default/a", "1")
    with pytest.raises(KeyError):
        store.pop("default/zz")
    for call in (store.clear, lambda: store.update({}), lambda: store.setdefault("default/b", as_pod("default/b", "1"))):
        with pytest.raises(TypeError, match="kept in key order"):
            call()
    assert store.pods() == (as_pod("default/a", "1"),)
