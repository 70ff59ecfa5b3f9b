"""The node size floor (``pools[].nodeSizeFloor``): the vCPU a bin-pack pool's new nodes have
at least as its load grows, of the types suited to its pods' mix; and what of it a
computation surely holds, which consolidation's quick test counts on before it asks one."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Sequence

from nodemanager.config.schema import Pool
from nodemanager.model import LIVE_STATES, Pod
from nodemanager.model.instance_type import GIB
from nodemanager.model.labels import HOSTNAME
from nodemanager.scaler.pools import Candidate
from nodemanager.scaler.snapshot import ClusterSnapshot

# A type suits a pool's mix of pods when it holds them for at most this times the best (see
# suited). Not 1.0: a family's larger sizes hold pods for a little less (their reserved share
# is smaller), and at 1.0 only m5.24xlarge suited the README's day, which cost 1.58 x its bound.
MIX_SLACK = 1.1


def floor_vcpu(pool: Pool, requested_milli: int) -> float:
    """The floor's vCPU in a pool whose pods request ``requested_milli`` of CPU on its nodes:
    ``share`` of it, at most ``maxCPU`` (0: no floor)."""
    return min(pool.size_floor_share * requested_milli / 1000, pool.node_size_floor.max_cpu)


def suited(offerings: Sequence[Candidate], gib_per_cpu: float) -> list[Candidate]:
    """The offerings whose type holds pods asking ``gib_per_cpu`` (a pool's mix) for at most
    ``MIX_SLACK`` times the on-demand price per CPU of them of the type that holds them for
    least (0: all). Filled with such pods, a type with less memory per CPU runs out of
    memory and leaves CPU unused: booted for the 1:2 pods at hand and then filled with the
    pool's 1:2.7 mix, c5.4xlarge nodes left 40% of the fleet's CPU unused over the README's
    100,000-arrival day, where m5.4xlarge nodes leave 22% ("Disruption" in the README)."""
    if not gib_per_cpu or not offerings:
        return list(offerings)
    per_milli = gib_per_cpu * GIB / 1000  # bytes asked per millicore

    def cost(c: Candidate) -> float:
        held = min(c.allocatable.cpu, c.allocatable.memory / per_milli)  # millicores of such pods it holds
        return c.itype.on_demand_price / held if held > 0 else math.inf

    costs = [cost(c) for c in offerings]
    least = min(costs)
    return [c for c, each in zip(offerings, costs, strict=True) if each <= least * MIX_SLACK]


class PoolLoads:
    """What a lower bound of the floor reads of one snapshot, once (consolidation's quick test
    asks it of many candidates on the same snapshot): the CPU the pods on each live node
    request, by pool; and whether a placed pod keeps others away by a key other than the
    hostname (pods it repels are placed one at a time, or pinned to zones, by paths the
    floor does not hold). ``of_pods`` tells both of one node's pods (see ``pods_load``)."""

    def __init__(self, snapshot: ClusterSnapshot, of_pods: Callable[[tuple[Pod, ...]], tuple[int, bool]]) -> None:
        self.snapshot = snapshot
        self.jobs = JobSizes(snapshot.pods)
        placed = snapshot.by_node.placed
        self.nodes: dict[str, tuple[str, int]] = {}  # live node -> (its pool, the CPU its pods request)
        self.pools: Counter[str] = Counter()
        self.repels = False
        live = {n.name: n.pool for n in snapshot.nodes if n.state in LIVE_STATES}
        for name, on in placed.items():
            cpu, repels = of_pods(on)
            self.repels = self.repels or repels
            pool = live.get(name)
            if pool is not None:
                self.nodes[name] = (pool, cpu)
                self.pools[pool] += cpu

    def requested(self, pool: str, leaving: Collection[str]) -> int:
        """The CPU requested on the pool's live nodes but ``leaving``."""
        gone = 0
        for name in leaving:
            entry = self.nodes.get(name)
            if entry is not None and entry[0] == pool:
                gone += entry[1]
        return self.pools[pool] - gone


class JobSizes:
    """How many pods each Job has among ``pods``, counted when first asked: the floor lets
    go of the pods of a Job of several (``sizing.floor_holds``)."""

    def __init__(self, pods: Sequence[Pod]) -> None:
        self._pods = pods
        self._counts: Counter[tuple[str, str]] | None = None

    def of_several(self, pod: Pod) -> bool:
        """Whether ``pod`` is of a Job with more than one pod among them."""
        if pod.owner is None or not pod.of_job:
            return False
        if self._counts is None:
            self._counts = Counter((p.namespace, p.owner.name) for p in self._pods if p.owner is not None and p.of_job)
        return self._counts[pod.namespace, pod.owner.name] > 1


def pods_load(pods: tuple[Pod, ...]) -> tuple[int, bool]:
    """The CPU ``pods`` request as such (a computation counts no less: a batch pod's batch
    CPU only adds to it where no pool offers batch resources), and whether one of them keeps
    others away by a key other than the hostname."""
    return sum(p.requests.cpu for p in pods), any(t.topology_key != HOSTNAME for p in pods for t in p.pod_affinity.anti_required)
