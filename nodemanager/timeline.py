"""What a simulation looked like over time, for ``simulate --plot``: live nodes by instance
type and by pool, pods waiting, and the fleet's cost rate against the bound's, sampled at
every decision (``interval``: the pool loop's). Memory stays bounded whatever the run's
length: past ``MAX_SAMPLES`` every other sample goes and the interval doubles."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

MAX_SAMPLES = 2000


@dataclass(frozen=True)
class Sample:
    at: float  # simulated seconds
    nodes: Counter[str]  # live nodes by instance type
    pools: Counter[str]  # live nodes by pool
    waiting: int  # pods waiting for a node
    cost_rate: float  # $/h of the instances billed now (running: not pending)
    bound_rate: float  # $/h the LP bound asks for the pods running now


@dataclass
class Timeline:
    interval: float = 60.0
    samples: list[Sample] = field(default_factory=list)

    def due(self, now: float) -> bool:
        return not self.samples or now >= self.samples[-1].at + self.interval

    def add(self, sample: Sample) -> None:
        self.samples.append(sample)
        if len(self.samples) > MAX_SAMPLES:
            self.samples = self.samples[::2]
            self.interval *= 2
