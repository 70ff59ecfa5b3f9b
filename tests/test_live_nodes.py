"""The live nodes a computation starts from (``LiveNodes``), followed from one computation to
the next by what changed, are what a walk of every record gives: the same names, states,
zones and pictures, and by readiness rank the same open nodes (those a fill may use),
whether the makers of the records and of the pods by node say what changed (``Since``) or
the changes are found by comparing every entry; and the makers say the truth."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from bench_modules import load_benchmark
from builders import CATALOG, ZONES, binpack_pool, cell_pool, node, pod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodemanager.cluster.workload import parse_workload
from nodemanager.config import parse_config
from nodemanager.model import LIVE_STATES, NodeState, PodPhase
from nodemanager.model.by_node import PodsByNode
from nodemanager.model.since import Since
from nodemanager.scaler import BindingNodeScaler
from nodemanager.scaler.decision import Decision
from nodemanager.scaler.live_nodes import READINESS, LiveNodes
from nodemanager.scaler.pictures import NodePictures
from nodemanager.scaler.pools import pool_views
from nodemanager.scaler.snapshot import ClusterSnapshot
from nodemanager.scheduling import NodeInfo
from nodemanager.simulator import Simulation

VIEWS = {v.name: v for v in pool_views([cell_pool(), binpack_pool()], CATALOG, 0, {})}
STATES = [NodeState.AVAILABLE, NodeState.CREATING, NodeState.CREATED, NodeState.CLAIMED, NodeState.TERMINATING, NodeState.TERMINATED]
STEPS = st.lists(
    st.tuples(st.sampled_from(["join", "leave", "state", "assign", "bind", "finish", "spoil", "other"]), st.integers(0, 30), st.booleans()),
    min_size=1,
    max_size=30,
)


def _seen(info: NodeInfo) -> tuple:
    return (info.name, info.zone, info.allocatable, info.requested, list(info.pods))


def _open(live: LiveNodes) -> dict[int, list[str]]:
    """The nodes of each rank a fill looks at: the open ones that are (``untaken``), in order."""
    return {rank: [n for n in names if not live.infos[n].cell_taken] for rank, names in live.open.items()}


def _walked(live: LiveNodes) -> tuple:
    infos = {name: _seen(i) for name, i in live.infos.items()}
    return (infos, dict(live.states), _open(live), +live.zones, dict(live.binding))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_the_live_nodes_followed_are_those_a_walk_of_every_record_gives(steps: list[tuple[str, int, bool]]) -> None:
    pictures, live = NodePictures(CATALOG, 0, ()), LiveNodes()
    records = {f"n{i:02d}": node(f"n{i:02d}", "m.xlarge", pool="general", zone=ZONES[i % 2]) for i in range(0, 8, 2)}
    placed: dict[str, tuple] = {}
    nodes_before, placed_before = tuple(records.values()), dict(placed)
    for now, (what, i, linked) in enumerate(steps):
        names = sorted(records)
        target = names[i % len(names)] if names else "n00"
        changed: set[str] = set()
        if what == "join":  # a name that sorts anywhere among the others'
            name = f"n{i:02d}x"
            records[name] = node(
                name, "a.large" if i % 2 else "m.xlarge", pool="cells" if i % 2 else "general", zone=ZONES[i % 2], state=STATES[i % len(STATES)]
            )
            changed.add(name)
        elif what == "leave" and target in records:
            del records[target]
            changed.add(target)
        elif what == "state" and target in records:
            records[target] = dataclasses.replace(records[target], state=STATES[(STATES.index(records[target].state) + 1 + i) % len(STATES)])
            changed.add(target)
        elif what == "assign" and target in records:  # a decision bound a waiting pod to it (or no longer)
            records[target] = dataclasses.replace(records[target], bound_pods=() if records[target].bound_pods else (f"default/w{now}",))
            changed.add(target)
        elif what == "bind":
            on = (*placed.get(target, ()), pod(f"p{now}", "100m", node=target, phase=PodPhase.RUNNING))
            placed[target] = tuple(sorted(on, key=lambda p: p.key))  # in key order, as the cache gives them
        elif what == "finish" and placed.get(target):
            if rest := placed[target][1:]:
                placed[target] = rest
            else:
                del placed[target]
        elif what == "spoil" and target in live.infos:  # what a computation does with a picture, then says
            live.infos[target].add_pod(pod(f"s{now}", "100m", node=target))
            pictures.spoiled([target])
        nodes = tuple(records.values())
        grouped_placed = dict(placed)
        placed_changed = {n for n in placed_before.keys() | grouped_placed.keys() if placed_before.get(n) is not grouped_placed.get(n)}
        nodes_since = Since(nodes_before, nodes, {n: records.get(n) for n in changed}) if linked else None
        placed_since = Since(placed_before, grouped_placed, {n: grouped_placed.get(n) for n in placed_changed}) if linked else None
        all_pods = tuple(p for on in grouped_placed.values() for p in on)
        snapshot = ClusterSnapshot(all_pods, nodes, nodes_since=nodes_since, grouped=PodsByNode(all_pods, (), grouped_placed, placed_since))
        live.follow(pictures, snapshot, VIEWS)
        pictures.settle()  # (a computation settles what it placed: none here)
        fresh = LiveNodes()
        fresh.follow(NodePictures(CATALOG, 0, ()), ClusterSnapshot(all_pods, nodes), VIEWS)
        assert _walked(live) == _walked(fresh), f"after {steps[: now + 1]}"
        assert sorted(live.infos) == sorted(n for n, r in records.items() if r.state in LIVE_STATES)
        assert _open(live) == {
            rank: sorted(n for n in live.infos if READINESS.get(records[n].state) == rank and not live.infos[n].cell_taken) for rank in live.open
        }
        assert all(names == sorted(names) and all(READINESS.get(records[n].state) == rank for n in names) for rank, names in live.open.items())
        nodes_before, placed_before = nodes, grouped_placed


def test_a_follow_that_fails_half_way_begins_again_from_nothing() -> None:
    """A picture that cannot be made (an error in the middle of a follow) leaves nothing half
    followed: the next follow walks every record again and gives what a fresh walk gives."""
    pictures, live = NodePictures(CATALOG, 0, ()), LiveNodes()
    records = [node(f"n{i}", "m.xlarge", pool="general", zone=ZONES[i % 2]) for i in range(4)]
    live.follow(pictures, ClusterSnapshot((), tuple(records)), VIEWS)
    records[2] = dataclasses.replace(records[2], state=NodeState.CREATING)
    records.append(node("n9", "m.xlarge", pool="general", zone=ZONES[1]))
    snapshot = ClusterSnapshot((), tuple(records))
    info = pictures.info

    def failing(*args: object) -> NodeInfo:
        raise RuntimeError("no picture")

    pictures.info = failing  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        live.follow(pictures, snapshot, VIEWS)
    pictures.info = info  # type: ignore[method-assign]
    live.follow(pictures, snapshot, VIEWS)
    fresh = LiveNodes()
    fresh.follow(NodePictures(CATALOG, 0, ()), snapshot, VIEWS)
    assert _walked(live) == _walked(fresh)
    assert sorted(live.infos) == ["n0", "n1", "n2", "n3", "n9"]
    assert live.open == {0: ["n0", "n1", "n3", "n9"], 1: [], 2: ["n2"]}


def test_in_a_simulated_run_every_computation_is_what_a_fresh_scaler_computes() -> None:
    """The controller's records and the cache's pods by node say what changed (``Since``),
    which the scaler follows; disruption's what-ifs do not (the decision after one compares
    every entry). Through a simulated hour of arrivals, boots, finishes and stops on a cell
    pool and a bin-packing one, every computation of the running scaler (provisioning's and
    the what-ifs) is the one a fresh scaler makes of the same snapshot, and most decisions
    that followed a decision on other nodes were followed by what the makers said."""
    bench = load_benchmark("simulate")
    config, catalog = parse_config(bench.CONFIG, "benchmark", Path("."))
    sim = Simulation(config, catalog, parse_workload(bench.workload(150, 1.0, 3), "benchmark"), clairvoyant=False)
    scaler = sim.controller.state.scaler
    compute = scaler.compute
    last: list[ClusterSnapshot] = []
    counts = {"computed": 0, "after a decision": 0, "linked": 0}

    def both(snapshot: ClusterSnapshot, now: float) -> Decision:
        decision = compute(snapshot, now)
        assert decision == BindingNodeScaler(scaler.settings, scaler.catalog).compute(snapshot, now), f"at {now}"
        counts["computed"] += 1
        if last and not last[-1].one_new_node and not snapshot.one_new_node and last[-1].nodes is not snapshot.nodes:
            counts["after a decision"] += 1
            counts["linked"] += snapshot.nodes_since is not None and snapshot.nodes_since.links(last[-1].nodes, snapshot.nodes)
        last[:] = [snapshot]
        return decision

    scaler.compute = both  # type: ignore[method-assign]
    report = sim.run()
    assert report["pods"]["bound"] == 150
    assert counts["computed"] > 300  # (decisions and what-ifs)
    assert counts["after a decision"] > 50
    assert counts["linked"] >= 0.75 * counts["after a decision"]
