"""A loop pass's deadline: what the cloud and API calls of a pass see."""

from __future__ import annotations

import pytest
from test_cli_service import DEMO, PROVIDER, free_port

from nodemanager.clock import VirtualClock
from nodemanager.deadline import API_CONNECT, API_READ, MIN_API_WAIT, api_timeout, pass_deadline, remaining


def test_api_calls_wait_no_longer_than_the_pass_has_left() -> None:
    clock = VirtualClock(100.0)
    assert remaining() is None
    assert api_timeout() == (API_CONNECT, API_READ)  # outside a pass: the usual bound
    with pass_deadline(clock, 12.0):
        assert remaining() == 12.0
        assert api_timeout() == (API_CONNECT, 12.0)
        clock.advance(11.5)
        assert api_timeout() == (API_CONNECT, MIN_API_WAIT)  # never less than a healthy server needs
        with pass_deadline(clock, 100.0):
            assert api_timeout() == (API_CONNECT, API_READ)
        clock.advance(5.0)
        assert remaining() == pytest.approx(-4.5)
    assert remaining() is None


def test_the_service_runs_passes_that_hold_the_controller_under_the_deadline(tmp_path) -> None:
    from nodemanager.config import parse_config
    from nodemanager.service import Service

    text = PROVIDER.read_text().replace("listen: 127.0.0.1:8080", f"listen: 127.0.0.1:{free_port()}")
    text = text.replace("workload: demo-workload.yaml", f"workload: {DEMO}")
    config, catalog = parse_config(text.replace("loops:\n", "loops:\n  passDeadline: 20s\n"), "provider.yaml", tmp_path)
    service = Service(config, catalog, "test")
    seen: dict[str, float | None] = {}
    for name in ("pool", "reaper", "prices"):  # the status server binds only when started
        setattr(service.controller, f"{name}_loop", lambda name=name: seen.__setitem__(name, remaining()))
        service._guarded(name)()
    assert seen["pool"] == pytest.approx(20.0, abs=1.0)
    assert seen["reaper"] == pytest.approx(20.0, abs=1.0)
    assert seen["prices"] is None  # outside the controller: bounded by its own retries
