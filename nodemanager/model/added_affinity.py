"""A scheduler profile's ``NodeAffinityArgs.addedAffinity``: node affinity kube-scheduler
applies to every pod on top of the pod's own (a node must satisfy both; the preferred terms
add to the pod's when nodes are scored)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from nodemanager.errors import InvalidManifest
from nodemanager.model.pod import Pod, parse_node_affinity
from nodemanager.model.selectors import SelectorTerm


@dataclass(frozen=True, slots=True)
class AddedAffinity:
    required: tuple[SelectorTerm, ...] = ()
    preferred: tuple[tuple[int, SelectorTerm], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.required or self.preferred)

    def on(self, pod: Pod) -> Pod:
        """``pod`` with the required terms joined to its own (each of its terms and each
        added one must both hold: their requirements together), as planning reads them."""
        if not self.required:
            return pod
        if not pod.affinity:
            return replace(pod, affinity=self.required)
        joined = tuple(_both(mine, added) for mine in pod.affinity for added in self.required)
        return replace(pod, affinity=joined)


def _both(a: SelectorTerm, b: SelectorTerm) -> SelectorTerm:
    if not a.requirements or not b.requirements:
        return SelectorTerm(())  # an empty term matches nothing, and so does any join with it
    return SelectorTerm(a.requirements + b.requirements, a.error or b.error)


def parse_added_affinity(args: Mapping[str, object]) -> AddedAffinity:
    """NodeAffinity's plugin arguments (kube's ``NodeAffinityArgs``): ``addedAffinity``,
    a NodeAffinity."""
    unknown = sorted(set(args) - {"addedAffinity"})
    if unknown:
        raise InvalidManifest(unknown[0], "unknown key (addedAffinity)")
    if args.get("addedAffinity") is None:
        return AddedAffinity()
    required, preferred = parse_node_affinity(args["addedAffinity"], "addedAffinity")
    return AddedAffinity(required, preferred)
