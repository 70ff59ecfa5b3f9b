"""Whether a consolidation is worth its evictions.

**Payback** (nodemanager's rule, on by default): a move saves its price difference for as
long as the nodes it removes would otherwise run, which is until the last of their pods
ends, at most the horizon. Its evictions cost each pod its share of its node's price for
the time it needs to be back where it was: its start-up, plus, for a pod that runs to
completion (a Job's), the work it had done, which it does again. How long such a pod
still has is estimated from the pods that ran to completion before it
(``controller/run_lengths.py``); a pod that runs for good (a Deployment's) counts the
horizon and loses only its start-up.

**Balanced** (Karpenter's ``consolidationPolicy: Balanced``, v1.14): a move goes ahead
when its share of the pool's cost saved is at least ``1/k`` of its share of the pool's
disruption. A node's disruption is 1 plus each of its pods' eviction cost (1, more for a
pod of higher priority, never below 0 nor above 10).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nodemanager.model import Pod

PRIORITY_SCALE = 2.0**25  # Karpenter's EvictionCost: priority / 2^25 added to 1


@dataclass(frozen=True, slots=True)
class Evicted:
    """What disruption knows of a pod a move would evict."""

    ran: float  # seconds it has run on its node
    left: float | None  # seconds it is expected to run still; None: for good (it does not run to completion)
    share: float  # $/h: its share of its node's price (the larger of its CPU and memory shares)
    node_price: float  # $/h: its node's price


@dataclass(frozen=True, slots=True)
class Payback:
    horizon: float  # seconds: the most a saving is counted for
    startup: float  # seconds each evicted pod takes to run again

    def weigh(self, savings: float, evicted: Sequence[Evicted]) -> tuple[float, float]:
        """What a move saving ``savings`` $/h gains in dollars, and what its evictions cost."""
        lasts = min(max((self.horizon if e.left is None else e.left for e in evicted), default=self.horizon), self.horizon)
        lost = sum(e.share * self.startup + (0.0 if e.left is None else e.node_price * e.ran) for e in evicted)
        return savings * lasts / 3600.0, lost / 3600.0

    def verdict(self, savings: float, evicted: Sequence[Evicted]) -> str:
        """Why the move does not pay ("" when it does)."""
        gained, lost = self.weigh(savings, evicted)
        if gained >= lost:
            return ""
        return f"saves ${gained:.4f} before its pods would end, its evictions cost ${lost:.4f} (work done again and start-up)"


def share_of(pod: Pod, cpu: int, memory: int, price: float) -> float:
    """``pod``'s share of a node of this allocatable and price, per hour."""
    fraction = max(pod.requests.cpu / cpu if cpu > 0 else 0.0, pod.requests.memory / memory if memory > 0 else 0.0)
    return price * min(fraction, 1.0)


def eviction_cost(pod: Pod) -> float:
    """Karpenter's eviction cost of a pod as its scoring counts it: 1 + priority / 2^25,
    within 0 and 10."""
    return min(max(1.0 + pod.priority / PRIORITY_SCALE, 0.0), 10.0)


def node_disruption(pods: Iterable[Pod]) -> float:
    """A node's disruption: 1 for the node, plus its pods' eviction costs."""
    return 1.0 + sum(eviction_cost(p) for p in pods)


def balanced_verdict(savings: float, disruption: float, pool_cost: float, pool_disruption: float, threshold: int) -> str:
    """Why a move fails Karpenter's Balanced score ("" when it passes)."""
    if savings <= 0 or pool_cost <= 0:
        return "saves nothing"
    score = (savings / pool_cost) / (disruption / pool_disruption)
    if score * threshold >= 1.0:
        return ""
    saved, disrupted = savings / pool_cost, disruption / pool_disruption
    return f"Balanced score {score:.2f} below 1/{threshold}: saves {saved:.1%} of the pool's cost for {disrupted:.1%} of its disruption"
