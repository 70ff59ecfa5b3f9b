"""``FleetTally``: the node records counted by pool and state, and the live fleet's hourly
price, kept as the records change.

The gauges show both after every pool pass, ``/status`` and a simulation's timeline read the
price. Counting every record whenever one changed state was a thirtieth of a large simulation;
the tally looks again only at the records the journal names (all of them when the prices
changed). The price is summed exactly rounded (``math.fsum``), so it does not depend on the
order in which records came and went.
"""

from __future__ import annotations

import math
from collections import Counter

from cloud.catalog import Catalog
from nodemanager.controller.records import NodeRecords
from nodemanager.model import LIVE_STATES, NodeState
from nodemanager.model.journal import Mark, changed_since


class FleetTally:
    def __init__(self, records: NodeRecords) -> None:
        self.records = records
        self.counts: Counter[tuple[str, NodeState]] = Counter()  # (pool, state) -> records (no zero counts)
        self._counted: dict[str, tuple[str, NodeState]] = {}  # name -> the (pool, state) it is counted in
        self._prices: dict[str, float] = {}  # name -> hourly price, live nodes only
        self._as_of: tuple[int, tuple[Mark, ...] | None, Catalog | None] = (0, None, None)  # (census, journal marks, catalog)
        self.version = 0  # moves whenever an update looked again (a reader compares it with the one it last showed)

    def update(self, catalog: Catalog) -> None:
        """Catch up with the records (and ``catalog``'s prices)."""
        census, marks, seen = self._as_of
        if census == self.records.census and seen is catalog:
            return
        changed, marks = changed_since((self.records.changes,), marks)
        if changed is None or seen is not catalog:
            changed = self._counted.keys() | self.records.keys()
        counts = self.counts
        for name in changed:
            if (old := self._counted.pop(name, None)) is not None:
                counts[old] -= 1
                if not counts[old]:
                    del counts[old]
            self._prices.pop(name, None)
            node = self.records.get(name)
            if node is not None:
                key = self._counted[name] = (node.pool, node.state)
                counts[key] += 1
                if node.state in LIVE_STATES:
                    self._prices[name] = catalog.hourly(node.instance_type, node.capacity_type, node.zone)
        self._as_of = (self.records.census, marks, catalog)
        self.version += 1

    def cost_per_hour(self) -> float:
        """The live fleet's hourly price, as of the last ``update``."""
        return math.fsum(self._prices.values())
