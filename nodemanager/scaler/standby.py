"""Step 5: standby pools (``pools[].standby``). Entries first take idle nodes that match
them, after pods had their pick of existing nodes; what is missing is booted last, within
the pool's limits."""

from __future__ import annotations

from collections.abc import Iterable

from nodemanager.model import BINDABLE_STATES, CapacityType
from nodemanager.scaler.pools import Candidate, PoolView
from nodemanager.scaler.run import NewNode, Run, holds_work


def _standby_entries(run: Run) -> Iterable[tuple[PoolView, str, CapacityType, str | None, int]]:
    for view in run.views:
        for entry in view.pool.standby:
            itype = entry.instance_type or run.memory.settings.nodes.default_instance_type
            yield view, itype, CapacityType.SPOT if entry.spot else CapacityType.ON_DEMAND, entry.zone, entry.count


def claim_standby(run: Run) -> None:
    """Standby entries take idle nodes that match them (after pods had their pick)."""
    for view, itype, capacity, zone, count in _standby_entries(run):
        matching = sorted(
            name
            for name, info in run.infos.items()
            if info.instance_type == itype
            and info.pool == view.name
            and info.capacity_type is capacity
            and (not zone or info.zone == zone)
            and name not in run.kept
            and not holds_work(info)
            and run.node_state.get(name) in BINDABLE_STATES
        )
        taken = matching[:count]  # the first by name
        run.kept.update(taken)
        run.missing.append((view, itype, capacity, zone, count - len(taken)))


def top_up_standby(run: Run) -> None:
    for view, itype, capacity, zone, want in run.missing:
        if want <= 0:
            continue  # the entry is made up (most decisions): no offering to look through
        options = [
            c
            for c in view.candidates
            if c.itype.name == itype and c.offering.capacity_type is capacity and (not zone or c.offering.zone == zone) and not run.blocked(c)
        ]
        budget = run.budget(view)
        for _ in range(want):
            if not options or budget.copies(options[0].itype) == 0:
                break
            budget.spend(options[0].itype)
            _new_standby(run, view, options[0])


def _new_standby(run: Run, view: PoolView, candidate: Candidate) -> NewNode:
    node = run.new_node(view, candidate, standby=True)
    run.kept.add(node.info.name)
    return node


def taken_by_pods(run: Run, started: list[NewNode]) -> list[NewNode]:
    """The new standby nodes that pods took when they were placed again (their own node was
    not booted after all, ``scaler._launches``): each now boots for its pods, no longer as
    standby. Returned so that the standby pool gets nodes in their place."""
    taken = [n for n in started if n.standby and n.info.pods]
    for node in taken:
        node.standby = False
        run.kept.discard(node.info.name)
    return taken


def replace_taken(run: Run, taken: list[NewNode], room: int) -> list[NewNode]:
    """A new standby node of the same offering for each of ``taken``, at most ``room`` (what
    the boot cap leaves) and within the pool's limits: the decision the next one would
    make, finding those nodes busy."""
    out: list[NewNode] = []
    for node in taken[: max(room, 0)]:
        if run.blocked(node.candidate) or run.budget(node.view).copies(node.candidate.itype) == 0:
            continue
        out.append(_new_standby(run, node.view, node.candidate))
    return out
