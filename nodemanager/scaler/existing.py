"""Steps 1 and 2 of a computation: the picture of the existing nodes (with the waiting pods
an earlier computation bound to them, kept where they still pass), then waiting pods placed
on existing nodes through the framework, Ready nodes first, by score, as kube-scheduler
searches a large cluster. ``fill`` also serves later steps: pods onto nodes this run decided
to boot that have room."""

from __future__ import annotations

import functools
import heapq
import operator
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator

from nodemanager.model import Pod, PodKey, PodPhase
from nodemanager.model.labels import ZONE
from nodemanager.model.pod import as_regular
from nodemanager.model.pod_owners import SpreadDefaults
from nodemanager.scaler import alike, preferences
from nodemanager.scaler import interpod_plan as plan
from nodemanager.scaler.live_nodes import READINESS
from nodemanager.scaler.room import RoomIndex
from nodemanager.scaler.run import PodClass, Run
from nodemanager.scaler.steering import Steer, meets
from nodemanager.scheduling import CycleState, NodeInfo
from nodemanager.scheduling.plugins.queue_sort import priority_key
from nodemanager.scheduling.sampling import feasible_nodes_to_find


def rebuild(run: Run) -> list[Pod]:
    kept = run.memory.pod_keys
    if len(kept) > 2 * len(run.snapshot.pods) + 1024:  # keys of pods gone (or replaced) are dropped
        live = {id(p) for p in run.snapshot.pods}
        run.memory.pod_keys = {k: v for k, v in kept.items() if k[0] in live}
    settings = run.memory.settings
    regular = not settings.colocation  # no pool offers batch resources: batch requests are ordinary cpu and memory
    defaults = SpreadDefaults(settings.spread_defaults, run.snapshot.pod_selecting)
    as_given = settings.plans_pods_as_given  # (the profile changes no pod: most)
    # A consolidation's what-if keeps the preferences of the pods it moves as Karpenter's
    # does: required, everywhere (it would boot a node for them rather than relax them), so
    # what provisioning kept apart is not put together again.
    strict = settings.respect_preferences and run.snapshot.one_new_node
    grouped = run.snapshot.by_node  # the placed pods by node (batch ones as the pictures see them: see NodePictures)
    waiting: dict[PodKey, Pod] = {}
    for pod in grouped.waiting:
        if pod.phase is PodPhase.PENDING and not pod.of_node and pod.key not in run.excluded:
            planned = run.memory.regular_pods.get(pod, as_regular) if regular and pod.batch else pod
            if not as_given:
                planned = run.memory.planned_pods.get(planned, settings.as_planned)
            if strict:
                planned = run.memory.strict_pods.get(planned, preferences.strictest)
            waiting[pod.key] = defaults.apply(planned)
    run.waiting.update(run.excluded)
    pictures = run.memory.pictures  # allowing for these DaemonSets: views_for saw them first
    pictures.forget_all_but(run.snapshot.nodes)
    live = run.memory.live
    live.follow(pictures, run.snapshot, run.view_by_name)
    run.infos.update(live.infos)  # (copied in C: the run changes its own)
    run.node_state.update(live.states)
    run.zone_load.update(live.zones)
    # Earlier bindings are kept while their pod still waits and still passes every
    # filter on that node (it may have been resized, tainted or filled meanwhile).
    carried = [(pod, name) for name, node in live.binding.items() for k in node.bound_pods if (pod := waiting.get(k)) is not None]
    kept = keep_placed(run, carried)
    prefiltered: dict[tuple, CycleState | None] = {}  # a class's PreFilter answer (see _shares_prefilter)
    # Where a pod of such a class passed every filter, another of it passes them too as
    # long as the node has room for it (as ``fill_class`` counts): pods placed meanwhile
    # change only the node's room, but for one keeping others away (answers start again).
    passed: set[tuple[tuple, str]] = set()
    for pod, name in sorted(carried, key=lambda pn: (priority_key(pn[0]), pn[1])):
        if pod.key in run.bindings:
            continue
        if name in kept:  # on the picture as the last computation placed it (passing as it did then), where topology counts find it
            run.bindings[pod.key] = name
            run.changed.add(name)
            continue
        shared = _shares_prefilter(pod)
        cls = (run.key(pod), pod.requests) if shared else None
        if cls in prefiltered:
            state = prefiltered[cls]
        else:
            state = CycleState()
            state = state if run.fw.run_pre_filter_plugins(state, pod).is_success() else None
            if shared:
                prefiltered[cls] = state
        if state is None:
            continue
        info = run.infos[name]
        if (cls, name) in passed:
            fits = info.fit_count(info.fit_request(pod), 1) > 0
        else:
            fits = run.fw.run_filter_plugins(state, pod, info).is_success()
            if fits and shared:
                passed.add((cls, name))
        if fits:
            run.place(pod, info, CycleState() if shared else state)
            if pod.pod_affinity.anti_required:  # other pods' PreFilter counts it (symmetry)
                prefiltered.clear()
                passed.clear()
    return [p for k, p in waiting.items() if k not in run.bindings]


def keep_placed(run: Run, carried: list[tuple[Pod, str]]) -> set[str]:
    """The existing nodes whose pictures keep the pods the last computation placed on
    them (``NodePictures.placed``); the others' are taken off. A node keeps them when
    they are exactly the pods carried there now (each placed again otherwise: taken off,
    filtered, placed, at every decision while its node boots). They pass again as they
    did: the node and its own pods are unchanged, and every carried pod is one whose
    PreFilter, Filter, Reserve and Permit look only at itself and the node (no
    inter-pod constraints, host ports, claims, volumes or gang; ``_shares_prefilter``),
    with no placed pod whose required anti-affinity could refuse it, and every plugin
    one of ours (``keeps_placed``). Their order does not matter: requests only add up,
    and pods that fit together fit one by one."""
    placed = run.memory.pictures.placed
    keep: set[str] = set()
    if placed and run.memory.keeps_placed and all(_shares_prefilter(p) for p, _ in carried) and not any(map(_ANTI_PODS, run.infos.values())):
        carried_on: dict[str, set[int]] = defaultdict(set)
        for pod, name in carried:
            carried_on[name].add(id(pod))
        keep = {name for name, pods in placed.items() if len(pods) == len(carried_on.get(name, ())) and set(map(id, pods)) == carried_on[name]}
    run.memory.pictures.settle(keep)
    return keep


def place_on_existing(run: Run, classes: list[PodClass]) -> None:
    """Fill nodes that exist (Ready first, then booting), by score within each rank, each
    rank's in name order: of the live nodes that may take pods, those that may have room
    (``LiveNodes.open``; the run's existing nodes are the live ones)."""
    if not any(c.pods for c in classes):  # (most decisions leave no pods for the second fill)
        return
    ranked = [(rank, list(map(run.infos.__getitem__, names))) for rank, names in run.memory.live.open.items() if names]
    if ranked:
        merged = alike.merged_classes(run, classes, run.memory.settings.respect_preferences)
        _fill(run, merged, ranked)
        if len(merged) < len(classes):  # (the merged classes took their pods)
            for cls in classes:
                cls.pods = [p for p in cls.pods if p.key not in run.bindings]


def fill(run: Run, classes: list[PodClass], candidates: list[NodeInfo] | None = None, steer: Steer | None = None) -> None:
    """Place pods of ``classes`` on the nodes this run decided to boot: ``candidates`` by
    score (ranked after every existing node), or (None) those that have room and meet
    ``steer``, tightest first."""
    _fill(run, classes, None if candidates is None else [(len(READINESS), candidates)] if candidates else [], steer)


def _fill(run: Run, classes: list[PodClass], ranked: list[tuple[int, list[NodeInfo]]] | None, steer: Steer | None = None) -> None:
    """``fill`` on candidates by readiness rank, best first (None: the nodes this run decided to boot)."""
    if (ranked is not None and not ranked) or not any(c.pods for c in classes):
        return
    rooms = [(rank, RoomIndex(infos)) for rank, infos in ranked or ()]
    namespaces = run.topology.namespace_labels

    def fill_ranked(pods: list[Pod], nodes: list[tuple[int, list[NodeInfo]]]) -> list[Pod]:
        """``fill_class`` on existing nodes, unless none has room for them (see ``RoomIndex.may_take``):
        then the search is left out, and starts next where a search that found none would."""
        if not any(room.may_take(pods[0]) for _, room in rooms):
            for rank, with_room in nodes:
                run.next_start[rank] = run.next_start.get(rank, 0) % len(with_room) + len(with_room)
            return pods
        left = fill_class(run, pods, nodes, steer)
        if len(left) == len(pods):
            for _, room in rooms:
                room.look_again(run.moves)
        return left

    for cls in classes:
        if not cls.pods:
            continue
        if ranked is None:
            fill_on: Callable[[list[Pod]], list[Pod]] = functools.partial(fill_class, run, candidates=None, steer=steer)
        else:
            nodes = [(rank, with_room) for rank, room in rooms if (with_room := room.with_room_for(cls.rep))]
            if not nodes:
                continue
            fill_on = functools.partial(fill_ranked, nodes=nodes)
        if cls.rep.inter_pod and not plan.static(cls.rep, namespaces):
            # Where it may go depends on where the others went: one at a time, until one
            # finds no node (nothing has changed for the next: it would find none either,
            # and its search would start where this one's did).
            cls.pods = _one_at_a_time(cls.pods, fill_on)
        else:
            cls.pods = fill_on(cls.pods)


def _one_at_a_time(pods: list[Pod], fill_on: Callable[[list[Pod]], list[Pod]]) -> list[Pod]:
    """The pods ``fill_on`` leaves over, placed one at a time in turn; once one is left over,
    so are the rest (unless a Reserve or Permit of their own may refuse one and not the
    next: claims, volumes, a gang)."""
    for i, pod in enumerate(pods):
        if fill_on([pod]):
            if pod.claims or pod.volume_claims or pod.pod_group:
                return [pod, *(p for p in pods[i + 1 :] if fill_on([p]))]
            return pods[i:]
    return []


def fill_class(run: Run, pods: list[Pod], candidates: list[tuple[int, list[NodeInfo]]] | None, steer: Steer | None = None) -> list[Pod]:
    """Identical pods onto ``candidates`` (see ``fill``); returns those left over. The
    filters run for the first pod per node; resources, ``host_cap`` for inter-pod
    constraints and host ports (one per node) say how many more that node takes."""
    pod = pods[0]
    state = CycleState()
    if not run.fw.run_pre_filter_plugins(state, pod).is_success():
        return pods

    def passes(info: NodeInfo) -> bool:
        return info.fit_count(info.fit_request(pod), 1) > 0 and run.fw.run_filter_plugins(state, pod, info).is_success()

    if candidates is None:
        zone = pod.node_selector.get(ZONE) or pod.zone
        opened = run.open.for_request(pod.requests.cpu, pod.requests.memory, zone)
        order: Iterable[NodeInfo] = (i for i in opened if passes(i) and (steer is None or meets(steer, i.labels)))
    else:
        order = _sampled(run, state, pod, candidates)
    left = deque(pods)
    refused: list[Pod] = []
    for info in order:
        count = info.fit_count(info.fit_request(pod), len(left))
        # Pods of a class ask for the same host ports: two of them never share a node.
        cap = 1 if pod.host_ports else plan.host_cap(pod, info, run.topology) if pod.inter_pod else None
        for _ in range(count if cap is None else min(count, cap)):
            candidate = left.popleft()
            if not run.place(candidate, info, state if len(pods) == 1 else CycleState()):
                refused.append(candidate)
                break
        if not left:
            break
    return refused + list(left)


def _sampled(run: Run, state: CycleState, pod: Pod, ranked: list[tuple[int, list[NodeInfo]]]) -> Iterator[NodeInfo]:
    """Existing nodes for ``pod``'s class, best first: by readiness rank (Ready nodes
    before booting ones), and within each, as kube-scheduler searches a large cluster:
    filter from where the last search stopped until ``feasible_nodes_to_find`` nodes pass,
    score those, offer them by score; if pods are left, the search goes on from there.
    (A rank's nodes are those that had the class's CPU free, most free first; kube walks
    its node list.) The filters look at as many nodes at a time as may still be wanted:
    the same nodes pass, and the search stops at the same node, as one node at a time."""
    for rank, nodes in ranked:
        want, count = feasible_nodes_to_find(len(nodes)), len(nodes)
        start, seen = run.next_start.get(rank, 0) % count, 0
        walk = nodes[start:] + nodes[:start]
        while seen < count:
            feasible: list[NodeInfo] = []
            while seen < count and len(feasible) < want:
                end = min(count, seen + want - len(feasible))
                feasible += run.fw.feasible(state, pod, walk[seen:end])
                seen = end
            run.next_start[rank] = start + seen
            scores, status = run.fw.run_score_plugins(state, pod, feasible) if len(feasible) > 1 else ({}, None)
            totals = _summed(scores.values()) if status is None or status.is_success() else {}
            best = [(-totals.get(i.name, 0), i.name, i) for i in feasible]
            heapq.heapify(best)  # pods are often placed before most of them are offered
            while best:
                yield heapq.heappop(best)[2]


_ANTI_PODS = operator.attrgetter("anti_pods")


def _shares_prefilter(pod: Pod) -> bool:
    """Whether the pods of ``pod``'s class may share one PreFilter answer while pods are
    placed (as the pods of a class placed on existing nodes do): with no hard spread or
    required (anti-)affinity of its own, nothing in its PreFilter depends on where other pods
    went, save existing pods' anti-affinity (a placed pod with such terms starts the answers
    again); and nothing of its Reserve is its own (no claims, volumes or gang)."""
    return not (pod.inter_pod or pod.host_ports or pod.claims or pod.volume_claims or pod.pod_group)


def _summed(scores: Iterable[dict[str, int]]) -> dict[str, int]:
    """Each node's total over the score plugins."""
    totals: dict[str, int] = {}
    for by_node in scores:
        if not totals:
            totals = dict(by_node)
            continue
        for name, value in by_node.items():
            totals[name] += value
    return totals
