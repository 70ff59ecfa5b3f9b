"""Step 3: new nodes for the pods existing nodes did not take. Constraint groups in priority
order, each through the pools in turn (weight, then file order): LP-guided bin packing
(``binpack``) in bin-pack pools, a node per pod in cell pools, one pod at a time where its
place depends on other pods' (inter-pod constraints, by zone through ``interpod_plan``), and
pods with device claims by what the allocator finds. Offerings marked unavailable are
skipped; pool limits are never exceeded; what no pool takes waits or is unschedulable, with
every pool's reason."""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict, deque
from collections.abc import Iterator, Sequence

from nodemanager.model import CapacityPolicy, CapacityType, Pod, PodKey, Resources
from nodemanager.model.labels import HOSTNAME, ZONE
from nodemanager.scaler import alike, binpack, existing, group_order, launch_choices, preferences, sizing, steering
from nodemanager.scaler import interpod_plan as plan
from nodemanager.scaler.memory import PROBE_MEMO_SIZE
from nodemanager.scaler.pools import Candidate, PoolView, offering_node_info
from nodemanager.scaler.run import NEW_HOST, NewNode, PodClass, Run, node_level
from nodemanager.scaler.zone_batch import ZoneBatch
from nodemanager.scheduling import CycleState
from nodemanager.scheduling.plugins.interpod import spread_domains
from nodemanager.scheduling.plugins.queue_sort import priority_key
from nodemanager.scheduling.status import Code


def probe(run: Run, view: PoolView, pod: Pod) -> tuple[tuple[Candidate, ...], str, bool]:
    """The pool's offerings this pod's constraints accept (any size), or why none and
    whether that may change (a PreFilter that says "not yet", such as an unbound
    volume claim). A pure function of the pool, the constraints and the cluster's
    objects, so the scaler memoizes it per computation's inputs."""
    volumes = run.snapshot.volumes
    key = (view.name, run.key(pod, node_only=True), tuple(volumes.claims.get(k) for k in pod.volume_claims) if volumes and pod.volume_claims else ())
    memo = run.memory.probe_memo
    if key not in memo:
        if len(memo) >= PROBE_MEMO_SIZE:
            memo.clear()
        memo[key] = _probe_uncached(run, view, pod)
    return memo[key]  # one tuple per answer: what is derived from it is kept by its identity


def _probe_uncached(run: Run, view: PoolView, pod: Pod) -> tuple[tuple[Candidate, ...], str, bool]:
    asked = dataclasses.replace(node_level(pod), requests=Resources())
    if len(asked.node_selector) == 1 and ZONE in asked.node_selector and offering_blind(unpinned := asked.constrained(node_selector={})):
        # Pinned to a zone and nothing else (as a zone plan pins pods): what the pod accepts
        # without the pin, in that zone (a node's zone label is its offering's).
        zone = asked.node_selector[ZONE]
        in_zone = tuple(c for c in probe(run, view, unpinned)[0] if c.offering.zone == zone)
        if in_zone:
            return in_zone, "", False
    state = CycleState()
    status = run.fw.run_pre_filter_plugins(state, asked)
    if not status.is_success():
        return (), status.message, status.code is Code.UNSCHEDULABLE
    with_room = tuple(c for c in view.candidates if c.allocatable.pods >= 1)  # the one thing an empty request checks
    blocks = asked.unreplaceable and any(c.offering.capacity_block for c in with_room)  # (which such a pod may not take)
    if with_room and offering_blind(asked) and not blocks:  # every offering with a pod slot answers as the first does
        status = run.fw.run_filter_plugins(state, asked, offering_node_info(view, with_room[0], NEW_HOST))
        if status.is_success():
            return with_room, "", False
    accepted: list[Candidate] = []
    reasons: dict[str, int] = defaultdict(int)
    for cand in view.candidates:
        status = run.fw.run_filter_plugins(state, asked, offering_node_info(view, cand, NEW_HOST))
        if status.is_success():
            accepted.append(cand)
        else:
            reasons[status.message] += 1
    top = max(sorted(reasons), key=lambda r: reasons[r]) if reasons else "the pool offers no instance type"
    return tuple(accepted), top, False


def place_on_new(run: Run, classes: list[PodClass]) -> None:
    """New nodes for ``classes``, constraint group after group. Groups that differ only in
    their labels, where no filter reads a pod's own labels (``alike.blind``), are one group, and
    their classes of one request one class: the filters, and so the nodes, are the same for
    all of them (a pod's labels still count where others' constraints look)."""
    respect = run.memory.settings.respect_preferences
    groups: dict[tuple, list[PodClass]] = defaultdict(list)
    grouped: dict[tuple, tuple] = {}  # Run.key -> the key of its group
    for cls in classes:
        if cls.pods:
            own = run.key(cls.rep)
            if own not in grouped:
                grouped[own] = alike.key(run, cls.rep) if alike.blind(run, cls.rep, respect) else own
            groups[grouped[own]].append(cls)

    def rank(rep: Pod) -> int:
        """Within a priority, the most constrained choose first and the rest fill in:
        pods that need a node to themselves (or nearly), other inter-pod groups, the rest."""
        if not rep.inter_pod:
            return 2
        return 0 if plan.host_cap(rep, None, run.topology) is not None else 1

    # ``groups`` are in queue order (``classes`` are, by their first pod)
    batch = ZoneBatch(run, _place_group, functools.partial(_place_group, zoned=True), _report)
    for placed in group_order.packing_order(list(groups.values()), alike.kinds, rank, run.topology.namespace_labels):
        # A group of several label sets that a pod placed since repels in part is split again.
        kinds = alike.kinds(placed)
        for group in [placed] if len(kinds) == 1 or all(alike.blind(run, k, respect) for k in kinds) else alike.by_labels(run, placed):
            merged = alike.merged(group) if len(alike.kinds(group)) > 1 else group
            if respect and preferences.preferring(group[0].rep):
                batch.flush()
                _place_preferring(run, group)
            elif batch.takes(merged):
                batch.plan(merged)
            else:
                batch.flush()
                _place_group(run, merged)
    batch.flush()
    for cls in classes:  # (pods of merged classes were placed, or reported, there)
        cls.pods = [p for p in cls.pods if p.key not in run.bindings and p.key not in run.waiting and p.key not in run.unschedulable]


def _place_preferring(run: Run, group: list[PodClass]) -> None:
    """Karpenter's ladder (``preferences``): the group's pods at its strictest step first;
    those no new node takes go a step down, until the pods themselves. The steps of a group
    are alike (its pods share every constraint): each pod's is its own with the step's."""
    steps = preferences.ladder(group[0].rep)
    pending = [list(c.pods) for c in group]
    for p in (p for pods in pending for p in pods):
        run.stepped[p.key] = p
    for i, (step, keep_steer) in enumerate(steps):
        last = i == len(steps) - 1
        classes = [PodClass(pods if last else [p.constrained(pod_affinity=step.pod_affinity, spread=step.spread) for p in pods]) for pods in pending]
        _place_group(run, classes, relax_steer=not keep_steer)
        if last:
            return
        pending = [left for pods in pending if (left := [p for p in pods if p.key not in run.bindings])]
        if not pending:
            return
        for p in (p for pods in pending for p in pods):  # reported by this step: the next one decides
            run.waiting.pop(p.key, None)
            run.unschedulable.pop(p.key, None)


def _place_group(run: Run, group: list[PodClass], zoned: bool = False, relax_steer: bool = True) -> None:
    """New nodes for one constraint group: each pool in turn takes what it can; what a
    pool cannot take (no match, no fit, limit, unavailable) moves on to the next.
    ``zoned``: the zone-level constraints are settled (the pods are pinned).
    ``relax_steer``: the node affinity's steer may be let go if pods are left over."""
    pending = [c for c in group if c.pods]
    if not pending:
        return
    rep = pending[0].rep  # the group's pods share every constraint
    # Placed pods' anti-affinity to it, by topology key (a new node's hostname holds none).
    repelled = {t.topology_key for t in run.topology.repelling(rep)} - {HOSTNAME}
    if not zoned and plan.plannable(rep) and ((rep.inter_pod and plan.zone_level(rep)) or repelled == {ZONE}):
        _place_by_zone(run, pending, relax_steer)
        return
    steers = {id(c): _steer(run, c.rep) for c in pending}
    if len(set(steers.values())) > 1:  # sizes that relax the node affinity differently go apart
        by_steer: dict[steering.Steer | None, list[PodClass]] = defaultdict(list)
        for c in pending:
            by_steer[steers[id(c)]].append(c)
        for share in by_steer.values():
            _place_group(run, share, zoned, relax_steer)
        return
    steer = steers[id(pending[0])]
    reasons: dict[int, list[tuple[str, bool]]] = defaultdict(list)  # class -> (why, may clear)
    one_by_one = (rep.inter_pod and not plan.static(rep, run.topology.namespace_labels)) or bool(repelled - {ZONE})
    _through_pools(run, group, steer, one_by_one, reasons)
    if steer is not None and relax_steer and any(c.pods for c in group):  # a pool limit, say: relaxed in full, as Karpenter would go on
        _through_pools(run, group, None, one_by_one, reasons)
    _report(run, group, reasons)


def _through_pools(run: Run, group: list[PodClass], steer: steering.Steer | None, one_by_one: bool, reasons: dict[int, list[tuple[str, bool]]]) -> None:
    """The group's pods onto the nodes this run decided to boot (they have room to spare),
    then each pool in turn, on nodes that meet ``steer``."""
    existing.fill(run, group, steer=steer)
    for cls in group if one_by_one else ():
        cls.pods = [pod for pod in cls.pods if not _new_node_for(run, pod, len(cls.pods), reasons[id(cls)], steer)]
    for view in run.views if not one_by_one else ():
        pending = [c for c in group if c.pods]
        if not pending:
            break
        offered, why, transient = probe(run, view, pending[0].rep)
        accepted = _steered(run, view, offered, steer)
        if not accepted:
            for c in pending:
                reasons[id(c)].append((f"pool {view.name}: {why if not offered else _UNMET}", transient))
            continue
        available = run.available(accepted)
        largest = run.frontier(accepted)
        largest_available = run.frontier(available) if len(available) < len(accepted) else largest
        usable = []
        for c in pending:
            if not any(c.rep.requests.fits(a) for a in largest):
                reasons[id(c)].append((f"pool {view.name}: no instance type can hold {_describe(c.rep.requests)}", False))
            elif not any(c.rep.requests.fits(a) for a in largest_available):
                reasons[id(c)].append((f"pool {view.name}: every fitting offering is marked unavailable after capacity errors", True))
            elif short := launch_choices.strict_shortfall(view, available, c.rep):
                reasons[id(c)].append((f"pool {view.name}: {short}", True))
            else:
                usable.append(c)
        if usable and any(c.rep.claims for c in usable):
            _place_with_devices(run, view, usable, available, reasons)
        elif usable:
            _pack(run, view, usable, available, reasons)


_UNMET = "no offering meets the node affinity tried first (its first required term and heaviest preferred one)"


def _steer(run: Run, pod: Pod) -> steering.Steer | None:
    """Karpenter's requirements for the pod's new node (``steering``): the strictest that an
    available offering of some pool meets and holds the pod; None when its node affinity
    steers nothing (or nothing holds it)."""
    if not steering.steered(pod):
        return None
    key = (run.key(pod, node_only=True), pod.requests)
    if key not in run.steers:
        offered = (
            offering_node_info(view, c, NEW_HOST).labels
            for view in run.views
            for c in probe(run, view, pod)[0]
            if not run.blocked(c) and pod.requests.fits(c.allocatable)
        )
        run.steers[key] = steering.first_met(pod, offered)
    return run.steers[key]


def _steered(run: Run, view: PoolView, accepted: tuple[Candidate, ...], steer: steering.Steer | None) -> tuple[Candidate, ...]:
    """The offerings of ``accepted`` that meet ``steer``, once per answer of ``probe``."""
    if steer is None:
        return accepted
    found = run.steered.get((id(accepted), steer))
    if found is None or found[0] is not accepted:
        found = (accepted, tuple(c for c in accepted if steering.meets(steer, offering_node_info(view, c, NEW_HOST).labels)))
        run.steered[(id(accepted), steer)] = found
    return found[1]


def _report(run: Run, group: list[PodClass], reasons: dict[int, list[tuple[str, bool]]]) -> None:
    """Pods of ``group`` left over wait (if a reason may clear) or are unschedulable."""
    for c in group:
        if c.pods:
            why = reasons[id(c)] + [(f"pool {pool}: {note}", True) for pool, note in sorted(run.snapshot.paused_pools.items())]
            text = "; ".join(dict.fromkeys(r for r, _ in why)) or "no pool accepts the pod"
            target = run.waiting if any(transient for _, transient in why) else run.unschedulable
            for pod in c.pods:
                target[pod.key] = text
            c.pods = []


def _place_by_zone(run: Run, group: list[PodClass], relax_steer: bool = True) -> None:
    """Zone-level constraints settled for the whole group (``interpod_plan``), then each
    zone's share placed as zonal pods."""
    rep = group[0].rep
    zones = sorted(run.possible_zones(rep))
    pods = [p for c in group for p in c.pods]
    domains = functools.partial(spread_domains, run.fw.handle, rep, topology=run.topology)
    chosen, why = plan.plan_zones(pods, zones, run.topology, domains, run.zone_load)
    check = plan.zone_rules(rep, run.topology, domains)  # (as the plan began: placing pods changes the counts)
    by_zone: dict[str, list[PodClass]] = defaultdict(list)
    for cls in group:
        shares: dict[str, list[Pod]] = defaultdict(list)
        pins: dict[str, dict] = {}  # zone -> what pins the class's pods there
        for pod in cls.pods:
            if (zone := chosen.get(pod.key)) is not None:
                if zone not in pins:
                    pins[zone] = plan.pins(cls.rep, zone)
                shares[zone].append(pod.constrained(**pins[zone]))
        for zone, members in shares.items():
            by_zone[zone].append(PodClass(members))
        cls.pods = [p for p in cls.pods if p.key not in chosen]
    for zone in sorted(by_zone):
        _place_group(run, by_zone[zone], zoned=True, relax_steer=relax_steer)
    if any(key not in run.bindings for key in chosen):
        _drop_unadmitted(run, check, [(key, zone) for key, zone in chosen.items() if key in run.bindings])
    # Bindings list pods in the order they may be bound: each passes every filter given
    # the ones before it. Zone by zone is not such an order; the plan's is.
    for key in chosen:
        if key in run.bindings:
            run.bindings[key] = run.bindings.pop(key)
    if not zones:
        why = "no pool offers a zone the pod's node constraints accept"
    _report(run, group, {id(c): [(why, False)] for c in group})


def _drop_unadmitted(run: Run, rules: list[plan.ZoneRule], placed: list[tuple[PodKey, str]]) -> None:
    """Some pods of a zone plan found no node (a pool's limit, say): the placed ones the
    plan's constraints no longer admit, given those kept before them, are taken off again
    and wait for the next decision (which plans with what is placed)."""
    kept = set(plan.admitted(rules, placed))
    for key, _ in placed:
        if key not in kept:
            node = run.bindings[key]
            run.unplace(key)
            run.waiting[key] = "its zone was planned counting pods that found no node: planned again at the next decision"
            if node in run.new_nodes and not run.new_nodes[node].info.pods:
                run.forget(node)


def _new_node_for(run: Run, pod: Pod, kin: int, reasons: list[tuple[str, bool]], steer: steering.Steer | None = None) -> bool:
    """A pod whose place depends on other pods': a node this run decided to boot if the
    constraints allow it there, else a new node of the first pool with an offering the
    constraints accept. The constraints are tested once per zone and capacity type (what
    a new node's domain is, with the value of any other label its constraints are on), on a
    node with a fresh hostname; among the groups that pass,
    the zone with the fewest nodes so far (any pool), and there the group with the cheapest
    offering that holds the pod (a capacity type); the type is the packer's choice
    for the ``kin`` pods of its class that may share the node (one if they keep apart by
    hostname). Only offerings that meet ``steer`` are tried."""
    if not existing.fill_class(run, [pod], None, steer):
        return True
    state = CycleState()
    status = run.fw.run_pre_filter_plugins(state, pod)
    if not status.is_success():
        reasons.append((status.message, status.code is Code.UNSCHEDULABLE))
        return False
    cap = plan.host_cap(pod, None, run.topology)
    shares = kin if cap is None else max(min(kin, cap), 1)
    keys = plan.other_keys(pod)
    for view in run.views:
        offered, why, transient = probe(run, view, pod)
        accepted = _steered(run, view, offered, steer)
        usable = [c for c in accepted if not run.blocked(c) and pod.requests.fits(c.allocatable)]
        if not usable:
            text = why if not offered else _UNMET if not accepted else f"no available offering can hold {_describe(pod.requests)}"
            reasons.append((f"pool {view.name}: {text}", transient or bool(accepted)))
            continue
        if short := launch_choices.strict_shortfall(view, usable, pod):
            reasons.append((f"pool {view.name}: {short}", True))
            continue
        groups: dict[tuple, list[Candidate]] = defaultdict(list)
        for c in usable:
            labels = offering_node_info(view, c).labels if keys else {}
            groups[(c.offering.zone, c.offering.capacity_type, *(labels.get(k, "") for k in keys))].append(c)
        passing, refusal = [], ""
        for group_key, members in groups.items():
            verdict = run.fw.run_filter_plugins(state, pod, offering_node_info(view, members[0], NEW_HOST))
            if verdict.is_success():
                passing.append(group_key)
            else:
                refusal = verdict.message
        if not passing:
            reasons.append((f"pool {view.name}: {refusal}", False))
            continue
        # the emptiest zone (the first by name of equals), then its cheapest group (spot where the pod allows it)
        chosen = min(passing, key=lambda g: (run.zone_load[g[0]], g[0], min(c.price for c in groups[g]), g))
        one_each = view.cell or bool(pod.host_ports)
        fills, _, _ = binpack.pack([pod.requests], [1 if one_each else shares], groups[chosen], run.budget(view), per_node=1 if one_each else None)
        if not fills:
            reasons.append((f"pool {view.name}: limit reached", True))
            continue
        node = run.new_node(view, fills[0].candidate, accepted=groups[chosen])
        if run.place(pod, node.info, state):
            return True
        reasons.append((f"pool {view.name}: rejected at reserve or permit", True))
    return False


def _place_with_devices(run: Run, view: PoolView, classes: list[PodClass], available: Sequence[Candidate], reasons: dict[int, list[tuple[str, bool]]]) -> None:
    """Pods with claims, one at a time: a node chosen for an earlier pod takes the next
    while its devices last (the allocator decides); otherwise a node of the cheapest
    type whose devices satisfy the claims."""
    for cls in classes:
        pending = list(cls.pods)
        cls.pods = []
        for pod in pending:
            single = PodClass([pod])
            existing.fill(run, [single], [n.info for n in run.new_nodes.values() if n.view is view])
            if single.pods:
                _pack(run, view, [single], available, reasons)
            if single.pods:
                cls.pods += single.pods
                reasons[id(cls)] += reasons.pop(id(single), [])


def _pack(run: Run, view: PoolView, classes: list[PodClass], available: Sequence[Candidate], reasons: dict[int, list[tuple[str, bool]]]) -> None:
    """Boot nodes of ``view`` for ``classes``; pods left over stay in their class."""
    classes = sorted(classes, key=lambda c: (-c.rep.requests.cpu, -c.rep.requests.memory, priority_key(c.rep)))
    available = sizing.floored(run, view, available, [c.rep.requests for c in classes], (p for c in classes for p in c.pods))
    # A group is all batch pods or none, so its own requests are what it takes from a new
    # node; a high-priority pod is never limited by the batch estimate.
    # Pods with claims get a node each; more share it when its devices allow (via _fill).
    # So do pods with host ports (a group shares its ports: two of them never share a node).
    one_each = view.cell or any(c.rep.claims or c.rep.host_ports for c in classes)
    # So do pods that keep apart by hostname, up to what their constraints allow.
    per_node = 1 if one_each else plan.host_cap(classes[0].rep, None, run.topology)
    requests, counts = [c.rep.requests for c in classes], [len(c.pods) for c in classes]
    groups = [[i] for i in range(len(classes))]
    if len(classes) > binpack.MAX_CLASSES:
        if per_node is None and _pack_similar(run, view, classes, available):
            if any(c.pods for c in classes):
                _pack(run, view, [c for c in classes if c.pods], available, reasons)
            return
        # Planned for each group's largest request, which every member fits (a limit
        # reached, or a group's typical pod fits nowhere: the packer still says why).
        groups = binpack.similar(requests, counts, binpack.MAX_CLASSES)[0]
        requests = [functools.reduce(Resources.max, (requests[i] for i in g)) for g in groups]
        counts = [sum(counts[i] for i in g) for g in groups]
    fills, _, why = binpack.pack(requests, counts, available, run.budget(view), per_node=per_node, tables=run.type_tables)
    spent = len(run.spent)
    queues = [deque(p for i in g for p in classes[i].pods) for g in groups]
    refused: set[PodKey] = set()
    for node, fill in _new_nodes_for(run, view, fills, available):
        for g, k in enumerate(fill.counts):
            for _ in range(k):
                pod = queues[g].popleft()
                if not run.place(pod, node.info, CycleState()):
                    refused.add(pod.key)
    if len(run.spent) > spent and any(queues) and (fewer := run.available(available)) != tuple(available):
        # A reservation ran out under this plan: what it could not hold is planned again
        # without it (each round spends one at least, so this ends).
        for g, members in enumerate(groups):
            left = {p.key for p in queues[g]} | refused
            for cls in (classes[i] for i in members):
                cls.pods = [p for p in cls.pods if p.key in left]
        rest = [c for c in classes if c.pods]
        if fewer:
            _pack(run, view, rest, fewer, reasons)
        spent_here = ", ".join(sorted({c.offering.reservation for c in available if c.offering.reservation in run.spent}))
        for cls in rest:
            if cls.pods:
                reasons[id(cls)].append((f"pool {view.name}: capacity reservation {spent_here} has no instance left", True))
        return
    for g, members in enumerate(groups):
        left = {p.key for p in queues[g]}
        for cls in (classes[i] for i in members):
            cls.pods = [p for p in cls.pods if p.key in refused or p.key in left]
            if any(p.key in refused for p in cls.pods):
                reasons[id(cls)].append((f"pool {view.name}: rejected at reserve or permit", True))
            if any(p.key in left for p in cls.pods):
                limit = why.get(g, "")
                text = f"pool {view.name}: limit on {limit[6:]} reached" if limit.startswith("limit:") else f"pool {view.name}: no room"
                if per_node is not None and not one_each:
                    text += f" ({plan.why_apart(cls.rep)})"
                reasons[id(cls)].append((text, True))


def _pack_similar(run: Run, view: PoolView, classes: list[PodClass], available: Sequence[Candidate]) -> bool:
    """Many distinct requests: the packer plans nodes for groups of similar requests (its
    work grows with classes x nodes, and 10,000 pods of 10,000 sizes are 10,000 classes).
    Each group's pods, largest first, are dealt to the nodes planned for it back and forth,
    so every node gets about the group's typical pod; a pod its node cannot hold after all
    then goes to the tightest node with room. Nodes no pod took are not booted. Whether any
    pod was placed: the rest go round again."""
    groups, fills = binpack.pack_similar([c.rep.requests for c in classes], [len(c.pods) for c in classes], available, run.budget(view), run.type_tables)
    planned = [(node, fill.counts) for node, fill in _new_nodes_for(run, view, fills, available)]
    placed: set[PodKey] = set()
    for g, members in enumerate(groups):
        pods = sorted((p for i in members for p in classes[i].pods), key=lambda p: (-p.requests.cpu, -p.requests.memory, p.key))
        takers = [(node, counts[g]) for node, counts in planned if counts[g]]
        rows = [[node for node, k in takers if k > r] for r in range(max((k for _, k in takers), default=0))]
        for pod, node in zip(pods, (node for r, row in enumerate(rows) for node in (row if r % 2 == 0 else row[::-1])), strict=False):
            if node.info.fit_count(node.info.fit_request(pod), 1) > 0 and run.place(pod, node.info, CycleState()):
                placed.add(pod.key)
    for cls in classes:
        cls.pods = [p for p in cls.pods if p.key not in placed]
    existing.fill(run, classes)
    for node, _ in planned:
        if not node.info.pods:
            run.forget(node.info.name)
    return bool(placed) or not any(c.pods for c in classes)


def _new_nodes_for(run: Run, view: PoolView, fills: list[binpack.Fill], available: Sequence[Candidate]) -> Iterator[tuple[NewNode, binpack.Fill]]:
    """A new node for each copy of each fill, in turn, each in the emptiest zone that
    offers its type at no higher price."""
    same_type = run.memory.by_type.get(available, _by_type)
    for fill in fills:
        chosen = fill.candidate
        # the same type and capacity type at no higher price, in every zone offering it
        zones = [c for c in same_type.get((id(chosen.itype), chosen.offering.capacity_type), ()) if c.price <= chosen.price] or [chosen]
        for _ in range(fill.copies):
            if run.spent and chosen.offering.reservation:  # copies past what the reservations have left: planned again by the caller
                zones = [c for c in zones if not run.blocked(c)]
                if not zones:
                    break
            yield run.new_node(view, run.emptiest(zones), accepted=available), fill


def offering_blind(pod: Pod, moving: bool = False) -> bool:
    """Whether the filters decide alike on every offering of a pool for this pod (with no
    requests): nothing in it tells types, zones or capacity types apart (a pool's offerings
    share its labels and taints; only the well-known type, zone and capacity labels differ).
    ``moving``: a placed pod as a what-if places it again, without its node's name."""
    return not (
        (pod.node_name and not moving)
        or pod.node_selector
        or pod.affinity
        or pod.instance_type
        or pod.zone
        or pod.capacity_policy is not CapacityPolicy.ANY
        or pod.volume_claims
        or pod.claims
        or pod.host_ports
    )


def _describe(requests: Resources) -> str:
    return ", ".join(f"{k}={v}" for k, v in requests.to_quantities().items()) or "nothing"


def _by_type(offerings: Sequence[Candidate]) -> dict[tuple[int, CapacityType], list[Candidate]]:
    """The offerings by instance type (its id) and capacity type."""
    found: dict[tuple[int, CapacityType], list[Candidate]] = {}
    for c in offerings:
        found.setdefault((id(c.itype), c.offering.capacity_type), []).append(c)
    return found


def place_followers(run: Run) -> None:
    """Pods whose required pod affinity matched no pod when their turn came, tried again
    while each round places some: the pods they follow may have been placed after them in
    this computation (kube-scheduler requeues such a pod when a matching pod is bound,
    Karpenter retries it in the same Solve while it makes progress)."""
    for _ in range(len(run.left_for_new)):
        left = [(key, [p for p in pods if p.key in run.unschedulable]) for key, pods in run.left_for_new if pods[0].pod_affinity.required]
        retry = [PodClass(pods, key) for key, pods in left if pods]
        if not retry:
            return
        for c in retry:
            for pod in c.pods:
                del run.unschedulable[pod.key]
        placed = len(run.bindings)
        existing.place_on_existing(run, retry)
        place_on_new(run, retry)
        if len(run.bindings) == placed:
            return
