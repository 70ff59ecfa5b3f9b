"""The offerings a pod may use, of any size: those whose node its node selector, required
node affinity, tolerations and placement annotations (type, capacity type, zone) accept,
judged by kube's own filters. Its inter-pod constraints, ports and volumes only narrow that
further, so what is found here is a superset: the cost bound prices pods from it, and
consolidation's quick test looks for one cheaper node that all the pods it moves may use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from nodemanager.model import CapacityPolicy, Pod
from nodemanager.scaler.pools import Candidate, PoolView, offering_node_info
from nodemanager.scheduling.cycle_state import CycleState
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.plugins.placement import CapacityTypeMatch, InstanceTypeMatch, NodeAffinity, TaintToleration, Zone

# kube's own filters for labels, taints and placement annotations; they read nothing but the
# pod and the node, so no framework handle is needed
_FILTERS = tuple(plugin(None) for plugin in (NodeAffinity, TaintToleration, InstanceTypeMatch, CapacityTypeMatch, Zone))  # type: ignore[arg-type]


def placement_key(pod: Pod) -> tuple:
    """What decides the offerings a pod may use (its requests aside)."""
    return (tuple(sorted(pod.node_selector.items())), pod.affinity, pod.tolerations, pod.instance_type, pod.capacity_policy, pod.zone)


class UsableOfferings:
    """The pools' offerings, and those each kind of pod (its ``placement_key``) may use."""

    def __init__(self, views: Sequence[PoolView], limit: int | None = None) -> None:
        self.offers = [(view.name, cand, offering_node_info(view, cand)) for view in views for cand in view.candidates]  # the nodes they would be
        self.found: dict[tuple, list[tuple[str, Candidate]]] = {}  # placement -> the (pool, offering)s it may use
        self.limit = limit  # placements kept at most (None: all, as a workload's are few); past it they are found again

    def of(self, pod: Pod) -> list[tuple[str, Candidate]]:
        """The (pool, offering)s ``pod`` may use, in the pools' order."""
        key = placement_key(pod)
        found = self.found.get(key)
        if found is None:
            if self.limit is not None and len(self.found) >= self.limit:
                self.found.clear()  # a long-lived owner meets ever new placements (pods pinned to one host)
            found = self.found[key] = _usable(pod, self.offers)
        return found

    def shared(self, pods: Iterable[Pod]) -> list[tuple[str, Candidate]]:
        """The (pool, offering)s every one of ``pods`` may use, in the pools' order (all of
        them for no pods)."""
        found = list({id(each): each for each in map(self.of, pods)}.values())  # each placement once: a node's pods share a few
        if not found:
            return [(pool, cand) for pool, cand, _ in self.offers]
        if len(found) == 1:
            return list(found[0])
        common = set.intersection(*({id(c) for _, c in each} for each in found))
        return [(pool, cand) for pool, cand in found[0] if id(cand) in common]


def _usable(pod: Pod, offers: Sequence[tuple[str, Candidate, NodeInfo]]) -> list[tuple[str, Candidate]]:
    """The (pool, offering)s the filters let the pod use. The filters read only some of an
    offering's node (the label keys the pod selects on, the pool's taints, and its type,
    capacity type or zone where the pod names one), so offerings alike in those are judged
    once: a pod selecting a pool label is judged once per pool, not once per offering."""
    selected = set(pod.node_selector) | {r.key for term in pod.affinity for r in term.requirements if not r.on_field}
    by_name = any(r.on_field for term in pod.affinity for r in term.requirements)
    state, verdicts, out = CycleState(), {}, []
    keys = sorted(selected)
    for pool, cand, info in offers:
        o = cand.offering
        seen = (
            pool,
            tuple(info.labels.get(k) for k in keys),
            info.name if by_name else "",
            o.instance_type if pod.instance_type else "",
            o.capacity_type if pod.capacity_policy is not CapacityPolicy.ANY else None,
            o.zone if pod.zone else "",
        )
        verdict = verdicts.get(seen)
        if verdict is None:
            verdict = verdicts[seen] = all(f.filter(state, pod, info) is None for f in _FILTERS)
        if verdict:
            out.append((pool, cand))
    return out
