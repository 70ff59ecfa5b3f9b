"""Karpenter's preferences for new nodes: a pod's preferred pod affinity and anti-affinity and
its own ScheduleAnyway spread constraints are requirements of the nodes booted for it at first.

Karpenter (``preferences.go``) schedules a pod with all of them as requirements and, while it
cannot be placed, relaxes one at a time and tries again: the preferred pod affinity terms,
heaviest first (equal weights in the pod's order); then the preferred anti-affinity terms
alike; then (after its preferred node affinity, ``steering``) the ScheduleAnyway constraints,
each time the first one left, the last taking its place. So replicas that prefer to keep
apart get nodes of their own, and a ScheduleAnyway zone spread spreads new nodes over zones,
where the packer alone would put them together. Existing nodes are kube-scheduler's
business: there preferences only score, and a pod they can take never gets this far.
Spread constraints the profile's defaults give a pod are not its own and stay soft.

``ladder`` gives the pod at each step, strictest first, the pod itself last; ``strictest``
the first. The steps are what the pod asks of a node: its labels, name and kind are its own."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from nodemanager.model import Pod
from nodemanager.model.interpod import AffinityTerm, PodAffinity, SpreadConstraint, WeightedTerm, WhenUnsatisfiable


def _own_soft(pod: Pod) -> list[SpreadConstraint]:
    return [c for c in pod.spread if not c.hard and not c.defaulted]


def preferring(pod: Pod) -> bool:
    """Whether the pod has a preference Karpenter makes a requirement at first."""
    a = pod.pod_affinity
    return bool(a.preferred or a.anti_preferred or _own_soft(pod))


def _heaviest_first(terms: tuple[WeightedTerm, ...]) -> list[AffinityTerm]:
    return [w.term for w in sorted(terms, key=lambda w: -w.weight)]  # (stable: equal weights keep their order)


def _steps(pod: Pod) -> Iterator[tuple[PodAffinity, tuple[SpreadConstraint, ...], bool]]:
    a = pod.pod_affinity
    affinity, anti = _heaviest_first(a.preferred), _heaviest_first(a.anti_preferred)
    soft = _own_soft(pod)
    hard = [dataclasses.replace(c, when_unsatisfiable=WhenUnsatisfiable.DO_NOT_SCHEDULE) for c in soft]
    made_hard = {id(c) for c in hard}
    spread = [hard[soft.index(c)] if c in soft else c for c in pod.spread]

    def step() -> tuple[PodAffinity, tuple[SpreadConstraint, ...], bool]:
        return PodAffinity(a.required + tuple(affinity), a.anti_required + tuple(anti)), tuple(spread), bool(affinity or anti)

    yield step()
    while affinity:
        affinity.pop(0)
        yield step()
    while anti:
        anti.pop(0)
        yield step()
    for _ in range(len(soft) - 1):  # (the last one's step is the pod itself)
        first = next(i for i, c in enumerate(spread) if id(c) in made_hard)
        spread[first] = spread[-1]
        spread.pop()
        yield step()


def ladder(pod: Pod) -> list[tuple[Pod, bool]]:
    """The pod as Karpenter tries it, strictest first, the pod itself last; each with
    whether its preferred node affinity is still kept (it is relaxed after the pod
    affinity preferences, before the spread ones). Each step is what the pod asks of a
    node: the preferences relaxed are dropped, the rest required; only the pod itself keeps
    them, as preferences that score."""
    if not preferring(pod):
        return [(pod, False)]
    steps = [(pod.constrained(pod_affinity=affinity, spread=spread), keep) for affinity, spread, keep in _steps(pod)]
    return [*steps, (pod, False)]


def strictest(pod: Pod) -> Pod:
    """The pod with every preference Karpenter honours at first made a requirement."""
    if not preferring(pod):
        return pod
    affinity, spread, _ = next(_steps(pod))
    return pod.constrained(pod_affinity=affinity, spread=spread)
