"""The other offerings a new node's fleet launch may take (``pools[].launch``): EC2 falls
back to them within the same call when the planned one is out of capacity, so one launch
does what several failed launches and re-plans would.

An alternative holds everything the node was planned to hold, as the planned offering
does: the same capacity type and architecture (one image), room for the pods' requests and
pod count, every pod's node-level filters passed (selectors, affinity, taints, volume
zones: ``accepted`` already says so for the pods that chose the node), at least the pool's
node size floor, no more machine than planned where the pool has limits, and a price within
``priceTolerance`` of the planned one (none more for a consolidation's replacement, whose
saving was counted at the planned price). A node whose pods keep near or apart from other
pods keeps its zone: its place in their topology was planned. Nodes chosen for their
devices, nodes launched into a capacity reservation (which targets it), standby nodes and
nodes whose pods constrain the type itself keep their offering.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence

from nodemanager.config.launch_schema import LaunchMethod, MinValues, MinValuesPolicy
from nodemanager.model import LaunchOption, Pod, PodKey, Resources
from nodemanager.scaler import interpod_plan as plan
from nodemanager.scaler.pools import Candidate, PoolView, offering_node_info
from nodemanager.scaler.run import NewNode, Run
from nodemanager.scaler.sizing import accepts, distinct, floored, node_need


class _Chooser:
    """One computation's answers: offering lists and options are shared by the nodes of
    one group (as ``sizing.right_size`` shares its answers)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        # (accepted, kind) -> (accepted, the offerings of that kind, cheapest first)
        self.kin: dict[tuple, tuple[Sequence[Candidate], list[Candidate]]] = {}
        # such a list -> its prices and its offerings as rows of plain figures
        self.rows: dict[int, tuple[list[Candidate], list[float], list[tuple[float, int, int, int, Candidate]]]] = {}
        self.floored: dict[int, tuple[Sequence[Candidate], set[int]]] = {}  # what sizing.floored kept -> their ids
        self.found: dict[tuple, tuple[tuple[Candidate, ...], str]] = {}
        self.options: dict[int, tuple[Candidate, LaunchOption]] = {}

    def alternatives(self, node: NewNode) -> tuple[tuple[LaunchOption, ...], str]:
        """The offerings besides its own that the node's launch may take, cheapest first
        (those ``minValues`` added last), and what of ``minValues`` they fall short of."""
        run, launch = self.run, node.view.pool.launch
        pods = node.info.pods.values()
        if launch.method is LaunchMethod.RUN_INSTANCES or node.standby or not pods or launch.max_offerings < 2 or node.candidate.offering.reservation:
            return (), ""
        kinds: dict[tuple, Pod] = {}  # the node's pods by constraints (which settle what is asked below)
        for p in pods:
            if p.claims:
                return (), ""
            kinds.setdefault(run.key(p), p)
        if not all(plan.plannable(p) for p in kinds.values()):
            return (), ""
        own = node.candidate
        zone = own.offering.zone if any(p.inter_pod for p in kinds.values()) else None
        need, count = node_need(node), len(node.info.pods)
        # Nodes of the same kinds of pod asking alike share an answer. Their offering lists are
        # built alike but are not always the same list (a pod placed on its own gets its
        # zone's): the list's length and ends tell apart lists of different makings.
        accepted = node.accepted
        fingerprint = (len(accepted), id(accepted[0]), id(accepted[-1])) if accepted else (0,)
        asked = (node.view.name, frozenset(kinds), fingerprint, zone, own.offering.capacity_type, need, count, id(own))
        answer = self.found.get(asked)
        if answer is None:
            answer = self.found[asked] = self._search(node, self._kin(node, zone), need, count, several=len(kinds) > 1)
        return tuple(self._option(node, c) for c in answer[0]), answer[1]

    def _kin(self, node: NewNode, zone: str | None) -> list[Candidate]:
        """The node's accepted offerings of its capacity type and architecture (and zone)."""
        own = node.candidate
        key = (id(node.accepted), own.offering.capacity_type, own.itype.architectures, zone)
        kept = self.kin.get(key)
        if kept is None or kept[0] is not node.accepted:
            kin = [
                c
                for c in node.accepted
                if c.offering.capacity_type is own.offering.capacity_type
                and c.itype.architectures == own.itype.architectures
                and (zone is None or c.offering.zone == zone)
            ]
            kept = self.kin[key] = (node.accepted, kin)
        return kept[1]

    def _search(self, node: NewNode, kin: list[Candidate], need: Resources, count: int, several: bool) -> tuple[tuple[Candidate, ...], str]:
        """The offerings, and what of ``minValues`` they fall short of ("" if nothing)."""
        run, launch, own = self.run, node.view.pool.launch, node.candidate
        tolerance = 0.0 if run.snapshot.one_new_node else launch.price_tolerance
        floor, ceiling = own.price * (1 - tolerance) - 1e-12, own.price * (1 + tolerance) + 1e-12
        limited = run.budget(node.view).left() != (None, None, None)
        large = floored(run, node.view, kin, (need,), node.info.pods.values())
        kept = self.floored.get(id(large))
        if large is not kin and (kept is None or kept[0] is not large):
            kept = self.floored[id(large)] = (large, {id(c) for c in large})
        sized = kept[1] if large is not kin and kept is not None else None  # None: no floor applies
        cpu, memory = need.cpu, need.memory
        kinds: list[Pod] | None = None  # (made at the first offering to filter)

        def holds(row: tuple[float, int, int, int, Candidate]) -> bool:
            nonlocal kinds
            _, room_cpu, room_memory, room_pods, c = row
            if room_cpu < cpu or room_memory < memory or room_pods < count or c is own or (sized is not None and id(c) not in sized):
                return False
            if not need.fits(c.allocatable) or run.blocked(c):
                return False
            if limited and (c.itype.vcpu > own.itype.vcpu or c.itype.memory_mib > own.itype.memory_mib):
                return False  # the pool's limits were counted with the planned machine
            if several and kinds is None:
                kinds = distinct(node.info.pods.values())
            return kinds is None or accepts(run, node, c, kinds)

        room = launch.max_offerings - 1
        prices, rows = self._rows(kin)
        start, end = bisect.bisect_left(prices, floor), bisect.bisect_right(prices, ceiling)
        found = [row[4] for row in itertools.islice((r for r in itertools.islice(rows, start, end) if holds(r)), room)]
        wanted = launch.min_values
        if not wanted.asked:
            return tuple(found), ""
        # minValues: dearer offerings, cheapest first, each of a type or family not yet offered
        types, families = {own.itype.name, *(c.itype.name for c in found)}, {own.itype.family, *(c.itype.family for c in found)}
        short = lambda: (wanted.instance_types or 0) > len(types) or (wanted.families or 0) > len(families)  # noqa: E731
        for row in itertools.islice(rows, end, None):
            if not short() or len(found) >= room:
                break
            c = row[4]
            new_type = (wanted.instance_types or 0) > len(types) and c.itype.name not in types
            new_family = (wanted.families or 0) > len(families) and c.itype.family not in families
            if (new_type or new_family) and holds(row):
                found.append(c)
                types.add(c.itype.name)
                families.add(c.itype.family)
        return tuple(found), _shortfall(wanted, types, families)

    def _rows(self, kin: list[Candidate]) -> tuple[list[float], list[tuple[float, int, int, int, Candidate]]]:
        """The offerings' prices, and their figures as plain rows (a search runs over many)."""
        kept = self.rows.get(id(kin))
        if kept is None or kept[0] is not kin:
            rows = [(c.price, c.allocatable.cpu, c.allocatable.memory, c.allocatable.pods, c) for c in kin]
            kept = self.rows[id(kin)] = (kin, [r[0] for r in rows], rows)
        return kept[1], kept[2]

    def _option(self, node: NewNode, c: Candidate) -> LaunchOption:
        kept = self.options.get(id(c))
        if kept is None or kept[0] is not c:
            labels = offering_node_info(node.view, c).labels  # (no hostname: the node's name adds it)
            kept = self.options[id(c)] = (c, LaunchOption(c.itype.name, c.offering.zone, c.price, c.allocatable + c.overhead, labels))
        return kept[1]


def options_of(run: Run, nodes: Sequence[NewNode]) -> tuple[list[NewNode], dict[str, tuple[tuple[LaunchOption, ...], str]]]:
    """The nodes to boot after all, and each one's alternatives and what of ``minValues``
    they fall short of. A node that falls short under the ``Strict`` policy is not booted:
    its pods wait, saying why."""
    chooser = _Chooser(run)
    options = {n.info.name: chooser.alternatives(n) for n in nodes}
    kept = []
    for node in nodes:
        name = node.info.name
        if options[name][1] and node.view.pool.launch.min_values.policy is MinValuesPolicy.STRICT:
            options[name] = _narrowing_taken_off(run, chooser, node, options[name][1])
            if unmet := options[name][1]:
                for key in list(node.info.pods):
                    _give_back(run, node, key, unmet)
                run.forget(name)
                del options[name]
                continue
        kept.append(node)
    return kept, options


def _narrowing_taken_off(run: Run, chooser: _Chooser, node: NewNode, unmet: str) -> tuple[tuple[LaunchOption, ...], str]:
    """The node's options once the pods that narrowed them below its pool's ``Strict``
    minValues are taken off, the last placed first (a pod pinned to one type that joined a
    node booted for others): those pods wait, saying why, not the pods the node was booted
    for. (Dropping the whole node left every pod it held waiting, decision after decision,
    while the narrowing pod kept joining their next node.) Its first pod stays: a node
    still short with it alone is dropped whole."""
    answer: tuple[tuple[LaunchOption, ...], str] = ((), unmet)
    placed = list(node.info.pods)
    while answer[1] and len(placed) > 1:
        _give_back(run, node, placed.pop(), answer[1])
        answer = chooser.alternatives(node)
    return answer


def _give_back(run: Run, node: NewNode, key: PodKey, unmet: str) -> None:
    """``key`` off the node, waiting for ``unmet``, to be placed again where it fits."""
    pod = node.info.pods[key]
    run.unplace(key)
    run.waiting[key] = f"pool {node.view.name}: {unmet}"
    run.unbooted.append(pod)


def _shortfall(wanted: MinValues, types: set[str], families: set[str]) -> str:
    """What of ``wanted`` these types and families fall short of ("" if nothing)."""
    unmet = [
        f"{have} {what} of the {asked} asked"
        for have, what, asked in ((len(types), "instance type(s)", wanted.instance_types), (len(families), "family(ies)", wanted.families))
        if asked and have < asked
    ]
    return ("minValues not met: the pods' offerings give " + " and ".join(unmet)) if unmet else ""


def strict_shortfall(view: PoolView, offerings: Sequence[Candidate], pod: Pod) -> str:
    """Under the pool's ``Strict`` minValues, what the offerings that hold ``pod`` fall
    short of ("" if nothing): such a pool is passed over for the pod while planning, as
    Karpenter passes over a NodePool whose requirements cannot meet their minValues. (A
    node the pod shares with others may still fall short: ``options_of`` then drops it.)"""
    launch = view.pool.launch
    wanted = launch.min_values
    if not wanted.asked or wanted.policy is not MinValuesPolicy.STRICT or launch.method is LaunchMethod.RUN_INSTANCES:
        return ""
    if pod.claims or not plan.plannable(pod):
        return ""  # (launched as planned: minValues does not apply)
    holding = [c.itype for c in offerings if pod.requests.fits(c.allocatable)]
    return _shortfall(wanted, {t.name for t in holding}, {t.family for t in holding})
