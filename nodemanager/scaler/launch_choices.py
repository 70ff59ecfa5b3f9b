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
devices, standby nodes and nodes whose pods constrain the type itself keep their offering.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodemanager.config.launch_schema import LaunchMethod
from nodemanager.model import LaunchOption, Resources
from nodemanager.scaler import interpod_plan as plan
from nodemanager.scaler.pools import Candidate, offering_node_info
from nodemanager.scaler.run import NewNode, Run
from nodemanager.scaler.sizing import accepts, floored, node_need


class _Chooser:
    """One computation's answers: offering lists and options are shared by the nodes of
    one group (as ``sizing.right_size`` shares its answers)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.kin: dict[tuple, tuple[Sequence[Candidate], list[Candidate]]] = {}
        self.found: dict[tuple, tuple[Candidate, ...]] = {}
        self.options: dict[int, tuple[Candidate, LaunchOption]] = {}

    def alternatives(self, node: NewNode) -> tuple[LaunchOption, ...]:
        """The offerings besides its own that the node's launch may take, cheapest first."""
        run, launch = self.run, node.view.pool.launch
        pods = node.info.pods.values()
        if launch.method is LaunchMethod.RUN_INSTANCES or node.standby or not pods or launch.max_offerings < 2:
            return ()
        if any(p.claims or not plan.plannable(p) for p in pods):
            return ()
        own = node.candidate
        zone = own.offering.zone if any(p.inter_pod for p in pods) else None
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
        need, count = node_need(node), len(node.info.pods)
        several = len({run.key(p) for p in pods}) > 1
        asked = (key, need, count, id(own))
        found = None if several else self.found.get(asked)
        if found is None:
            found = self._search(node, kept[1], need, count, several)
            if not several:
                self.found[asked] = found
        return tuple(self._option(node, c) for c in found)

    def _search(self, node: NewNode, kin: list[Candidate], need: Resources, count: int, several: bool) -> tuple[Candidate, ...]:
        run, launch, own = self.run, node.view.pool.launch, node.candidate
        tolerance = 0.0 if run.snapshot.one_new_node else launch.price_tolerance
        ceiling = own.price * (1 + tolerance) + 1e-12
        limited = run.budget(node.view).left() != (None, None, None)
        found: list[Candidate] = []
        for c in floored(run, node.view, kin, (need,)):
            if c.price > ceiling:
                break  # (cheapest first)
            room = c.allocatable
            if c is own or room.pods < count or not need.fits(room) or run.blocked(c):
                continue
            if limited and (c.itype.vcpu > own.itype.vcpu or c.itype.memory_mib > own.itype.memory_mib):
                continue  # the pool's limits were counted with the planned machine
            if several and not accepts(run, node, c):
                continue
            found.append(c)
            if len(found) == launch.max_offerings - 1:
                break
        return tuple(found)

    def _option(self, node: NewNode, c: Candidate) -> LaunchOption:
        kept = self.options.get(id(c))
        if kept is None or kept[0] is not c:
            labels = offering_node_info(node.view, c).labels  # (no hostname: the node's name adds it)
            kept = self.options[id(c)] = (c, LaunchOption(c.itype.name, c.offering.zone, c.price, c.allocatable + c.overhead, labels))
        return kept[1]


def options_of(run: Run, nodes: Sequence[NewNode]) -> dict[str, tuple[LaunchOption, ...]]:
    """The alternatives of each node to boot, by name."""
    chooser = _Chooser(run)
    return {n.info.name: chooser.alternatives(n) for n in nodes}
