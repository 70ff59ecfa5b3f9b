"""``PodTopology``: how many placed pods of a kind each topology domain holds.

PodTopologySpread and InterPodAffinity ask the same questions for every pod they filter
("how many pods matching this selector run in each zone?"); a scan of every node per
question makes placing N pods O(N²). The index answers each distinct question once by a
scan, then keeps the answer current as the scaler places and removes pods (``added`` and
``removed``), so each placement costs only the distinct questions asked so far.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any

from nodemanager.model import Pod
from nodemanager.model.interpod import AffinityTerm, LabelSelector
from nodemanager.scheduling.nodeinfo import NodeInfo

# Which nodes' pods a count includes (kube counts spread only over nodes eligible for the
# incoming pod): a key naming the rule, and the rule. None: every node.
NodeFilter = tuple[Hashable, Callable[[NodeInfo], bool]]
# (namespace, selector, topology key, filter key): pods of ``namespace`` (any when None) matching it.
SelectorKey = tuple[str | None, LabelSelector | None, str, Hashable]
# A placed pod's term and how much a pod it selects is drawn (+) or repelled (-) by the pod's
# domain; None for a required affinity term (weighed by the profile).
Leaning = tuple[AffinityTerm, int | None]


class PodTopology:
    def __init__(self, infos: Mapping[str, NodeInfo], namespace_labels: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.infos = infos
        self.namespace_labels = namespace_labels or {}
        self._selectors: dict[SelectorKey, Counter[str]] = {}
        self._filters: dict[Hashable, Callable[[NodeInfo], bool]] = {}
        self._terms: dict[tuple[AffinityTerm, ...], list[Counter[str]]] = {}  # pods matching all the terms, per term's key
        self._anti: dict[AffinityTerm, Counter[str]] | None = None  # placed pods' required anti-affinity: term -> domains
        self._leanings: dict[Leaning, Counter[str]] | None = None  # placed pods' terms that InterPodAffinity scores
        self._memo: dict[Any, Any] = {}  # answers derived from the existing nodes (see ``memo``)
        # Which questions a pod of given namespace and labels counts for, as of ``_asked``
        # questions: pods of one kind are placed by the thousand.
        self._asked = 0
        self._counted_for: dict[tuple, tuple[int, list[SelectorKey], list[tuple[AffinityTerm, ...]]]] = {}
        # Placed pods by kind (namespace and labels, all a selector sees): one of them, and how
        # many sit on each node. A new question is answered from the kinds, not every pod.
        self._kinds: dict[tuple, tuple[Pod, Counter[str]]] | None = None

    # -- questions ------------------------------------------------------------------------------
    def selector_counts(self, namespace: str | None, selector: LabelSelector | None, key: str, only: NodeFilter | None = None) -> Counter[str]:
        """Pods matching ``selector`` per value of ``key``, on the nodes ``only`` admits."""
        index = (namespace, selector, key, only[0] if only else None)
        found = self._selectors.get(index)
        if found is None:
            found = Counter()
            if only is not None:
                self._filters[only[0]] = only[1]
            if selector is not None:
                for info, n in self._placed(lambda p: selected(p, namespace, selector)):
                    value = info.labels.get(key)
                    if value is not None and (only is None or only[1](info)):
                        found[value] += n
            self._selectors[index] = found
            self._asked += 1
        return found

    def term_counts(self, terms: tuple[AffinityTerm, ...]) -> list[Counter[str]]:
        """For each term, pods matching *all* the terms per value of that term's key
        (InterPodAffinity counts a pod for required affinity only if it matches every term)."""
        found = self._terms.get(terms)
        if found is None:
            found = [Counter() for _ in terms]
            for info, n in self._placed(lambda p: all(t.selects(p.namespace, p.labels, self.namespace_labels) for t in terms)):
                for term, counter in zip(terms, found, strict=True):
                    value = info.labels.get(term.topology_key)
                    if value is not None:
                        counter[value] += n
            self._terms[terms] = found
            self._asked += 1
        return found

    def _placed(self, matches: Callable[[Pod], bool]) -> Iterator[tuple[NodeInfo, int]]:
        """(node, how many of its pods ``matches``), judged once per kind of pod."""
        if self._kinds is None:
            self._kinds = {}
            for info in self.infos.values():
                for p in info.pods.values():
                    self._note(p.kind, p, info.name, 1)
        for pod, nodes in self._kinds.values():
            if matches(pod):
                for name, n in nodes.items():
                    info = self.infos.get(name)
                    if n > 0 and info is not None:
                        yield info, n

    def _note(self, kind: tuple, pod: Pod, node: str, delta: int) -> None:
        assert self._kinds is not None
        entry = self._kinds.get(kind)
        if entry is None:
            entry = self._kinds[kind] = (pod, Counter())
        entry[1][node] += delta

    def anti_affinity(self) -> dict[AffinityTerm, Counter[str]]:
        """Placed pods' required anti-affinity terms, each with the domains it applies to
        (identical terms of many pods are one entry)."""
        if self._anti is None:
            self._anti = {}
            for info in self.infos.values():
                if info.anti_pods:  # (most nodes hold none: their pods are not looked at)
                    for p in info.pods.values():
                        self._count_anti(p, info, 1)
        return self._anti

    def repelling(self, pod: Pod) -> list[AffinityTerm]:
        """Placed pods' required anti-affinity terms that select ``pod`` (where they apply, it
        may not go: kube's symmetry)."""
        return [t for t, seen in self.anti_affinity().items() if any(seen.values()) and t.selects(pod.namespace, pod.labels, self.namespace_labels)]

    def leanings(self) -> dict[Leaning, Counter[str]]:
        """Placed pods' terms that draw or repel other pods in InterPodAffinity's score
        (kube's processExistingPod): their required affinity (weight None: the profile's
        ``hardPodAffinityWeight``), preferred affinity (+weight) and preferred anti-affinity
        (-weight), each with the domains it applies to, one entry for identical terms."""
        if self._leanings is None:
            self._leanings = {}
            for info in self.infos.values():
                if info.affinity_pods:
                    for p in info.pods.values():
                        self._count_leanings(p, info, 1)
        return self._leanings

    def memo(self, key: Any, compute: Any) -> Any:
        """An answer that depends only on the nodes that exist: they do not change while the
        scaler plans (the nodes it adds are possible domains, not existing ones)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    # -- changes --------------------------------------------------------------------------------
    def added(self, pod: Pod, info: NodeInfo) -> None:
        self._change(pod, info, 1)

    def removed(self, pod: Pod, info: NodeInfo) -> None:
        self._change(pod, info, -1)

    def _change(self, pod: Pod, info: NodeInfo, delta: int) -> None:
        kind = pod.kind
        if self._kinds is not None:
            self._note(kind, pod, info.name, delta)
        known = self._counted_for.get(kind)
        if known is None or known[0] != self._asked:
            selectors = [k for k in self._selectors if k[1] is not None and selected(pod, k[0], k[1])]
            terms = [t for t in self._terms if all(term.selects(pod.namespace, pod.labels, self.namespace_labels) for term in t)]
            known = self._counted_for[kind] = (self._asked, selectors, terms)
        labels = info.labels
        for index in known[1]:
            value = labels.get(index[2])
            if value is not None and (index[3] is None or self._filters[index[3]](info)):
                self._selectors[index][value] += delta
        for terms in known[2]:
            for term, counter in zip(terms, self._terms[terms], strict=True):
                value = labels.get(term.topology_key)
                if value is not None:
                    counter[value] += delta
        if self._anti is not None:
            self._count_anti(pod, info, delta)
        if self._leanings is not None and pod.pod_affinity:
            self._count_leanings(pod, info, delta)

    def _count_anti(self, pod: Pod, info: NodeInfo, delta: int) -> None:
        assert self._anti is not None
        for term in pod.pod_affinity.anti_required:
            value = info.labels.get(term.topology_key)
            if value is not None:
                self._anti.setdefault(term, Counter())[value] += delta

    def _count_leanings(self, pod: Pod, info: NodeInfo, delta: int) -> None:
        assert self._leanings is not None
        a = pod.pod_affinity
        leanings = [(t, None) for t in a.required]
        leanings += [(w.term, w.weight) for w in a.preferred]
        leanings += [(w.term, -w.weight) for w in a.anti_preferred]
        for leaning in leanings:
            value = info.labels.get(leaning[0].topology_key)
            if value is not None:
                self._leanings.setdefault(leaning, Counter())[value] += delta


def selected(pod: Pod, namespace: str | None, selector: LabelSelector) -> bool:
    """Whether a spread constraint counts the pod: of its namespace, matching, and not
    terminating (kube's countPodsMatchSelector bypasses those, kubernetes#87621)."""
    return not pod.terminating and (namespace is None or pod.namespace == namespace) and selector.matches(pod.labels)
