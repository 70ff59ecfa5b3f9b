"""Placement filters: where a pod may go, by labels, taints and its placement annotations."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence

from nodemanager.model import CapacityPolicy, CapacityType, Pod, TaintEffect
from nodemanager.model.added_affinity import parse_added_affinity
from nodemanager.model.labels import RESERVATION_ID, RESERVATION_TYPE
from nodemanager.model.ports import port_conflict
from nodemanager.model.reservation import ReservationKind
from nodemanager.model.selectors import HARD_EFFECTS, Operator, SelectorTerm, Taint, terms_match, untolerated
from nodemanager.scheduling.cycle_state import CycleState
from nodemanager.scheduling.interfaces import FilterPlugin, FrameworkHandle, ScorePlugin, SkipsUnasked
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.status import SKIP, Status, unresolvable, unschedulable

_PREFER = frozenset({TaintEffect.PREFER_NO_SCHEDULE})
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", TaintEffect.NO_SCHEDULE)
NAME_FIELD = "metadata.name"  # the one field matchFields selects on


AFFINITY_CONFLICT = "pod affinity terms conflict"  # kube's NodeAffinity errReasonConflict
ENFORCED = "node(s) didn't match scheduler-enforced node affinity"  # kube's errReasonEnforced


def _named_nodes(terms: tuple[SelectorTerm, ...]) -> set[str] | None:
    """The nodes required node affinity names (kube's NodeAffinity PreFilter): within a term,
    the intersection of its ``metadata.name In`` lists; across the terms, their union. None
    where some term names no node (any node may match it), or there are no terms."""
    if not terms:
        return None
    named: set[str] = set()
    for term in terms:
        in_term: set[str] | None = None
        for r in term.requirements:
            if r.on_field and r.key == NAME_FIELD and r.operator is Operator.IN:
                in_term = set(r.values) if in_term is None else in_term & set(r.values)
        if in_term is None:
            return None
        named |= in_term
    return named


class NodeAffinity(SkipsUnasked, FilterPlugin, ScorePlugin):
    """nodeSelector and required node affinity, against the node's labels; preferred node
    affinity scores a node by the weights of the preferences it matches, the highest 100
    (kube's NodeAffinity Score and NormalizeScore; PreScore skips a pod with none). Its
    arguments are kube's ``NodeAffinityArgs``: ``addedAffinity`` holds every pod to more
    required terms (a node failing them is refused first, with kube's reason) and adds its
    preferred ones to every pod's. (The scaler also joins the added required terms to each
    pod's own before planning, so new nodes meet them: ``AddedAffinity.on``.)"""

    name = "NodeAffinity"
    keeps_nothing = True

    def __init__(self, handle: FrameworkHandle, args: Mapping[str, object] | None = None) -> None:
        super().__init__(handle, args)
        self.added = parse_added_affinity(self.args)

    def asks(self, pod: Pod) -> bool:
        return bool(pod.node_selector or pod.affinity or self.added.required)

    def pre_filter(self, state: CycleState, pod: Pod) -> Status | None:
        """Skip for a pod that asks nothing of it; a pod whose every term names its nodes
        (``matchFields`` on ``metadata.name``, In) and names none in all of any term's lists
        can match no node: unschedulable at once, with kube's reason."""
        if not self.asks(pod):
            return SKIP
        if _named_nodes(pod.affinity) == set():
            return unresolvable(AFFINITY_CONFLICT, self.name)
        return None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        labels = node.labels
        if self.added.required and not terms_match(self.added.required, labels, node.name):
            return unresolvable(ENFORCED, self.name)
        for key, value in pod.node_selector.items():
            if labels.get(key) != value:
                return unresolvable(f"node(s) didn't match Pod's node selector {key}={value}", self.name)
        if not terms_match(pod.affinity, labels, node.name):
            # A pod whose every term kube's parser refuses matches no node: its reason is
            # what the user needs to mend the pod.
            refused = all(t.error for t in pod.affinity)
            return unresolvable("node(s) didn't match Pod's node affinity" + (f": {pod.affinity[0].error}" if refused else ""), self.name)
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
        """``filter``'s answer without a Status (and its message) for every node it refuses."""
        selector, affinity, added = tuple(pod.node_selector.items()), pod.affinity, self.added.required
        if not selector and not affinity and not added:
            return list(nodes)  # (most pods: every node matches)
        out = []
        for node in nodes:
            labels = node.labels
            if all(labels.get(key) == value for key, value in selector) and terms_match(affinity, labels, node.name) and terms_match(added, labels, node.name):
                out.append(node)
        return out

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        return None if pod.preferred_affinity or self.added.preferred else SKIP

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        preferred = (*pod.preferred_affinity, *self.added.preferred) if self.added.preferred else pod.preferred_affinity
        return sum(weight for weight, term in preferred if term.matches(node.labels, node.name)), None

    def score_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> tuple[dict[str, int], Status | None]:
        return {node.name: self.score(state, pod, node)[0] for node in nodes}, None

    def normalize_score(self, state: CycleState, pod: Pod, scores: dict[str, int]) -> Status | None:
        default_normalize(scores, reverse=False)
        return None


class TaintToleration(FilterPlugin, ScorePlugin):
    """Untolerated NoSchedule / NoExecute taints exclude a node; PreferNoSchedule ones lower its score."""

    name = "TaintToleration"
    keeps_nothing = True

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        bad = untolerated(node.taints, pod.tolerations, HARD_EFFECTS)
        if bad:
            return unresolvable(f"node(s) had untolerated taint {{{bad[0].key}: {bad[0].value}}}", self.name)
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
        untolerated_count = _by_taints(pod, HARD_EFFECTS)
        return [n for n in nodes if not n.taints or not untolerated_count(n.taints)]

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        return len(untolerated(node.taints, pod.tolerations, _PREFER)), None

    def score_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> tuple[dict[str, int], Status | None]:
        untolerated_count = _by_taints(pod, _PREFER)
        return {n.name: untolerated_count(n.taints) if n.taints else 0 for n in nodes}, None

    def normalize_score(self, state: CycleState, pod: Pod, scores: dict[str, int]) -> Status | None:
        default_normalize(scores, reverse=True)
        return None


def default_normalize(scores: dict[str, int], reverse: bool) -> None:
    """kube's helper.DefaultNormalizeScore: each score as a share of the highest, out of 100
    (all left at 0 when the highest is 0); ``reverse``, 100 less that (all 100 then)."""
    highest = max(scores.values(), default=0)
    if highest == 0:  # (most scores of most plugins: no node has what they count)
        if reverse:
            scores.update(dict.fromkeys(scores, 100))
        return
    for name, value in scores.items():
        share = value * 100 // highest
        scores[name] = 100 - share if reverse else share


def _by_taints(pod: Pod, effects: frozenset[TaintEffect]) -> Callable[[tuple[Taint, ...]], int]:
    """How many of a node's taints with ``effects`` the pod does not tolerate, worked out once
    per taint list for one look at many nodes (the nodes of a pool share their list)."""
    counted: dict[int, int] = {}  # by the list's id: the nodes hold their lists while this is used

    def count(taints: tuple[Taint, ...]) -> int:
        found = counted.get(id(taints))
        if found is None:
            found = counted[id(taints)] = len(untolerated(taints, pod.tolerations, effects))
        return found

    return count


class NodeUnschedulable(FilterPlugin):
    """A cordoned node (``spec.unschedulable``) takes only pods that tolerate the
    ``node.kubernetes.io/unschedulable:NoSchedule`` taint (DaemonSet pods do)."""

    name = "NodeUnschedulable"
    keeps_nothing = True

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if node.unschedulable and not any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return unresolvable("node(s) were unschedulable", self.name)
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
        return [n for n in nodes if not n.unschedulable or self.filter(state, pod, n) is None]


class NodeName(SkipsUnasked, FilterPlugin):
    """A pod that names its node (``spec.nodeName``) fits only there. The scaler never plans a
    pod that names one (it is bound already, or the API server will never schedule it), so
    this runs only where a pod is tested against a given node with its name kept."""

    name = "NodeName"
    keeps_nothing = True

    def asks(self, pod: Pod) -> bool:
        return bool(pod.node_name)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if pod.node_name and pod.node_name != node.name:
            return unresolvable("node(s) didn't match the requested node name", self.name)
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
        # (the profile runs NodeName at no PreFilter, as kube's does, so nothing Skips its Filter:
        # a pod that names no node passes everywhere)
        return [n for n in nodes if n.name == pod.node_name] if pod.node_name else list(nodes)


class NodePorts(SkipsUnasked, FilterPlugin):
    """Host ports: a pod's hostPorts must not conflict with those of the node's pods."""

    name = "NodePorts"
    keeps_nothing = True

    def asks(self, pod: Pod) -> bool:
        return bool(pod.host_ports)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if pod.host_ports and port_conflict(pod.host_ports, (p for other in node.pods.values() if other.key != pod.key for p in other.host_ports)):
            return unschedulable("node(s) didn't have free ports for the requested pod ports", self.name)
        return None


class InstanceTypeMatch(SkipsUnasked, FilterPlugin):
    """The pod's instance-type annotation, an exact name or a glob such as ``c5*``."""

    name = "InstanceTypeMatch"
    keeps_nothing = True

    def asks(self, pod: Pod) -> bool:
        return bool(pod.instance_type)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        wanted = pod.instance_type
        if wanted and not fnmatch.fnmatchcase(node.instance_type, wanted):
            return unresolvable(f"instance type {node.instance_type} does not match {wanted!r}", self.name)
        return None


class CapacityTypeMatch(SkipsUnasked, FilterPlugin):
    """Spot policy: ``spot`` needs a spot node, ``on-demand`` a non-spot one, ``any`` either.
    And a pod no controller makes again stays off a Capacity Block's nodes, which go when the
    block ends (it would be lost with them), unless its node selector or required node
    affinity asks for such nodes."""

    name = "CapacityType"
    keeps_nothing = True

    def asks(self, pod: Pod) -> bool:
        return pod.capacity_policy is not CapacityPolicy.ANY or pod.unreplaceable

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if node.labels.get(RESERVATION_TYPE) == ReservationKind.CAPACITY_BLOCK and pod.unreplaceable and not asks_for_reservations(pod):
            return unresolvable("pod has no controller to make it again, and a Capacity Block's nodes go when the block ends", self.name)
        policy = pod.capacity_policy
        if policy is CapacityPolicy.ANY:
            return None
        spot = node.capacity_type is CapacityType.SPOT
        if spot != (policy is CapacityPolicy.SPOT):
            want = CapacityType.SPOT if policy is CapacityPolicy.SPOT else CapacityType.ON_DEMAND
            return unresolvable(f"pod wants {want} capacity, node is {node.capacity_type}", self.name)
        return None


class Zone(SkipsUnasked, FilterPlugin):
    """The pod's zone annotation."""

    name = "Zone"
    keeps_nothing = True

    def asks(self, pod: Pod) -> bool:
        return bool(pod.zone)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if pod.zone and node.zone != pod.zone:
            return unresolvable(f"pod is pinned to zone {pod.zone}, node is in {node.zone}", self.name)
        return None


class CellIsolation(FilterPlugin):
    """A node of a ``cell`` pool holds exactly one pod."""

    name = "CellIsolation"
    keeps_nothing = True

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if node.cell and any(key != pod.key and not other.of_node for key, other in node.pods.items()):
            return unschedulable("cell node already holds a pod", self.name)
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
        # A cell node passes when the pods it is there for are none, or the one being filtered.
        key = pod.key
        return [n for n in nodes if not n.cell or (held := len(n.pods) - n.node_pods) == 0 or (held == 1 and key in n.pods)]


def asks_for_reservations(pod: Pod) -> bool:
    """The pod's node selector or a required node-affinity term names a reservation label."""
    keys = {RESERVATION_TYPE, RESERVATION_ID}
    return bool(keys & pod.node_selector.keys()) or any(r.key in keys for term in pod.affinity for r in term.requirements)
