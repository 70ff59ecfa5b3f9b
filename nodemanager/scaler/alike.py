"""Pods alike but for their labels.

A pod class is pods identical in everything a filter or score reads, labels included: a
pod's labels are what other pods' selectors see. Where no filter of the pod's own reads
its labels (no hard spread that counts the pod itself, no required affinity or
anti-affinity: ``interpod_plan.label_blind``) and no placed pod's anti-affinity selects
them, pods that differ only in labels go on the same nodes, so they are placed as one
group (new nodes) or one class (existing nodes, where no placed pod's affinity terms that
InterPodAffinity scores select them either). Karpenter's benchmark mix labels its pods with
seven values: seven times fewer groups and classes to place. Each pod still counts where
it lands, with its own labels, for the constraints of pods placed after it.
"""

from __future__ import annotations

from collections import defaultdict

from nodemanager.model import Pod, Resources
from nodemanager.model.interpod import AffinityTerm
from nodemanager.scaler import interpod_plan as plan
from nodemanager.scaler import preferences
from nodemanager.scaler.run import PodClass, Run


def blind(run: Run, pod: Pod, respect: bool, scored: bool = False) -> bool:
    """No filter reads the pod's own labels, no placed pod's anti-affinity selects it (nor,
    ``scored``, a placed pod's affinity term that InterPodAffinity scores), and it has no
    gang, claims or preferences ladder (``respect``) of its own."""
    if not plan.label_blind(pod) or pod.pod_group or pod.claims or (respect and preferences.preferring(pod)):
        return False
    if run.topology.repelling(pod):
        return False
    if not scored:
        return True
    if not run.memory.keeps_placed:  # (a plugin of another's may score by labels)
        return False
    namespaces = run.topology.namespace_labels
    return not any(any(seen.values()) and t.selects(pod.namespace, pod.labels, namespaces) for (t, _), seen in run.topology.leanings().items())


def key(run: Run, pod: Pod) -> tuple:
    """What groups pods alike but for their labels: ``Run.key`` without the labels."""
    return ("alike", run.key(pod, node_only=True), pod.spread, pod.pod_affinity, pod.namespace, pod.terminating)


def kinds(group: list[PodClass]) -> list[Pod]:
    """A pod of each set of labels in the group, the first class's first."""
    return list({c.rep.kind: c.rep for c in group if c.pods}.values())


def by_labels(run: Run, group: list[PodClass]) -> list[list[PodClass]]:
    """The group's classes by their own constraint groups (labels included)."""
    by_key: dict[tuple, list[PodClass]] = defaultdict(list)
    for c in group:
        by_key[run.key(c.rep)].append(c)
    return list(by_key.values())


def merged(group: list[PodClass]) -> list[PodClass]:
    """The group's classes of one request as one (they differ only in labels)."""
    by_request: dict[Resources, list[Pod]] = {}
    for c in group:
        by_request.setdefault(c.rep.requests, []).extend(c.pods)
    return [PodClass(pods) for pods in by_request.values()]


def merged_classes(run: Run, classes: list[PodClass], respect: bool) -> list[PodClass]:
    """``classes`` in order, those alike but for their labels (``blind``, scored) as one at
    the place of the first of them (a new class; the others are the same objects); not
    those that a term of a pod among ``classes`` selects (placed before the rest, it would
    tell them apart)."""
    namespaces = run.topology.namespace_labels
    terms = {t for c in classes if c.pods for t in _terms(c.rep)}
    alike: dict[int, tuple] = {}  # class (its id) -> what it is alike by
    members: dict[tuple, list[PodClass]] = defaultdict(list)
    mergeable: dict[tuple, bool] = {}  # Run.key (constraints and labels) -> whether such a class may merge
    for cls in classes:
        rep = cls.rep if cls.pods else None
        if rep is None:
            continue
        own = run.key(rep)
        if own not in mergeable:
            mergeable[own] = blind(run, rep, respect, scored=True) and not any(t.selects(rep.namespace, rep.labels, namespaces) for t in terms)
        if mergeable[own]:
            k = alike[id(cls)] = (key(run, rep), rep.requests)
            members[k].append(cls)
    out: list[PodClass] = []
    for cls in classes:
        k = alike.get(id(cls))
        if k is None or len(members[k]) == 1:
            out.append(cls)
        elif members[k][0] is cls:
            out.append(PodClass([p for c in members[k] for p in c.pods]))
    return out


def _terms(pod: Pod) -> list[AffinityTerm]:
    a = pod.pod_affinity
    return [*a.required, *a.anti_required, *(w.term for w in a.preferred), *(w.term for w in a.anti_preferred)]
