"""The order in which constraint groups get new nodes: kube's queue order wherever a later
group could take from an earlier one a domain it needs, the packer's order everywhere else.

kube-scheduler and Karpenter place pods one after another in queue order (priority, then
age), so an earlier pod chooses first. New nodes pack better with the most constrained
groups first (pods that need a node to themselves, then other inter-pod groups) and the rest
filling the room they leave. The two orders differ only where it matters between groups
that can contend for a domain a new node cannot add, a zone or any other label but the
hostname (a new node is always a fresh hostname):

* the later group's required anti-affinity on such a key selects the earlier group's pods
  (where it lands, the earlier group may no longer go: symmetry), or the earlier group's
  selects the later's;
* the earlier group's hard spread on such a key counts the later group's pods (they raise a
  domain's count, and the earlier group may then exceed its skew there).

Between such groups the earlier in the queue goes first; otherwise the packer's order holds
(a topological order of those pairs, taken in the packer's order).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from nodemanager.model import Pod
from nodemanager.model.interpod import AffinityTerm, LabelSelector, SpreadConstraint
from nodemanager.model.labels import HOSTNAME
from nodemanager.model.selectors import Operator

G = TypeVar("G")


def _anti(pod: Pod) -> list[AffinityTerm]:
    return [t for t in pod.pod_affinity.anti_required if t.topology_key != HOSTNAME]


def _spread(pod: Pod) -> list[SpreadConstraint]:
    return [c for c in pod.spread if c.hard and c.topology_key != HOSTNAME and c.selector is not None]


def _candidates(selector: LabelSelector | None, index: Mapping[tuple[str, str], list[int]], everyone: range) -> Iterable[int]:
    """The groups a selector may select: those with a label its first ``In`` requirement
    names (most selectors have one), else every group; none for no selector."""
    if selector is None:
        return ()
    for r in selector.requirements:
        if r.operator is Operator.IN:
            return {j for v in r.values for j in index.get((r.key, v), ())}
    return everyone


def _contending(groups: Sequence[Sequence[Pod]], namespace_labels: Mapping[str, Mapping[str, str]]) -> set[tuple[int, int]]:
    """Pairs (earlier, later) where placing the later can take from the earlier a domain no
    new node can add: either's required anti-affinity on such a key selects the other, or
    the earlier's hard spread on such a key counts the later. Each group is given by a pod
    of each set of labels it holds (the first also for the constraints they share). Found
    through an index of the groups' labels, so that thousands of groups cost about as much
    as their terms."""
    index: dict[tuple[str, str], list[int]] = defaultdict(list)
    for j, kinds in enumerate(groups):
        for item in dict.fromkeys(item for q in kinds for item in q.labels.items()):
            index[item].append(j)
    everyone = range(len(groups))
    pairs = set()
    for i, kinds in enumerate(groups):
        p = kinds[0]
        for t in _anti(p):
            for j in _candidates(t.selector, index, everyone):
                if j != i and any(t.selects(q.namespace, q.labels, namespace_labels) for q in groups[j]):
                    pairs.add((min(i, j), max(i, j)))
        for c in _spread(p):
            for j in _candidates(c.selector, index, everyone):
                if j > i and any(q.namespace == p.namespace and c.selector.matches(q.labels) for q in groups[j]):
                    pairs.add((i, j))
    return pairs


def packing_order(
    queue: Sequence[G], kinds: Callable[[G], Sequence[Pod]], rank: Callable[[Pod], int], namespace_labels: Mapping[str, Mapping[str, str]]
) -> list[G]:
    """``queue`` (groups in queue order, each given by ``kinds``: a pod of each set of labels
    it holds, the first for its constraints) in the packer's order, ``(priority, rank,
    queue)``, except that a group never goes before an earlier one it contends with."""
    groups = [kinds(g) for g in queue]
    pods = [k[0] for k in groups]
    after: list[list[int]] = [[] for _ in queue]  # i -> the later groups that wait for i
    waits = [0] * len(queue)
    for i, j in sorted(_contending(groups, namespace_labels)):
        after[i].append(j)
        waits[j] += 1
    heap = [(-p.priority, rank(p), i) for i, p in enumerate(pods) if not waits[i]]
    heapq.heapify(heap)
    out = []
    while heap:
        *_, i = heapq.heappop(heap)
        out.append(queue[i])
        for j in after[i]:
            waits[j] -= 1
            if not waits[j]:
                heapq.heappush(heap, (-pods[j].priority, rank(pods[j]), j))
    return out
