"""Step 6, and what it carries to the next computations: at most ``maxBootsPerLoop`` new
nodes, highest priority first; the nodes past the cap are kept as a deferred plan and reused
while nothing they were planned from changes. Also the holds that keep pods from new nodes
(a node booted for them in vain, or one still booting for them)."""

from __future__ import annotations

import dataclasses

from nodemanager.model import PodKey
from nodemanager.scaler import gangs
from nodemanager.scaler.deferred import DeferredNode, DeferredPlan, plain
from nodemanager.scaler.run import NewNode, PodClass, Run
from nodemanager.scheduling import CycleState
from nodemanager.scheduling.plugins.queue_sort import priority_key


def cap_boots(run: Run) -> list[NewNode]:
    cap = run.memory.settings.nodes.max_boots_per_loop
    ordered = sorted(
        run.new_nodes.values(),
        key=lambda n: (n.standby, min((priority_key(p) for p in n.info.pods.values()), default=()), n.info.name),
    )
    started, dropped = ordered[:cap], ordered[cap:]
    run.memory.deferred = _deferral(run, started, dropped)
    for node in dropped:
        for key in list(node.info.pods):
            run.unplace(key)
            run.waiting[key] = f"waiting for a boot slot (at most {cap} boots per loop)"
        run.forget(node.info.name)
    gangs.drop_incomplete_gangs(run)
    return [n for n in started if n.info.name in run.new_nodes]


def _deferral(run: Run, started: list[NewNode], dropped: list[NewNode]) -> DeferredPlan | None:
    """The dropped nodes, to be started by the next computations, if they can be."""
    later = [n for n in dropped if not n.standby]
    if not (later or run.carried) or run.last or not all(plain(p) for n in later for p in n.info.pods.values()):
        return None
    now_bound = {k for n in started for k in n.info.pods}
    nodes = tuple(DeferredNode(n.view.name, n.candidate, tuple(n.accepted), tuple(n.info.pods)) for n in later) + tuple(run.carried)
    pending = {k: v for k, v in class_keys(run).items() if k not in now_bound}
    return DeferredPlan(nodes, pending, run.memory.views, tuple(v.name for v in run.views), frozenset(run.unavailable))


def class_keys(run: Run) -> dict[PodKey, tuple]:
    """The pods left for new nodes -> their class key and requests (made only when a
    deferral is stored or checked)."""
    return {p.key: key for key, pods in run.left_for_new for p in pods}


def reuse_deferred(run: Run, classes: list[PodClass]) -> None:
    """Place the pods the last capped plan left for later on the nodes it planned for them,
    if nothing they were planned from has changed; else (or if a pod does not fit after
    all) leave everything to ``place_on_new``. Only as many nodes as this loop may boot are
    made again; the rest stay as planned, their pods waiting for a boot slot (making
    thousands of nodes again in every loop to start ten was most of a loop's work)."""
    deferred = run.memory.deferred
    views = {v.name: v for v in run.views}
    if deferred is None or not deferred.matches(class_keys(run), run.memory.views, tuple(views), frozenset(run.unavailable)):
        return
    pending = {p.key: p for c in classes for p in c.pods}
    cap = run.memory.settings.nodes.max_boots_per_loop
    made: list[NewNode] = []
    later: list[DeferredNode] = []
    budgets = {name: run.budget(view) for name, view in views.items()}
    for planned in deferred.nodes:
        keys = [k for k in planned.pods if k in pending]
        if not keys:
            continue  # its pods found room on nodes started since
        if len(made) >= cap:
            later.append(planned if len(keys) == len(planned.pods) else dataclasses.replace(planned, pods=tuple(keys)))
            continue
        budget = budgets[planned.pool]
        if budget.copies(planned.candidate.itype) == 0:  # the pool's limit was reached meanwhile (a replacement booted)
            _undo(run, made)
            return
        budget.spend(planned.candidate.itype)
        node = run.new_node(views[planned.pool], planned.candidate, accepted=planned.accepted)
        made.append(node)
        for key in keys:
            pod = pending[key]
            if not (node.info.fit_count(node.info.fit_request(pod), 1) > 0 and run.place(pod, node.info, CycleState())):
                _undo(run, made)
                return
    run.carried = later
    waiting = {k for n in later for k in n.pods}
    for key in waiting:
        run.waiting[key] = f"waiting for a boot slot (at most {cap} boots per loop)"
    for cls in classes:
        cls.pods = [p for p in cls.pods if p.key not in run.bindings and p.key not in waiting]


def _undo(run: Run, made: list[NewNode]) -> None:
    for node in made:
        for placed in list(node.info.pods):
            run.unplace(placed)
        run.forget(node.info.name)


def hold_back(run: Run, classes: list[PodClass]) -> None:
    """Pods a node was booted for in vain (``snapshot.held``), and the pods of their
    class, get no new node: they are unschedulable, with the reason, until the hold ends.
    Nor does a pod a node is still booting for (``snapshot.on_the_way``): it waits."""
    held, on_the_way = run.snapshot.held, run.snapshot.on_the_way
    if not held and not on_the_way:
        return
    for c in classes:
        why = next((held[p.key] for p in c.pods if p.key in held), None)
        if why is not None:
            for pod in c.pods:
                run.unschedulable[pod.key] = why
            c.pods = []
        elif on_the_way and any(p.key in on_the_way for p in c.pods):
            for pod in c.pods:
                if pod.key in on_the_way:
                    run.waiting[pod.key] = on_the_way[pod.key]
            c.pods = [p for p in c.pods if p.key not in on_the_way]
