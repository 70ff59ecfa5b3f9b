"""Cases from kube-scheduler's own PrioritySort table, with their names:
kubernetes/kubernetes pkg/scheduler/framework/plugins/queuesort/priority_sort_test.go
(TestLess, at commit 008b3652959ca58af8be3fb5b6ecfe9ae7638282). kube compares the time a pod
entered the scheduling queue; nodemanager compares its creation time (what it can see of
a pod it did not queue itself)."""

from __future__ import annotations

import pytest
from builders import pod

from nodemanager.scheduling.interfaces import FrameworkHandle
from nodemanager.scheduling.plugins.queue_sort import PrioritySort

LOW, HIGH = 10, 100
T1, T2 = 1000.0, 1001.0

CASES = [
    # (name, p1 (priority, queued at), p2, kube's Less(p1, p2))
    ("p1.priority less than p2.priority", (LOW, T1), (HIGH, T1), False),
    ("p1.priority greater than p2.priority", (HIGH, T1), (LOW, T1), True),
    ("equal priority. p1 is added to schedulingQ earlier than p2", (HIGH, T1), (HIGH, T2), True),
    ("equal priority. p2 is added to schedulingQ earlier than p1", (HIGH, T2), (HIGH, T1), False),
]


@pytest.mark.parametrize(("p1", "p2", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_less(p1: tuple[int, float], p2: tuple[int, float], expected: bool) -> None:
    # p1's name sorts after p2's: a tie left to the name would make Less false.
    first, second = pod("b", priority=p1[0], created=p1[1]), pod("a", priority=p2[0], created=p2[1])
    assert PrioritySort(FrameworkHandle()).less(first, second) is expected
