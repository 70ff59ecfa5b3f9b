"""The reflector against the API stub: list, watch, bookmarks, drops, 410 relists, pages."""

from __future__ import annotations

import contextlib
import logging

import pytest
import urllib3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kube_helpers import api_client
from kube_stub import KubeStub
from kubernetes import client

from nodemanager.cluster.base import EventType
from nodemanager.cluster.kubernetes.reflector import Change, Reflector

A, M, D = EventType.ADDED, EventType.MODIFIED, EventType.DELETED


def pods(stub: KubeStub, page_size: int = 500) -> Reflector:
    return Reflector("pods", client.CoreV1Api(api_client(stub)).list_pod_for_all_namespaces, page_size=page_size)


def watch(reflector: Reflector) -> list[tuple[EventType, str]]:
    seen: list[Change] = []
    reflector.watch(seen.extend)
    return [(c.type, c.key) for c in seen]


class Mirror:
    """What a consumer of the changes believes; it refuses impossible changes."""

    def __init__(self) -> None:
        self.objects: dict[str, str] = {}  # key -> resourceVersion

    def apply(self, changes: list[Change]) -> None:
        for c in changes:
            if c.type is A:
                assert c.key not in self.objects, f"ADDED twice: {c.key}"
            else:
                assert c.key in self.objects, f"{c.type} of an unknown object: {c.key}"
            if c.type is D:
                del self.objects[c.key]
            else:
                assert c.new is not None
                assert c.new["metadata"]["resourceVersion"] != self.objects.get(c.key), f"the same version twice: {c.key}"
                self.objects[c.key] = c.new["metadata"]["resourceVersion"]


def truth(stub: KubeStub) -> dict[str, str]:
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"]["resourceVersion"] for p in stub.items("pods")}


def test_first_watch_lists_then_watches_from_the_list_version(stub: KubeStub) -> None:
    for i in range(3):
        stub.create_pod(f"p{i}")
    reflector = pods(stub)
    assert watch(reflector) == [(A, "default/p0"), (A, "default/p1"), (A, "default/p2")]
    listed_at = reflector.resource_version
    stub.idle(5)  # the global version moves on without us
    stub.create_pod("p3")
    stub.set_pod_phase("default", "p0", "Running")
    assert watch(reflector) == [(A, "default/p3"), (M, "default/p0")]
    watches = [c for c in stub.calls if c.verb == "watch"]
    assert len(watches) == 1
    assert listed_at is not None
    # the watch asked for bookmarks, and its closing bookmark moved the version on
    assert int(reflector.resource_version or 0) > int(listed_at)


def test_a_pod_deleted_shows_as_one_deletion(stub: KubeStub) -> None:
    stub.create_pod("p0")
    reflector = pods(stub)
    watch(reflector)
    stub.delete_pod("default", "p0")  # MODIFIED (deletionTimestamp), then DELETED
    assert watch(reflector) == [(M, "default/p0"), (D, "default/p0")]
    assert reflector.objects == {}


def listed(stub: KubeStub, count: int) -> tuple[Reflector, Mirror]:
    """``count`` pods, listed by a new reflector into a new mirror."""
    for i in range(count):
        stub.create_pod(f"p{i}")
    reflector, mirror = pods(stub), Mirror()
    reflector.watch(mirror.apply)
    return reflector, mirror


def test_a_watch_that_drops_resumes_where_it_stopped(stub: KubeStub) -> None:
    reflector, mirror = listed(stub, 3)
    for i in range(3, 7):
        stub.create_pod(f"p{i}")
    stub.delete_pod("default", "p1")
    stub.drop_after = 2  # the connection dies after two events
    with pytest.raises(urllib3.exceptions.HTTPError):
        reflector.watch(mirror.apply)
    assert set(mirror.objects) == {"default/p0", "default/p1", "default/p2", "default/p3", "default/p4"}
    reflector.watch(mirror.apply)  # resumes from the last version it saw
    assert mirror.objects == truth(stub)
    assert reflector.relists == 1  # no relist was needed


def test_a_410_relists_and_reports_only_the_difference(stub: KubeStub) -> None:
    reflector, mirror = listed(stub, 4)
    # while the reflector is away: one added, one deleted, one changed, one added and deleted
    stub.create_pod("new")
    stub.delete_pod("default", "p1")
    stub.set_pod_phase("default", "p2", "Running")
    stub.create_pod("brief")
    stub.delete_pod("default", "brief")
    stub.expire_history()
    seen: list[Change] = []
    reflector.watch(lambda changes: (seen.extend(changes), mirror.apply(list(changes))))
    assert sorted((c.type, c.key) for c in seen) == [(A, "default/new"), (D, "default/p1"), (M, "default/p2")]
    assert mirror.objects == truth(stub)
    assert reflector.relists == 2
    # and the watch after the relist starts from the new list's version, with no 410
    stub.create_pod("after")
    assert watch(reflector) == [(A, "default/after")]


def test_a_paged_list_whose_continuation_expires_starts_over(stub: KubeStub) -> None:
    for i in range(7):
        stub.create_pod(f"p{i}")
    reflector = pods(stub, page_size=3)
    original = stub._list

    def expire_after_first_page(res, ns, query):  # type: ignore[no-untyped-def]
        if query.get("continue") and not getattr(expire_after_first_page, "done", False):
            expire_after_first_page.done = True  # type: ignore[attr-defined]
            stub.create_pod("late")  # written between the pages
            stub.expire_history()
        return original(res, ns, query)

    stub._list = expire_after_first_page  # type: ignore[method-assign]
    mirror = Mirror()
    reflector.watch(mirror.apply)
    assert mirror.objects == truth(stub)
    assert "default/late" in mirror.objects
    lists = [c for c in stub.calls if c.verb == "list"]
    assert len(lists) >= 4  # page 1, the expired page 2, then a full list again in 3 pages


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.integers(0, 9)),
        st.tuples(st.just("delete"), st.integers(0, 9)),
        st.tuples(st.just("run"), st.integers(0, 9)),
        st.tuples(st.just("watch"), st.just(0)),
        st.tuples(st.just("expire"), st.just(0)),
        st.tuples(st.just("drop"), st.integers(0, 3)),
    ),
    max_size=30,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_whatever_happens_the_changes_rebuild_the_servers_state(stub: KubeStub, ops: list[tuple[str, int]]) -> None:
    """Creates, deletes and changes interleaved with watches, expiries and dropped streams:
    the consumer never sees an impossible change, and ends with exactly the server's pods."""
    for key in list(truth(stub)):
        stub.delete_pod(*key.split("/"))
    reflector, mirror = pods(stub, page_size=4), Mirror()
    reflector.watch(mirror.apply)
    for op, n in ops:
        name = f"p{n}"
        exists = stub.get("pods", "default", name) is not None
        if op == "create" and not exists:
            stub.create_pod(name)
        elif op == "delete" and exists:
            stub.delete_pod("default", name)
        elif op == "run" and exists:
            stub.set_pod_phase("default", name, "Running")
        elif op == "expire":
            stub.expire_history()
        elif op == "drop":
            stub.drop_after = n
        elif op == "watch":
            with contextlib.suppress(urllib3.exceptions.HTTPError):  # a dropped stream
                reflector.watch(mirror.apply)
    stub.drop_after = None
    reflector.watch(mirror.apply)
    assert mirror.objects == truth(stub)


def test_watches_ask_the_server_to_end_them_after_five_to_ten_minutes(stub: KubeStub) -> None:
    """client-go's choice (§11): spread, so the watches of many clients do not end together."""
    reflector = pods(stub)
    for _ in range(20):
        watch(reflector)
    asked = stub.watch_timeouts
    assert len(asked) == 19  # the first call lists
    assert all(300 <= t <= 600 for t in asked)
    assert len(set(asked)) > 1


def test_an_idle_watch_gets_nothing_ends_quietly_and_resumes(stub: KubeStub, caplog: pytest.LogCaptureFixture) -> None:
    """§11: a watch on a kind that does not change gets no byte, not even a bookmark, until
    the server ends it; that is normal, not a failure."""
    caplog.set_level(logging.DEBUG, "nodemanager.kubernetes")
    reflector = Reflector("pods", client.CoreV1Api(api_client(stub)).list_pod_for_all_namespaces, watch_seconds=(1, 1))
    watch(reflector)
    listed_at = reflector.resource_version
    stub.hold_watches = True
    stub.idle(3)  # other kinds change; pods do not
    assert watch(reflector) == []  # held open for its whole second, then ended by the server
    assert reflector.resource_version == listed_at
    assert "watch ended by the server" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    stub.hold_watches = False
    stub.create_pod("p0")
    assert watch(reflector) == [(A, "default/p0")]  # resumed from where it was
