"""A workload's pods in arrival order, entries of many copies made only as they are reached:
the same pods in the same order as making every pod at once and sorting them."""

import itertools
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodemanager.cluster.arrivals import Arrival, Arrivals, Copies, in_name_order, renamed
from nodemanager.cluster.workload import WorkloadError, parse_workload
from nodemanager.model import Pod, PodKey, Resources

POD = "{containers: [{name: c, resources: {requests: {cpu: 100m}}}]}"


@given(st.integers(min_value=0, max_value=2_500))
def test_copies_are_numbered_in_the_order_of_their_names(count: int) -> None:
    assert list(in_name_order(count)) == sorted(range(count), key=str)


def _pod(name: str) -> Pod:
    return Pod("default", name, name, Resources.parse({"cpu": "100m"}))


entries = st.lists(st.tuples(st.sampled_from(["a", "a-1", "b", "web", "w"]), st.integers(1, 30), st.sampled_from([0.0, 5.0, 60.0])), max_size=8)


@given(entries)
def test_the_order_is_by_time_then_key_as_if_every_pod_were_made(drawn: list[tuple[str, int, float]]) -> None:
    parts: list[Arrival | Copies] = []
    every: list[Arrival] = []
    names = set()
    for name, count, at in drawn:
        made = [name] if count == 1 else [f"{name}-{n}" for n in range(count)]
        if name in names or names & set(made):
            continue
        names |= set(made)
        first = Arrival(at, 60.0, _pod(made[0]))
        parts.append(first if count == 1 else Copies(first, name, count))
        every += [Arrival(at, 60.0, first.pod if n == made[0] else renamed(first.pod, PodKey(f"default/{n}"))) for n in made]
    arrivals = Arrivals(parts)
    expected = sorted(every, key=lambda a: (a.at, a.pod.key))
    assert len(arrivals) == len(expected)
    assert [(a.at, a.pod.key, a.pod.uid) for a in arrivals] == [(a.at, a.pod.key, a.pod.uid) for a in expected]
    assert [a.pod.key for a in arrivals[:]] == [a.pod.key for a in expected]
    assert [(key, a.at) for key, a in arrivals.keyed()] == [(a.pod.key, a.at) for a in expected]  # (no pod made)
    for at in (-1.0, 0.0, 5.0, 60.0):
        late = [a for a in expected if a.at > at]
        count, first = arrivals.after(at)
        assert (count, first.pod.key if first else None) == (len(late), late[0].pod.key if late else None)


def test_a_million_copies_are_read_without_making_a_million_pods() -> None:
    tracemalloc.start()
    try:
        arrivals = parse_workload(f"pods: [{{name: task, count: 1000000, at: 10, duration: 60, pod: {POD}}}]", "big.yaml", 2_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(arrivals) == 1_000_000
    assert peak < 5_000_000  # bytes: a million pods made would be hundreds of MB
    first, second, *_ = head = list(itertools.islice(arrivals, 4))
    assert (first.pod.key, first.pod.uid, first.at, first.duration) == ("default/task-0", "default/task-0", 10.0, 60.0)
    assert [a.pod.name for a in head] == ["task-0", "task-1", "task-10", "task-100"]
    assert (second.pod.uid, second.pod.owner, second.pod.created_at) == ("default/task-1", first.pod.owner, 10.0)


@pytest.mark.parametrize("order", ["copies first", "copies last"])
def test_a_pod_an_entry_of_copies_makes_too_is_refused(order: str) -> None:
    copies, single = f"{{name: a, count: 12, pod: {POD}}}", f"{{name: a-11, pod: {POD}}}"
    text = f"pods: [{copies}, {single}]" if order == "copies first" else f"pods: [{single}, {copies}]"
    with pytest.raises(WorkloadError, match=r"pods\[1\]\.name: makes pod default/a-11, which pods\[0\] makes too"):
        parse_workload(text)
    for fine in ("a-12", "a-011", "a-1x"):  # not a copy's name: a-0 to a-11 only, no leading zeros
        assert len(parse_workload(f"pods: [{copies}, {{name: {fine}, pod: {POD}}}]")) == 13
