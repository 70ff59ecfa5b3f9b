"""Events go out paced and bounded: a burst of thousands of pods must not leave the API
server busy with their events long after they run."""

from __future__ import annotations

import itertools
import threading

from nodemanager.cluster.kubernetes.event_queue import EventQueue


class Clock:
    """Virtual time that a paced wait moves on."""

    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t


class Waits(threading.Event):
    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        self.clock.t += timeout or 0.0
        return False


def test_events_go_out_at_most_qps_a_second_in_order() -> None:
    clock = Clock()
    sent: list[tuple[float, str]] = []
    events = EventQueue(lambda ns, body: sent.append((clock.now(), body["reason"])), Waits(clock), qps=20, limit=100, now=clock.now)
    for i in range(10):
        events.put("default", {"reason": f"r{i}"})
    events.drain()
    assert [r for _, r in sent] == [f"r{i}" for i in range(10)]
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(sent)]
    assert min(gaps) >= 0.05 - 1e-9  # 20 a second
    events.close()


def test_past_the_limit_new_events_are_dropped_and_counted(caplog) -> None:
    release = threading.Event()
    sent: list[str] = []

    def blocked(namespace: str, body: dict) -> None:
        release.wait(10)
        sent.append(body["reason"])

    events = EventQueue(blocked, threading.Event(), qps=1000, limit=3)
    with caplog.at_level("WARNING", logger="nodemanager"):
        for i in range(6):
            events.put("default", {"reason": f"r{i}"})
    assert events.dropped == 3
    assert [r.getMessage() for r in caplog.records] == [
        "3 events are waiting to be posted: dropping new ones (1 so far); /status and the log say every decision"
    ]
    release.set()
    events.drain()
    assert sent == ["r0", "r1", "r2"]
    events.put("default", {"reason": "later"})  # room again
    events.drain()
    assert sent[-1] == "later"
    events.close()


def test_a_stop_ends_a_paced_wait_and_sends_nothing_more() -> None:
    stopped = threading.Event()
    sent: list[str] = []
    events = EventQueue(lambda ns, body: sent.append(body["reason"]), stopped, qps=0.001, limit=10)
    events.put("default", {"reason": "first"})
    events.put("default", {"reason": "second"})  # 1,000 s later, unless stopped
    threading.Timer(0.05, stopped.set).start()
    events.drain()
    assert sent == ["first"]
    events.close()
