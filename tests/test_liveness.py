"""``/healthz``: live while every loop completes its runs, 503 once one is stuck."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest
from test_cli_service import DEMO, PROVIDER, free_port, wait_for

from nodemanager.clock import VirtualClock
from nodemanager.liveness import RECOVERY_ALLOWANCE, Liveness


def liveness() -> tuple[VirtualClock, Liveness]:
    clock = VirtualClock(1000.0)
    return clock, Liveness(clock, {"pool": 7.0, "prices": 43200.0}, {"pool": 30.0})


def test_a_run_longer_than_two_intervals_and_its_deadline_is_stuck():
    clock, live = liveness()
    live.began("prices")
    live.ended("prices")
    live.began("pool")
    clock.advance(2 * 7 + 30)
    assert live.report() == (True, "ok\n")
    clock.advance(1)
    assert live.stuck() == {"pool": 45.0}
    assert live.report() == (False, "loop pool: no run completed for 45s\n")
    live.ended("pool")
    assert live.report()[0] is True


def test_a_loop_that_stops_being_run_is_stuck_too():
    """The scheduler's thread gone: no run begins, the last one's end ages."""
    clock, live = liveness()
    live.began("pool")
    live.ended("pool")
    live.began("prices")
    live.ended("prices")
    clock.advance(2 * 7 + 30 + 1)
    assert set(live.stuck()) == {"pool"}


def test_no_run_at_all_since_start_is_stuck():
    clock, live = liveness()
    clock.advance(2 * 7 + 30)
    assert live.stuck() == {}
    clock.advance(1)
    assert set(live.stuck()) == {"pool"}


def test_a_recovering_pool_run_has_the_recovery_allowance_on_top():
    """A large cluster's first listing may take minutes: the kubelet must not restart it."""
    clock, live = liveness()
    live.began("pool", recovering=True)
    clock.advance(2 * 7 + 30 + RECOVERY_ALLOWANCE)
    assert live.stuck() == {}
    clock.advance(1)
    assert set(live.stuck()) == {"pool"}
    live.ended("pool")
    live.began("pool")  # the next run acts: no allowance
    clock.advance(2 * 7 + 30 + 1)
    assert set(live.stuck()) == {"pool"}


def healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.mark.heavy
def test_the_service_answers_503_within_two_intervals_of_a_stuck_loop(tmp_path):
    """The heartbeat loop wedged in a call that never returns: /healthz was 200 for ever.
    Now 503 naming the loop within two intervals (and the pass deadline), 200 again once
    it returns."""
    from nodemanager.config import parse_config
    from nodemanager.service import Service

    port = free_port()
    text = PROVIDER.read_text().replace("listen: 127.0.0.1:8080", f"listen: 127.0.0.1:{port}")
    text = text.replace("workload: demo-workload.yaml", f"workload: {DEMO}").replace("heartbeat: 5s", "heartbeat: 0.3s")
    config, catalog = parse_config(text.replace("  orphanGC: 30s\n", "  orphanGC: 30s\n  passDeadline: 0.4s\n"), "provider.yaml", tmp_path)
    assert config.loops.heartbeat == 0.3
    assert config.loops.pass_deadline == 0.4
    service = Service(config, catalog, "test")
    entered, release = threading.Event(), threading.Event()
    original = service.controller.heartbeat_loop

    def wedged() -> None:
        entered.set()
        release.wait(30)
        original()

    service.start()
    try:
        wait_for(f"http://127.0.0.1:{port}/healthz", time.monotonic() + 20)
        assert healthz(port) == (200, "ok\n")
        service.controller.heartbeat_loop = wedged  # type: ignore[method-assign]
        assert entered.wait(10)
        began = time.monotonic()
        deadline = began + 10
        while healthz(port)[0] == 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        took = time.monotonic() - began
        code, text = healthz(port)
        assert code == 503
        assert text.startswith("loop heartbeat: no run completed for ")
        assert 0.5 < took < 2 * 0.3 + 0.4 + 1.0  # not at once, and soon after the limit
        release.set()
        deadline = time.monotonic() + 10
        while healthz(port)[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert healthz(port) == (200, "ok\n")
    finally:
        release.set()
        service.stop(grace=2)
