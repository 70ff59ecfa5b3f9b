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
