"""What a simulation looked like over time, for ``simulate --plot``: live nodes by instance
type and by pool, pods waiting, and the fleet's cost rate against the bound's, sampled at
every decision (``interval``: the pool loop's). Memory stays bounded whatever the run's
length: past ``MAX_SAMPLES`` every other sample goes and the interval doubles.

The bound's rate is the pods running at the dual prices of the run's bound (``priced``): at
every instant no more than those pods' own bound (weak duality), and over the run it adds up
to the report's bound. One LP for the run, where an LP for each sample took longer than the
run itself."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

MAX_SAMPLES = 2000


@dataclass(frozen=True)
class Sample:
    at: float  # simulated seconds
    nodes: Counter[str]  # live nodes by instance type
    pools: Counter[str]  # live nodes by pool
    waiting: int  # pods waiting for a node
    cost_rate: float  # $/h of the instances billed now (running: not pending)
    bound_rate: float  # $/h: the pods running now at the prices of the run's bound (see ``running``)
    running: Counter[int] = field(default_factory=Counter)  # the pods running now, by ``CostBound.shape_of``: priced once the run's bound is known


@dataclass
class Timeline:
    interval: float = 60.0
    samples: list[Sample] = field(default_factory=list)

    def due(self, now: float) -> bool:
        return not self.samples or now >= self.samples[-1].at + self.interval

    def priced(self, prices: Mapping[int, float]) -> None:
        """Each sample's bound rate: its pods running at ``prices`` ($ an hour of each)."""
        self.samples = [replace(s, bound_rate=sum(n * prices.get(shape, 0.0) for shape, n in s.running.items())) for s in self.samples]

    def add(self, sample: Sample) -> None:
        self.samples.append(sample)
        if len(self.samples) > MAX_SAMPLES:
            self.samples = self.samples[::2]
            self.interval *= 2
