"""Step 7: nodes nothing needs (no pods but DaemonSets', not kept for standby, not reserved
or held) are stopped once unneeded for the idle grace; they are known before new nodes are
planned, so the capacity they free counts toward pool limits at once."""

from __future__ import annotations

from nodemanager.model import NodeName, NodeState
from nodemanager.scaler.decision import StopOrder
from nodemanager.scaler.run import Run, holds_work


def _idle_since(run: Run) -> dict[str, float]:
    """Existing nodes nothing needs (no pods, not kept for standby), with since when, by name."""
    out = {}
    infos, kept, reserved, since = run.infos, run.kept, run.snapshot.reserved | run.snapshot.operator_held, run.snapshot.unneeded_since
    for name, state in run.node_state.items():  # the existing live nodes
        if state in _MAY_IDLE and name not in kept and name not in reserved and not holds_work(infos[name]):
            out[name] = since.get(NodeName(name), run.now)
    return dict(sorted(out.items()))


def mark_expired(run: Run) -> None:
    """Nodes whose idle grace is over are stopped now and no longer count against limits."""
    grace = run.memory.settings.nodes.idle_grace
    run.stopping = {name for name, since in _idle_since(run).items() if run.now - since >= grace}


def stops(run: Run) -> tuple[list[StopOrder], dict[NodeName, float]]:
    grace = run.memory.settings.nodes.idle_grace
    stops: list[StopOrder] = []
    unneeded: dict[NodeName, float] = {}
    for name, since in _idle_since(run).items():
        idle = run.now - since
        if idle >= grace:
            stops.append(StopOrder(NodeName(name), f"unneeded for {idle:.0f}s (idle grace {grace:g}s)"))
        else:
            unneeded[NodeName(name)] = since
    return stops, unneeded


_MAY_IDLE = frozenset({NodeState.CREATING, NodeState.CREATED, NodeState.AVAILABLE})  # the states an unneeded node is stopped from
