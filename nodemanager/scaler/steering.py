"""Karpenter's preferences for new nodes: a pod's node affinity steers the node booted for it.

Karpenter (``preferences.go``) makes the first of a pod's required node-affinity terms and its
heaviest preferred term requirements of the node it launches, and relaxes them one at a time
while no NodePool can launch such a node: the required terms in order (the last is kept),
then the preferred terms by weight, heaviest first (equal weights in the pod's order), then
none. ``first_met`` picks the first of those that an offering meets. (Existing nodes are
kube-scheduler's business: there preferences only score.)"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from nodemanager.model import Pod
from nodemanager.model.selectors import SelectorTerm

# (required term, preferred term) a new node must meet; None: no such term
Steer = tuple[SelectorTerm | None, SelectorTerm | None]


def steered(pod: Pod) -> bool:
    """Whether the pod's node affinity could steer a new node beyond what the filters say."""
    return len(pod.affinity) > 1 or bool(pod.preferred_affinity)


def tries(pod: Pod) -> Iterator[Steer]:
    """Karpenter's requirements for the pod's new node, strictest first."""
    required: tuple[SelectorTerm | None, ...] = pod.affinity or (None,)
    preferred = [term for _, term in sorted(pod.preferred_affinity, key=lambda weighted: -weighted[0])]
    for term in required[:-1]:
        yield term, preferred[0] if preferred else None
    for term in preferred:
        yield required[-1], term
    yield required[-1], None


def meets(steer: Steer, labels: Mapping[str, str], node_name: str = "") -> bool:
    return all(term is None or term.matches(labels, node_name) for term in steer)


def first_met(pod: Pod, offered: Iterable[Mapping[str, str]]) -> Steer | None:
    """The strictest of ``tries`` that one of the offered nodes' labels meet; None if none
    does (nothing is offered) or if that is no more than the filters ask (a single required
    term, or none, and no preference met)."""
    offered = list(offered)
    found = next((steer for steer in tries(pod) if any(meets(steer, labels) for labels in offered)), None)
    return None if found is not None and found[1] is None and len(pod.affinity) < 2 else found
