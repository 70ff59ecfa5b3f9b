"""What the boot cap left for later: the new nodes a capped plan decided but did not start.

With ``maxBootsPerLoop: 10`` and 9,000 pods waiting, every loop planned all 9,000 again to
start ten nodes. The next computation takes the rest from here instead, as long as nothing
they were planned from has changed: no other pods are left for new nodes (some may have
found room on the nodes started meanwhile), each with the same requests and constraints, the
same offerings are available and the same pools may boot.
Only plain pods are kept this way (no inter-pod constraints, claims, volumes, host ports or
pod group): where they may go depends on nothing but the node itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodemanager.model import Pod, PodKey
from nodemanager.scaler.pools import Candidate, PoolView


def plain(pod: Pod) -> bool:
    return not (pod.inter_pod or pod.claims or pod.volume_claims or pod.host_ports or pod.pod_group)


@dataclass(frozen=True)
class DeferredNode:
    pool: str
    candidate: Candidate
    accepted: tuple[Candidate, ...]
    pods: tuple[PodKey, ...]  # in the order they were placed


@dataclass(frozen=True)
class DeferredPlan:
    nodes: tuple[DeferredNode, ...]
    pending: dict[PodKey, tuple]  # the pods left for new nodes then -> their class key and requests
    views: list[PoolView]  # the pools' offerings it was planned on (the very list: a new one means a change)
    pools: tuple[str, ...]  # the pools that could boot
    unavailable: frozenset  # the offerings marked unavailable

    def matches(self, pending: dict[PodKey, tuple], views: list[PoolView], pools: tuple[str, ...], unavailable: frozenset) -> bool:
        """Planned from the same: no pod left for new nodes that was not then (some may have
        found room on nodes started since), each as it was then."""
        if views is not self.views or pools != self.pools or unavailable != self.unavailable:
            return False
        return all(self.pending.get(key) == value for key, value in pending.items())
