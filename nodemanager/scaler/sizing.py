"""How big new nodes are once the pods are placed: the pool's node size floor
(``pools[].nodeSizeFloor``), right-sizing each new node to the cheapest type that holds what
it ended up with, and the what-if that merges a plan onto one new node (consolidation's
replacement)."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Sequence

from nodemanager.model import Pod, Resources
from nodemanager.model.instance_type import GIB
from nodemanager.model.resources import extended
from nodemanager.scaler import binpack
from nodemanager.scaler import interpod_plan as plan
from nodemanager.scaler.decision import SizeFloor
from nodemanager.scaler.pools import Candidate, PoolView, offering_node_info
from nodemanager.scaler.run import NEW_HOST, NewNode, Run, constraint_key, node_level
from nodemanager.scaler.size_floor import floor_vcpu, suited
from nodemanager.scheduling import CycleState, NodeInfo
from nodemanager.scheduling.nodeinfo import counted_requests
from nodemanager.scheduling.plugins.queue_sort import priority_key


def size_floor(run: Run, view: PoolView) -> SizeFloor | None:
    """The pool's node size floor now (None: none), once per computation: ``share`` of
    the CPU its pods request on its nodes, at most ``maxCPU``, and the memory they ask
    for per CPU (to a tenth of a GiB)."""
    if view.name not in run._floors:
        share = view.pool.size_floor_share
        cpu = memory = 0
        if share and not view.cell:
            for info in run.infos.values():
                if info.exists and info.pool == view.name:
                    asked = info.requested
                    cpu += asked.cpu
                    memory += asked.memory
        floor = floor_vcpu(view.pool, cpu)
        run._floors[view.name] = SizeFloor(floor, round(memory * 1000 / cpu / GIB, 1)) if floor > 0 else None
    return run._floors[view.name]


def floored(run: Run, view: PoolView, offerings: Sequence[Candidate], asks: Sequence[Resources], pods: Iterable[Pod]) -> Sequence[Candidate]:
    """``offerings`` of at least the pool's node size floor (``pools[].nodeSizeFloor``),
    of the types among them suited to the pool's pods, where some of those hold each of
    ``asks`` and the pool's limits allow one; else of at least its vCPU, on the same
    terms; else all of them (a pool of small types only, pods larger than any type the
    floor leaves, or a pool near its limits are not held back by it). Reserved offerings
    are kept whatever their size. Pods that ask for
    GPUs or other extended resources are sized by those: a larger type of the same GPUs
    only adds CPU they do not use. Nodes for ``pods`` that are all of Jobs of several pods
    are not held to it (``floor_holds``)."""
    if any(extended(ask) for ask in asks) or not floor_holds(run, pods):
        return offerings
    floor = size_floor(run, view)
    if floor is None:
        return offerings
    whole = math.ceil(floor.cpu)
    by_floor = run.memory.floored.get(offerings, lambda _offerings: {})
    for gib_per_cpu in (floor.gib_per_cpu, 0.0) if floor.gib_per_cpu else (0.0,):
        large = by_floor.get((whole, gib_per_cpu))
        if large is None:
            large = by_floor[whole, gib_per_cpu] = _reserved_too(offerings, suited([c for c in offerings if c.itype.vcpu >= whole], gib_per_cpu))
        if not large or len(large) == len(offerings) or not all(any(ask.fits(c.allocatable) for c in large) for ask in asks):
            continue
        budget = run.budget(view)  # (no limits: nothing is counted)
        if any(budget.copies(c.itype) != 0 for c in large):
            run.floor_applied[view.name] = floor if gib_per_cpu else dataclasses.replace(floor, gib_per_cpu=0.0)
            return large
    return offerings  # no floor's types hold these pods, or the pool's limits leave room only for smaller nodes: those, rather than none


def floor_holds(run: Run, pods: Iterable[Pod]) -> bool:
    """Whether the size floor holds for new nodes for ``pods``: not when each is of a Job
    of several pods. The floor is for pods that come a few at a time (a stream of pods
    that run on, or of one-pod Jobs), which a larger node's room takes as they come. The
    pods of a Job of several come together and mostly end together, and a node sized to
    them ends with them; held to the floor, the room beside them was taken by the next
    Jobs' pods, which end at other times: in the workload corpus's batch workloads, nodes
    holding a few pods long after the rest had ended cost more than the floor saved."""
    some = False
    for pod in pods:
        if not run.jobs.of_several(pod):
            return True
        some = True
    return not some


def _reserved_too(offerings: Sequence[Candidate], large: list[Candidate]) -> list[Candidate]:
    """``large`` with the reserved offerings of ``offerings`` first: capacity already paid
    for is used whatever its size."""
    reserved = [c for c in offerings if c.offering.reservation]
    if not reserved:
        return large
    kept = {id(c) for c in large}
    return [c for c in reserved if id(c) not in kept] + large


def right_size(run: Run) -> None:
    """Give every new pod-holding node the cheapest type that holds what it ended up with,
    in its zone and capacity type: where new nodes went was chosen already (by the pods'
    constraints or to spread them over the zones)."""
    domains = run.memory.domains
    sized: dict[tuple, Candidate | None] = {}  # nodes of one group in one domain that need the same: one answer
    plannable: dict[tuple, bool] = {}  # Run.key -> plan.plannable of its pods
    for node in run.new_nodes.values():
        if node.standby or not node.info.pods:
            continue
        pods = node.info.pods.values()
        kinds = {run.key(p): p for p in pods}  # (claims, and their shapes, are in the key)
        if any(p.claims for p in kinds.values()):
            continue  # a node chosen for its devices keeps its type
        if not all(plannable[k] if k in plannable else plannable.setdefault(k, plan.plannable(p)) for k, p in kinds.items()):
            continue  # a constraint on its instance type or a pool label: its type is part of the plan
        need = node_need(node)
        o = node.candidate.offering
        # Offerings of the node's zone and capacity type with every extended resource it
        # needs (GPUs): a GPU node is not compared with every cheaper CPU type.
        needs = extended(need)
        key = (id(node.accepted), o.zone, o.capacity_type, needs)
        found = domains.get(key)
        if found is None or found[0] is not node.accepted:
            if len(domains) >= binpack.TABLES_KEPT:
                domains.clear()
            found = domains[key] = (
                node.accepted,
                [
                    c
                    for c in node.accepted
                    if c.offering.zone == o.zone and c.offering.capacity_type is o.capacity_type and all(c.allocatable.get(n) > 0 for n in needs)
                ],
            )
        accepted = floored(run, node.view, found[1], (need,), pods)
        if run.spent and o.reservation:  # not into a reservation this run has spent since
            accepted = [c for c in accepted if c is node.candidate or not run.blocked(c)]
        if len(kinds) == 1:  # its pods accept every offering it was chosen among
            asked = (key, need, len(node.info.pods), node.candidate.price, len(accepted))
            if asked not in sized:
                sized[asked] = binpack.right_size(need, len(node.info.pods), accepted, node.candidate.price, lambda _: True)
            best = sized[asked]
        else:
            best = binpack.right_size(need, len(node.info.pods), accepted, node.candidate.price, functools.partial(accepts, run, node))
        if best is not None:
            budget = run.budget(node.view)
            budget.spend(node.candidate.itype, -1)
            if budget.copies(best.itype) == 0:
                continue
            run.moved(node, best)


def node_need(node: NewNode) -> Resources:
    """What a new node's pods take from its allocatable."""
    pods = node.info.pods.values()
    if node.view.batch is None:
        return node.info.requested  # each pod counted as its requests
    # Other pods use up the batch estimate only where batch pods share the node.
    with_batch = any(p.batch for p in pods)
    return Resources.total(counted_requests(p.requests, with_batch) for p in pods)


def merge_new_nodes(run: Run) -> None:
    """A what-if that may boot one node at most (consolidation's replacement): when the
    plan boots several, all their pods go on one node instead, of the cheapest offering
    that every one of those nodes' pods accepts and that takes them all through the
    filters. Karpenter's consolidation asks the same: would the pods fit elsewhere plus one
    new node (its scheduler fills a new node while any type holds its pods, where the
    packer plans the cheapest fleet). Pods whose placement depends on other pods' (hard
    inter-pod constraints), with claims or of a gang are left as planned."""
    nodes = [n for n in run.new_nodes.values() if n.info.pods]
    if len(nodes) < 2 or any(n.standby or not n.accepted for n in nodes) or len({n.view.name for n in nodes}) > 1:
        return
    pods = sorted((p for n in nodes for p in n.info.pods.values()), key=priority_key)
    if any(p.inter_pod or p.claims or p.pod_group for p in pods):
        return
    shared = set.intersection(*({id(c) for c in n.accepted} for n in nodes))
    need = Resources.total((p.requests for p in pods), Resources({"pods": len(pods)}))
    view = nodes[0].view
    choices = sorted(
        (c for c in floored(run, view, nodes[0].accepted, (need,), pods) if id(c) in shared and need.fits(c.allocatable) and not run.blocked(c)),
        key=lambda c: (c.price, run.zone_load[c.offering.zone], c.offering.zone, c.itype.name),
    )
    budget = run.budget(view)  # what the pool may add once the planned nodes are not booted
    for n in nodes:
        budget.spend(n.candidate.itype, -1)
    for cand in choices[:MERGE_TRIES]:
        if budget.copies(cand.itype) == 0:
            continue
        trial = offering_node_info(view, cand, NEW_HOST)
        if not all(_passes(run, pod, trial) for pod in pods):
            continue
        for n in nodes:
            for key in list(n.info.pods):
                run.unplace(key)
            run.forget(n.info.name)
        merged = run.new_node(view, cand, accepted=nodes[0].accepted)
        for pod in pods:
            if not run.place(pod, merged.info, CycleState()):  # (no claims, no gang: Reserve and Permit have nothing to refuse)
                run.waiting[pod.key] = f"pool {view.name}: rejected at reserve or permit on the one new node"
        return


def _passes(run: Run, pod: Pod, trial: NodeInfo) -> bool:
    """PreFilter and Filter pass for ``pod`` on ``trial``, which then holds it."""
    state = CycleState()
    if not (run.fw.run_pre_filter_plugins(state, pod).is_success() and run.fw.run_filter_plugins(state, pod, trial).is_success()):
        return False
    trial.add_pod(pod)
    return True


def accepts(run: Run, node: NewNode, cand: Candidate, kinds: Sequence[Pod] | None = None) -> bool:
    """The node's pods, of more than one group, accept it as ``cand`` (their inter-pod
    constraints hold already: the node keeps its zone, capacity type and name). ``kinds``:
    ``distinct`` of its pods, when the caller asks of many offerings."""
    probe_info = offering_node_info(node.view, cand, NEW_HOST)
    state = CycleState()
    pods = kinds if kinds is not None else distinct(node.info.pods.values())
    return all(run.fw.run_filter_plugins(state, node_level(p), probe_info).is_success() for p in pods)


MERGE_TRIES = 8  # cheapest offerings tried for a what-if's one new node


def distinct(pods: Iterable[Pod]) -> list[Pod]:
    """One pod of each kind (constraints and requests): what a filter can tell apart."""
    seen: dict[tuple, Pod] = {}
    for pod in pods:
        seen.setdefault((constraint_key(pod), pod.requests), pod)
    return list(seen.values())
