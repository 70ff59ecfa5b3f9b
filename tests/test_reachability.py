"""The API server's reachability, as every caller finds it: one warning per outage."""

from __future__ import annotations

from nodemanager.clock import VirtualClock
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
