"""The API server's reachability, as every caller finds it: one warning per outage."""

from __future__ import annotations

import threading

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError

from nodemanager.clock import VirtualClock
from nodemanager.cluster.kubernetes.events import EventRecorder
from nodemanager.cluster.kubernetes.reachability import Reachability


def test_an_outage_is_one_warning_when_it_begins_and_one_when_it_ends(caplog):
    clock = VirtualClock(100.0)
    reach = Reachability(clock)
    assert reach.unreachable_for() == 0.0
    with caplog.at_level("DEBUG", logger="nodemanager.kubernetes"):
        for what in ("pods watch", "nodes watch", "lease nodemanager/nodemanager") * 20:
            reach.failed(what, "API server unreachable: ConnectionRefusedError")
            clock.advance(1.0)
        assert reach.unreachable_for() == 60.0
        reach.answered()
        reach.answered()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2
    assert warnings[0].startswith("API server unreachable (pods watch: ")
    assert warnings[1] == "API server answers again after 60s unreachable"
    assert reach.unreachable_for() == 0.0
    assert reach.describe() == {"unreachable_seconds": 0.0, "outages": 1, "failed_calls": 60}


def test_an_answer_to_a_call_made_before_the_outage_began_does_not_end_it(caplog) -> None:
    """A watch opened as the server went away answers after the first failure: the outage
    goes on (it was one outage said three times, "answers again after 0s" between)."""
    clock = VirtualClock(100.0)
    reach = Reachability(clock)
    in_flight = reach.asking()
    with caplog.at_level("WARNING", logger="nodemanager.kubernetes"):
        reach.failed("pods watch", "API server unreachable: ProtocolError")
        in_flight()
        clock.advance(5.0)
        reach.failed("nodes watch", "API server unreachable: ProtocolError")
        assert reach.unreachable_for() == 5.0
        asked_during = reach.asking()
        clock.advance(5.0)
        asked_during()  # a call made during the outage that is answered ends it
    assert [r.getMessage() for r in caplog.records] == [
        "API server unreachable (pods watch: API server unreachable: ProtocolError); retrying, and saying so again only when it answers",
        "API server answers again after 10s unreachable",
    ]
    assert reach.describe()["outages"] == 1


class _Unanswering:
    """A CoreV1Api whose writes get no answer (the server is gone), or a refusal."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse

    def create_namespaced_event(self, *_args, **_kwargs):
        if self.refuse:
            raise ApiException(status=403, reason="Forbidden")
        raise MaxRetryError(None, "/api/v1/namespaces/default/events", "connection refused")


def _post(recorder, n: int) -> None:
    node = {"kind": "Node", "name": "n1", "apiVersion": "v1"}
    for i in range(n):
        recorder._send("default", {"reason": f"R{i}", "involvedObject": node})


def test_events_lost_to_an_outage_are_the_outages_one_warning(caplog) -> None:
    """An event write the server does not answer counts toward the outage, told once by
    reachability; it says nothing of its own (it said "unreachable" a second time)."""
    reach = Reachability(VirtualClock(0.0))
    recorder = EventRecorder(_Unanswering(), VirtualClock(0.0), "me", threading.Event(), threaded=False, reachability=reach)  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="nodemanager.kubernetes"):
        reach.failed("pods watch", "API server unreachable: ProtocolError")
        _post(recorder, 3)
    assert [r.getMessage() for r in caplog.records] == [
        "API server unreachable (pods watch: API server unreachable: ProtocolError); retrying, and saying so again only when it answers"
    ]
    assert reach.failures == 4


def test_a_refused_event_write_is_still_warned_once(caplog) -> None:
    reach = Reachability(VirtualClock(0.0))
    recorder = EventRecorder(_Unanswering(refuse=True), VirtualClock(0.0), "me", threading.Event(), threaded=False, reachability=reach)  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="nodemanager.kubernetes"):
        _post(recorder, 3)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert warnings[0].startswith("event R0 on n1 not recorded (1 so far)")
    assert reach.failures == 0
