"""Consolidation and disruption budgets: the planner's rules (pure), the budgets' arithmetic
and cron windows, and the controller on the virtual clock (candidates, validation,
do-not-disrupt, budgets, replacement before removal)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
from builders import CATALOG, OD, SPOT, TYPES, ZONES, pod
from harness import Harness, arrive, binpack_pool
from hypothesis import given, settings
from hypothesis import strategies as st

from cloud.catalog import Catalog
from nodemanager.cluster.workload import ClusterObjects, WorkloadError, parse_cluster_objects
from nodemanager.config import parse_config
from nodemanager.config.schema import Disruption, DisruptionBudget, DisruptionReason, Pool, Standby
from nodemanager.controller.budgets import active, allowed
from nodemanager.controller.disruption import VALIDATION_DELAY
from nodemanager.errors import ConfigError, InvalidManifest
from nodemanager.model import Gpu, InstanceType, Node, NodeName, NodeState, Pod, PodPhase, Resources
from nodemanager.model.interpod import parse_label_selector
from nodemanager.model.pdb import PodDisruptionBudget
from nodemanager.model.pod import OwnerRef
from nodemanager.model.selectors import Taint, TaintEffect, Toleration
from nodemanager.scaler import ClusterSnapshot, Decision, NodeSpec
from nodemanager.scaler.consolidation import SIZES_KEPT, SPOT_TO_SPOT_CHOICES, CheaperSizes, Planner
from nodemanager.scaler.drift import drifted

HOUR = 3600.0


# -- budgets --------------------------------------------------------------------------------


@pytest.mark.parametrize(("nodes", "of", "limit"), [("10%", 15, 2), ("10%", 10, 1), ("10%", 0, 0), ("0", 50, 0), ("3", 2, 3), ("100%", 7, 7), ("1%", 1, 1)])
def test_a_budget_share_rounds_up_like_karpenter(nodes: str, of: int, limit: int) -> None:
    assert DisruptionBudget(nodes=nodes).limit(of) == limit


def test_a_scheduled_budget_is_active_for_its_duration_after_each_firing() -> None:
    budget = DisruptionBudget(nodes="0", schedule="0 9 * * *", duration=8 * HOUR)  # 09:00-17:00 UTC
    day = 20 * 24 * HOUR  # 1970-01-21, 00:00 UTC
    assert not active(budget, day + 8.99 * HOUR)
    assert active(budget, day + 9 * HOUR)
    assert active(budget, day + 16.99 * HOUR)
    assert not active(budget, day + 17.01 * HOUR)
    assert active(DisruptionBudget(nodes="0"), day)  # no schedule: always


def test_the_most_restrictive_active_budget_for_the_reason_wins() -> None:
    budgets = [
        DisruptionBudget(nodes="50%"),
        DisruptionBudget(nodes="2", reasons=[DisruptionReason.UNDERUTILIZED]),
        DisruptionBudget(nodes="0", reasons=[DisruptionReason.EMPTY], schedule="0 0 * * *", duration=HOUR),
    ]
    pool = Pool(name="p", disruption=Disruption(budgets=budgets))
    assert allowed(pool, DisruptionReason.UNDERUTILIZED, 0.0, 10, 0)[0] == 2
    assert allowed(pool, DisruptionReason.UNDERUTILIZED, 0.0, 10, 1)[0] == 1  # one is being disrupted
    assert allowed(pool, DisruptionReason.EMPTY, 30.0, 10, 0)[0] == 0  # inside the midnight window
    assert allowed(pool, DisruptionReason.EMPTY, 2 * HOUR, 10, 0)[0] == 5  # after it: 50%
    assert allowed(Pool(name="q"), DisruptionReason.EMPTY, 0.0, 30, 0)[0] == 3  # the default: 10%


@pytest.mark.parametrize(
    ("block", "needle"),
    [
        ("{budgets: [{nodes: '150%'}]}", "pools[0].disruption.budgets[0].nodes"),
        ("{budgets: [{nodes: '-1'}]}", "pools[0].disruption.budgets[0].nodes"),
        ("{budgets: [{nodes: '1', schedule: '0 9 * * *'}]}", "schedule and duration go together"),
        ("{budgets: [{nodes: '1', schedule: '61 9 * * *', duration: 1h}]}", "not a cron schedule"),
        ("{budgets: [{nodes: '1', reasons: [Sometimes]}]}", "pools[0].disruption.budgets[0].reasons[0]: expected one of 'Empty'"),
        ("{consolidationPolicy: Always}", "pools[0].disruption.consolidationPolicy"),
        ("{consolidateAfter: -5s}", "pools[0].disruption.consolidateAfter"),
        ("{consolidationPriceImprovementFactor: 1.5}", "pools[0].disruption.consolidationPriceImprovementFactor"),
        ("{consolidationPriceImprovementFactor: -0.1}", "pools[0].disruption.consolidationPriceImprovementFactor"),
        ("{consolidationPriceImprovementFactor: .nan}", "pools[0].disruption.consolidationPriceImprovementFactor"),
        ("{consolidationThreshold: 2}", "consolidationThreshold goes with consolidationPolicy: Balanced"),
        ("{consolidationPolicy: Balanced, consolidationThreshold: 4}", "pools[0].disruption.consolidationThreshold"),
        ("{consolidationPayback: {horizon: 0s}}", "pools[0].disruption.consolidationPayback.horizon"),
        ("{consolidationPayback: {podStartup: -1s}}", "pools[0].disruption.consolidationPayback.podStartup"),
        ("{consolidationPayback: {enable: false}}", "pools[0].disruption.consolidationPayback.enable"),
        ("{consolidationCooldown: -5m}", "pools[0].disruption.consolidationCooldown"),
    ],
)
def test_a_bad_disruption_block_names_its_field(block: str, needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f"pools: [{{name: a, disruption: {block}}}]\n", "provider.yaml", Path("."))
    assert needle in str(caught.value)


# -- the planner (pure) ---------------------------------------------------------------------


def _node(name: str, itype: str = "m.xlarge", capacity=OD) -> Node:
    return Node(NodeName(name), "general", itype, capacity, "zone-1a", state=NodeState.AVAILABLE)


def _spec(itype: str, price: float, capacity=OD, standby: bool = False) -> NodeSpec:
    return NodeSpec(NodeName("new"), "general", itype, capacity, "zone-1a", price, Resources(), {}, standby=standby)


def _planner(decision: Decision, spot_choices: int = 0, biggest: tuple[int, int] = (64_000, 1 << 40)) -> Planner:
    """A planner whose scaler answers ``decision``; offerings under any price hold ``biggest``."""
    prices = {"a.large": 0.10, "m.xlarge": 0.20, "m.4xlarge": 0.80}
    return Planner(lambda _snapshot: decision, lambda n: prices[n.instance_type], lambda _n: spot_choices, sizes_below=lambda _price, _pods: [biggest])


def test_a_replacement_must_be_strictly_cheaper_and_of_another_type() -> None:
    snapshot = ClusterSnapshot((), (_node("n1"),))
    ok, _ = _planner(Decision(start=(_spec("a.large", 0.10),))).consolidate(snapshot, [_node("n1")])
    assert ok is not None
    assert ok.savings == pytest.approx(0.10)
    same_price, why = _planner(Decision(start=(_spec("b.large", 0.20),))).consolidate(snapshot, [_node("n1")])
    assert same_price is None
    assert "would not be cheaper" in why
    same_type, why = _planner(Decision(start=(_spec("m.xlarge", 0.15),))).consolidate(snapshot, [_node("n1")])
    assert same_type is None
    assert "same type" in why
    two, why = _planner(Decision(start=(_spec("a.large", 0.05), _spec("a.large", 0.05)))).consolidate(snapshot, [_node("n1")])
    assert two is None
    assert "2 new nodes" in why
    standby, why = _planner(Decision(start=(_spec("a.large", 0.05, standby=True),))).consolidate(snapshot, [_node("n1")])
    assert standby is None
    assert "standby" in why


@pytest.mark.parametrize(
    ("factor", "replacement_price", "replaced"),
    [(1.0, 0.19, True), (1.0, 0.20, False), (0.8, 0.17, False), (0.8, 0.161, False), (0.8, 0.16, True), (0.8, 0.15, True), (0.0, 0.01, False)],
)
def test_a_replacement_must_save_the_share_the_price_improvement_factor_asks(factor: float, replacement_price: float, replaced: bool) -> None:
    """Karpenter's RFC "consolidation price improvement factor": replaced only when the new
    node saves at least 1 - factor of what it replaces ($0.20/h here: 0.8 asks $0.04/h, and
    $0.16 is enough) and is cheaper at all; 0 never replaces. A deletion saves everything:
    no factor holds it back."""
    snapshot = ClusterSnapshot((), (_node("n1"),))
    planner = _planner(Decision(start=(_spec("a.large", replacement_price),)))
    planner.price_factor = lambda nodes: factor
    result, why = planner.consolidate(snapshot, [_node("n1")])
    assert (result is not None) is replaced
    if not replaced and factor < 1.0:
        assert f"consolidationPriceImprovementFactor {factor:g}" in why
    deleted, _ = _planner(Decision()).consolidate(snapshot, [_node("n1")])
    planner = _planner(Decision())
    planner.price_factor = lambda nodes: factor
    assert planner.consolidate(snapshot, [_node("n1")])[0] == deleted is not None


def test_the_most_demanding_pools_price_improvement_factor_holds_for_nodes_of_several_pools() -> None:
    pools = [
        binpack_pool("a", disruption=Disruption(consolidation_price_improvement_factor=0.9)),
        binpack_pool("b", disruption=Disruption(consolidation_price_improvement_factor=0.6)),
    ]
    h = Harness(*pools)
    nodes = [dataclasses.replace(_node("n1"), pool="a"), dataclasses.replace(_node("n2"), pool="b"), dataclasses.replace(_node("n3"), pool="gone")]
    factor = h.controller.disruption.planner.price_factor
    assert factor(nodes[:1]) == 0.9
    assert factor(nodes) == 0.6
    assert factor(nodes[2:]) == 1.0  # a pool no longer configured: any saving


def test_spot_is_replaced_by_spot_only_with_many_cheaper_spot_types() -> None:
    spot_node = _node("n1", capacity=SPOT)
    snapshot = ClusterSnapshot((), (spot_node,))
    few, why = _planner(Decision(start=(_spec("a.large", 0.05, SPOT),)), spot_choices=SPOT_TO_SPOT_CHOICES - 1).consolidate(snapshot, [spot_node])
    assert few is None
    assert "spot to spot" in why
    many, _ = _planner(Decision(start=(_spec("a.large", 0.05, SPOT),)), spot_choices=SPOT_TO_SPOT_CHOICES).consolidate(snapshot, [spot_node])
    assert many is not None


def test_the_pools_spot_to_spot_minimum_decides_on_both_sides_of_it() -> None:
    spot_node = _node("n1", capacity=SPOT)
    snapshot = ClusterSnapshot((), (spot_node,))

    def planner(have: int, need: int) -> Planner:
        plan = _planner(Decision(start=(_spec("a.large", 0.05, SPOT),)), spot_choices=have)
        plan.spot_minimum = lambda _node: need
        return plan

    refused, why = planner(2, 3).consolidate(snapshot, [spot_node])
    assert refused is None
    assert why == "spot to spot needs 3 cheaper spot types (has 2)"
    assert planner(3, 3).consolidate(snapshot, [spot_node])[0] is not None


def test_consolidation_reads_the_spot_to_spot_minimum_from_the_nodes_pool() -> None:
    from nodemanager.controller.consolidation_prices import ConsolidationPrices

    pools = {"few": Pool(name="few", disruption={"spotToSpotMinTypes": 4}), "default": Pool(name="default")}
    prices = ConsolidationPrices(SimpleNamespace(pool_config=pools.get))  # type: ignore[arg-type]
    assert prices.spot_minimum(dataclasses.replace(_node("n1", capacity=SPOT), pool="few")) == 4
    assert prices.spot_minimum(dataclasses.replace(_node("n2", capacity=SPOT), pool="default")) == SPOT_TO_SPOT_CHOICES == 15
    assert prices.spot_minimum(dataclasses.replace(_node("n3", capacity=SPOT), pool="gone")) == SPOT_TO_SPOT_CHOICES
    with pytest.raises(ValueError, match="spotToSpotMinTypes"):
        Pool(name="bad", disruption={"spotToSpotMinTypes": 0})


def test_nodes_that_hold_one_pod_are_left_out_of_multi_node_consolidation() -> None:
    """Two cell-pool nodes come first in the order: each of their pods needs a new node of
    its own, so any prefix with both fails. The two ordinary nodes after them still merge
    (their pods fit elsewhere), instead of one of them going alone."""
    cells = [dataclasses.replace(_node(f"c{i}", "a.large"), pool="batch") for i in range(2)]
    general = [_node(f"g{i}") for i in range(2)]
    pods = tuple(pod(f"p-{n.name}", node=n.name) for n in (*cells, *general))

    def compute(what_if: ClusterSnapshot) -> Decision:
        leaving = [n for n in what_if.nodes if n.state is NodeState.TERMINATING]
        return Decision(
            start=tuple(_spec("a.large", 0.10) for n in leaving if n.pool == "batch"),  # the same price: never cheaper
            bindings={p.key: NodeName("elsewhere") for p in what_if.pods},
        )

    planner = _planner(Decision())
    planner.compute = compute
    planner.takes_more = lambda n: n.pool != "batch"
    found, _ = planner.best(ClusterSnapshot(pods, (*cells, *general)), [*cells, *general], single_tries=10)
    assert found is not None
    assert found.nodes == ("g0", "g1")
    assert found.replacements == ()


def test_pods_that_would_not_fit_elsewhere_keep_their_node() -> None:
    held = pod("p1", node="n1")
    snapshot = ClusterSnapshot((held,), (_node("n1"),))
    result, why = _planner(Decision(waiting={held.key: "no room"})).consolidate(snapshot, [_node("n1")])
    assert result is None
    assert why == "1 pod(s) would not fit elsewhere (no room)"


def test_a_consolidation_that_cannot_work_is_not_asked_of_the_scaler() -> None:
    """No other node has room and nothing cheaper is big enough: the what-if is skipped."""
    held = pod("p1", cpu="1500m", memory="2Gi", node="n1")
    asked = []
    planner = _planner(Decision(), biggest=(1000, 4 << 30))
    planner.compute = lambda s: asked.append(s) or Decision()
    result, why = planner.consolidate(ClusterSnapshot((held,), (_node("n1"),)), [_node("n1")])
    assert result is None
    assert why == "its pods fit neither on the other nodes nor with them on a cheaper node"
    assert asked == []
    roomy = _planner(Decision(), biggest=(2000, 4 << 30))  # a cheaper node big enough: ask
    roomy.compute = lambda s: asked.append(s) or Decision(bindings={held.key: NodeName("x")})
    roomy.consolidate(ClusterSnapshot((held,), (_node("n1"),)), [_node("n1")])
    assert len(asked) == 1


def test_pods_no_other_node_has_room_for_must_fit_one_cheaper_node_or_nothing_is_asked() -> None:
    """The other nodes have room for both pods only in total; each needs a node of its own
    size, and the cheaper offerings hold one of them, never both: the what-if is skipped."""
    pods = (pod("p1", cpu="1500m", memory="1Gi", node="n1"), pod("p2", cpu="1500m", memory="1Gi", node="n1"))
    others = [dataclasses.replace(_node(f"o{i}"), allocatable=Resources.parse({"cpu": "4", "memory": "16Gi"})) for i in range(2)]
    fillers = tuple(pod(f"f{i}", cpu="3", memory="1Gi", node=f"o{i}") for i in range(2))  # 1 CPU left on each
    snapshot = ClusterSnapshot(pods + fillers, (_node("n1"), *others))
    asked = []
    tight = Planner(lambda s: asked.append(s) or Decision(), lambda n: 0.20, lambda _n: 0, sizes_below=lambda _price, _pods: [(2000, 8 << 30)])
    result, why = tight.consolidate(snapshot, [_node("n1")])
    assert result is None
    assert why == "its pods fit neither on the other nodes nor with them on a cheaper node"
    assert asked == []
    roomy = Planner(lambda s: asked.append(s) or Decision(), lambda n: 0.20, lambda _n: 0, sizes_below=lambda _price, _pods: [(2000, 8 << 30), (3000, 2 << 30)])
    roomy.consolidate(snapshot, [_node("n1")])
    assert len(asked) == 1  # a cheaper node could hold both: ask the scaler


def test_the_quick_tests_room_is_counted_again_only_for_nodes_whose_record_or_pods_changed() -> None:
    """Each pass's room is what a fresh count gives, counted again only for the nodes whose
    record or pods are new objects (the cache keeps a node's pods one tuple while they are
    the same): a node given a pod, a node whose record changed, a node now terminating."""
    from nodemanager.model.by_node import PodsByNode

    asked: list[str] = []

    def takes_more(node: Node) -> bool:
        asked.append(node.name)
        return True

    def planner() -> Planner:
        return Planner(lambda _s: Decision(), lambda n: 0.20, lambda _n: 0, takes_more=takes_more)

    def snapshot(nodes: tuple[Node, ...], placed: dict[str, tuple]) -> ClusterSnapshot:
        pods = tuple(p for on in placed.values() for p in on)
        return ClusterSnapshot(pods, nodes, grouped=PodsByNode(pods, (), placed))

    def room(p: Planner, s: ClusterSnapshot) -> dict[str, tuple[int, int]]:
        return p._room_in(s).free

    big = Resources.parse({"cpu": "8", "memory": "32Gi"})
    n1, n2, n3 = (dataclasses.replace(_node(name), allocatable=big) for name in ("n1", "n2", "n3"))
    placed = {"n1": (pod("a", cpu="1", memory="1Gi", node="n1"),), "n2": (pod("b", cpu="2", memory="2Gi", node="n2"),)}
    kept = planner()
    first = snapshot((n1, n2, n3), placed)
    assert room(kept, first) == {"n1": (7000, 31 << 30), "n2": (6000, 30 << 30), "n3": (8000, 32 << 30)}
    assert sorted(asked) == ["n1", "n2", "n3"]

    asked.clear()
    grown = {**placed, "n2": (*placed["n2"], pod("c", cpu="3", memory="1Gi", node="n2"))}  # a new tuple for n2 only
    smaller = dataclasses.replace(n3, allocatable=Resources.parse({"cpu": "4", "memory": "16Gi"}))
    second = snapshot((n1, n2, smaller), grown)
    assert room(kept, second) == {"n1": (7000, 31 << 30), "n2": (3000, 29 << 30), "n3": (4000, 16 << 30)}
    assert sorted(asked) == ["n2", "n3"]
    assert room(planner(), second) == room(kept, second)  # as a fresh count gives

    asked.clear()
    leaving = dataclasses.replace(n1, state=NodeState.TERMINATING)
    third = snapshot((leaving, n2, smaller), grown)
    assert room(kept, third) == {"n2": (3000, 29 << 30), "n3": (4000, 16 << 30)}
    assert asked == []  # a terminating node is not asked; the others are unchanged


CELL_TYPES = ["a.large", "b.large", "m.xlarge", "m.4xlarge"]


TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
TOLERATES = (Toleration("dedicated", "Equal", "batch", TaintEffect.NO_SCHEDULE),)
KINDS = ["plain", "tolerant", "pinned"]  # pods that may use the general pool, both pools, the tainted pool only


def _real_planner(*pools: Pool, spot_choices: int = 0, asked: list[ClusterSnapshot] | None = None, factor: float = 1.0, catalog: Catalog = CATALOG) -> Planner:
    """A planner over the real scaler of ``pools``, at catalog prices; what-ifs go to ``asked``."""
    from builders import scaler

    sc = scaler(*pools, catalog=catalog)

    def compute(what_if: ClusterSnapshot) -> Decision:
        if asked is not None:
            asked.append(what_if)
        return sc.compute(what_if, 0.0)

    sizes = CheaperSizes(sc.views, sc.settings.device_asks)
    cells = {p.name for p in pools if p.packing == "cell"}
    hourly = catalog.hourly
    return Planner(
        compute,
        lambda n: hourly(n.instance_type, n.capacity_type, n.zone),
        lambda _n: spot_choices,
        sizes_below=sizes.below,
        takes_more=lambda n: n.pool not in cells,
        own_nodes=sizes.own_nodes,
        price_factor=lambda _nodes: factor,
        floors=sc.sure_floors,
        cheapest=sizes.cheapest,
        needs=sc.settings.node_needs,
    )


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(CELL_TYPES), st.lists(st.tuples(st.sampled_from(["250m", "700m", "1500m", "3", "6"]), st.sampled_from(KINDS)), max_size=4)),
        min_size=2,
        max_size=4,
    ),
    st.integers(1, 3),
    st.sampled_from(["binpack", "cell"]),
    st.sampled_from([1.0, 0.7, 0.4]),
)
def test_a_consolidation_the_quick_test_skips_is_one_the_scaler_refuses(
    layout: list[tuple[str, list[tuple[str, str]]]], take: int, packing: str, factor: float
) -> None:
    """Soundness of the quick test against the real scaler: whatever it skips, the what-if
    would not have allowed. A tainted pool sells the same types for less (spot): only pods
    that tolerate its taint may move to one of its nodes, and those that also select it may go
    only there (one per node when it is a cell pool). The last node may be one of its own."""
    general = Pool(name="general", instance_types=CELL_TYPES, capacity_types=[OD])
    tainted = Pool(name="tainted", packing=packing, instance_types=CELL_TYPES, capacity_types=[SPOT], taints=[TAINT], labels={"dedicated": "batch"})
    planner = _real_planner(general, tainted, spot_choices=SPOT_TO_SPOT_CHOICES, factor=factor)
    nodes = [dataclasses.replace(_node(f"n{i}", itype), allocatable=CATALOG[itype].allocatable) for i, (itype, _) in enumerate(layout)]
    if packing == "cell":
        layout[-1] = (layout[-1][0], layout[-1][1][:1])  # a cell node holds one pod
    # The tainted pool's node as it registers; empty, it is idle: on its way out, as the
    # disruption controller sees idle nodes (not room).
    nodes[-1] = dataclasses.replace(
        nodes[-1],
        pool="tainted",
        capacity_type=SPOT,
        taints=(Taint("dedicated", TaintEffect.NO_SCHEDULE, "batch"),),
        labels={**nodes[-1].labels, "dedicated": "batch"},
        state=NodeState.AVAILABLE if layout[-1][1] else NodeState.TERMINATING,
    )
    placed = [(i, j, cpu, kind) for i, (_, asks) in enumerate(layout) for j, (cpu, kind) in enumerate(asks)]
    pods = tuple(
        dataclasses.replace(
            pod(f"p{i}-{j}", cpu=cpu, memory="512Mi", node=f"n{i}", phase=PodPhase.RUNNING, selector={"dedicated": "batch"} if kind == "pinned" else None),
            tolerations=TOLERATES if kind != "plain" else (),
        )
        for i, j, cpu, kind in placed
    )
    snapshot = ClusterSnapshot(pods, tuple(nodes))
    candidates = nodes[:take]
    if planner._hopeless(snapshot, candidates):
        planner._hopeless = lambda _s, _n: False  # ask the scaler after all
        assert planner.consolidate(snapshot, candidates)[0] is None


NODE_PODS = st.lists(st.tuples(st.sampled_from(["250m", "1500m", "3"]), st.sampled_from(KINDS)), max_size=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), NODE_PODS), min_size=3, max_size=3), min_size=2, max_size=4), st.integers(1, 2))
def test_a_long_lived_planners_quick_test_answers_as_a_fresh_ones_pass_after_pass(steps: list[list[list | None]], take: int) -> None:
    """What the quick test keeps from pass to pass (each node's room, its pods' asks, which
    of them may go only to a cell pool's nodes) is kept by the node's record and its pods'
    tuple: as nodes' pods change (None: a node keeps the very tuple it had), a long-lived
    planner answers as a fresh one does."""
    from nodemanager.model.by_node import PodsByNode

    pinned = {"dedicated": "batch"}
    general = Pool(name="general", instance_types=CELL_TYPES, capacity_types=[OD])
    tainted = Pool(name="tainted", packing="cell", instance_types=CELL_TYPES, capacity_types=[SPOT], taints=[TAINT], labels={"dedicated": "batch"})
    kept = _real_planner(general, tainted)
    nodes = tuple(dataclasses.replace(_node(f"n{i}", "m.xlarge"), allocatable=CATALOG["m.xlarge"].allocatable) for i in range(3))
    placed: dict[str, tuple] = {}
    for step, layout in enumerate(steps):
        for i, asks in enumerate(layout):
            if asks is not None or f"n{i}" not in placed:
                placed[f"n{i}"] = tuple(
                    dataclasses.replace(
                        pod(f"p{step}-{i}-{j}", cpu=cpu, memory="512Mi", node=f"n{i}", phase=PodPhase.RUNNING, selector=pinned if kind == "pinned" else None),
                        tolerations=TOLERATES if kind != "plain" else (),
                    )
                    for j, (cpu, kind) in enumerate(asks or [])
                )
        pods = tuple(p for on in placed.values() for p in on)
        snapshot = ClusterSnapshot(pods, nodes, grouped=PodsByNode(pods, (), dict(placed)))
        for candidates in (nodes[:take], nodes[-1:]):
            assert kept._hopeless(snapshot, candidates) == _real_planner(general, tainted)._hopeless(snapshot, candidates)


@pytest.mark.parametrize(("factor", "replaced"), [(1.0, True), (0.7, True), (0.5, True), (0.4, False)])
def test_the_quick_test_allows_for_the_price_improvement_factor_and_no_more(factor: float, replaced: bool) -> None:
    """A node ($0.20/h) whose pod fits nowhere else, and a type that holds it at $0.10/h:
    replaced while the factor allows half the price, never for less saving."""
    planner = _real_planner(Pool(name="general", instance_types=["a.large", "m.xlarge"], capacity_types=[OD]), factor=factor)
    node = dataclasses.replace(_node("n1", "m.xlarge"), allocatable=CATALOG["m.xlarge"].allocatable)
    held = pod("p1", cpu="1", memory="1Gi", node="n1", phase=PodPhase.RUNNING)
    result, _ = planner.consolidate(ClusterSnapshot((held,), (node,)), [node])
    assert (result is not None) is replaced
    if replaced:
        assert [r.instance_type for r in result.replacements] == ["a.large"]


def test_a_what_if_moves_the_same_copy_of_a_pod_until_the_pod_changes() -> None:
    """The planner keeps each moving pod's copy (unbound, pending) while the pod is the same
    object: what-ifs move the same pods pass after pass. A pod changed under the same key
    (resized) is copied again."""
    asked: list[ClusterSnapshot] = []
    planner = _real_planner(binpack_pool(), asked=asked)
    nodes = [dataclasses.replace(_node(f"n{i}"), allocatable=CATALOG["m.xlarge"].allocatable) for i in (1, 2)]
    held = pod("p1", cpu="1", memory="1Gi", node="n1", phase=PodPhase.RUNNING)
    other = pod("p2", cpu="2", memory="1Gi", node="n2", phase=PodPhase.RUNNING)

    def moved(snapshot: ClusterSnapshot) -> tuple:
        moves, _ = planner.relocate(snapshot, nodes[:1])
        (copy,) = [p for p in asked[-1].by_node.waiting if p.key == "default/p1"]
        return moves, copy

    first, copy = moved(ClusterSnapshot((held, other), tuple(nodes)))
    assert first is not None
    assert not first.replacements  # it fits beside p2
    assert (copy.node_name, copy.phase, copy.requests) == ("", PodPhase.PENDING, held.requests)
    assert moved(ClusterSnapshot((held, other), tuple(nodes)))[1] is copy
    resized = dataclasses.replace(held, requests=Resources.parse({"cpu": "3", "memory": "1Gi"}))
    again, copy = moved(ClusterSnapshot((resized, other), tuple(nodes)))
    assert copy.requests == resized.requests
    assert again is not None
    assert again.replacements  # 3 CPU no longer fit beside p2: a new node


def _floor_layout(extra: tuple = (), zone: str = "") -> tuple[ClusterSnapshot, Node]:
    """Three m.4xlarge nodes ($0.80/h): two hold four pods of 3 CPU each (3.9 CPU free each),
    the third three such pods; two of those fit on the others, the third needs a new node."""
    nodes = [dataclasses.replace(_node(f"n{i}", "m.4xlarge"), allocatable=CATALOG["m.4xlarge"].allocatable) for i in (1, 2, 3)]
    held = [
        pod(f"p{i}-{j}", cpu="3", memory="1Gi", node=f"n{i}", phase=PodPhase.RUNNING, zone=zone if i == 1 else "")
        for i, count in ((1, 3), (2, 4), (3, 4))
        for j in range(count)
    ]
    return ClusterSnapshot((*held, *extra), tuple(nodes)), nodes[0]


def test_the_quick_test_knows_a_replacement_is_as_large_as_the_pools_node_size_floor() -> None:
    """The pool's node size floor (a quarter of the 24 CPU its other nodes' pods ask: 6 vCPU)
    leaves only m.4xlarge for the third pod's new node, at the price of the node it would
    replace: the what-if is not asked (it was, for 2,436 single nodes of the README's day),
    and it would have refused."""
    asked: list[ClusterSnapshot] = []
    planner = _real_planner(binpack_pool(), asked=asked)
    snapshot, candidate = _floor_layout()
    result, why = planner.consolidate(snapshot, [candidate])
    assert (result, why, asked) == (None, "its pods fit neither on the other nodes nor with them on a cheaper node", [])
    planner._hopeless = lambda _s, _n: False  # ask the scaler after all
    result, why = planner.consolidate(snapshot, [candidate])
    assert result is None
    assert "m.4xlarge" in why
    assert "would not be cheaper" in why


@pytest.mark.parametrize(
    ("pool", "waiting", "zone"),
    [
        (binpack_pool(node_size_floor={"share": 0}), (), ""),  # no floor: a.large would do
        (binpack_pool(limits={"cpu": "40"}), (), ""),  # limits may let the floor go
        (binpack_pool(), (pod("w", cpu="100m"),), ""),  # another pod waits: it is placed too
        (binpack_pool(), (), "zone-1a"),  # the moving pods pick a zone: its offerings may be smaller
    ],
)
def test_the_quick_test_counts_on_the_floor_only_where_it_surely_holds(pool: Pool, waiting: tuple, zone: str) -> None:
    asked: list[ClusterSnapshot] = []
    planner = _real_planner(pool, asked=asked)
    snapshot, candidate = _floor_layout(waiting, zone)
    planner.consolidate(snapshot, [candidate])
    assert len(asked) == 1


@pytest.mark.parametrize(("one_job", "skipped"), [(True, False), (False, True)])
def test_the_quick_test_counts_on_the_floor_for_job_pods_only_of_one_pod_jobs(one_job: bool, skipped: bool) -> None:
    """The moving pods of one Job of several: the floor lets them go (``sizing.floor_holds``),
    so the what-if is asked; each its own one-pod Job: the floor holds, and it is not."""
    asked: list[ClusterSnapshot] = []
    planner = _real_planner(binpack_pool(), asked=asked)
    snapshot, candidate = _floor_layout()
    owned = tuple(
        dataclasses.replace(p, owner=OwnerRef("batch/v1", "Job", "batch" if one_job else p.name)) if p.node_name == candidate.name else p for p in snapshot.pods
    )
    planner.consolidate(dataclasses.replace(snapshot, pods=owned), [candidate])
    assert (asked == []) is skipped


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a.large", "m.xlarge", "m.4xlarge"]), st.lists(st.sampled_from(["250m", "500m", "1500m", "3", "6"]), max_size=5)),
        min_size=2,
        max_size=5,
    ),
    st.integers(1, 2),
    st.tuples(st.sampled_from([0.0, 0.1, 0.25, 1.0]), st.sampled_from([1, 2, 3, 4, 16])),
    st.sampled_from([1.0, 0.7]),
    st.booleans(),
)
def test_a_consolidation_the_floor_aware_quick_test_skips_is_one_the_scaler_refuses(
    layout: list[tuple[str, list[str]]], take: int, floor: tuple[float, int], factor: float, limited: bool
) -> None:
    """Soundness of the quick test's floor against the real scaler: every node the what-if
    boots has at least the vCPU ``sure_floors`` promised for its pool, and whatever the
    quick test skips, the what-if would not have allowed; whatever the floor's share and
    cap, the factor and the limits."""
    limits = {"cpu": "64"} if limited else {}
    asked: list[ClusterSnapshot] = []
    planner = _real_planner(binpack_pool(node_size_floor={"share": floor[0], "maxCPU": floor[1]}, limits=limits), factor=factor, asked=asked)
    nodes = [dataclasses.replace(_node(f"n{i}", itype), allocatable=CATALOG[itype].allocatable) for i, (itype, _) in enumerate(layout)]
    pods = tuple(
        pod(f"p{i}-{j}", cpu=cpu, memory="1Gi", node=f"n{i}", phase=PodPhase.RUNNING) for i, (_, asks) in enumerate(layout) for j, cpu in enumerate(asks)
    )
    snapshot = ClusterSnapshot(pods, tuple(nodes))
    candidates = nodes[:take]
    names = {n.name for n in candidates}
    floors = planner.floors(snapshot, names, [p for p in pods if p.node_name in names])
    planner.relocate(snapshot, candidates, one_new_node=True)
    for spec in planner.compute(asked[-1]).start:
        assert CATALOG[spec.instance_type].vcpu >= floors.get(spec.pool, 0)
    if planner._hopeless(snapshot, candidates):
        planner._hopeless = lambda _s, _n: False  # ask the scaler after all
        assert planner.consolidate(snapshot, candidates)[0] is None


@pytest.mark.parametrize(("tolerations", "skipped"), [((), True), (TOLERATES, False)])
def test_the_quick_test_looks_for_a_cheaper_node_only_where_the_moving_pods_may_go(tolerations: tuple, skipped: bool) -> None:
    """A node's only pod fits nowhere else; a cheaper node that holds it is sold only in a
    tainted pool (listed first). A pod that does not tolerate the taint cannot move: the
    what-if is skipped; one that tolerates it is asked about, and moves there."""
    asked: list[ClusterSnapshot] = []
    tainted = Pool(name="tainted", instance_types=["a.large"], capacity_types=[OD], taints=[TAINT])
    planner = _real_planner(tainted, Pool(name="general", instance_types=["m.xlarge"], capacity_types=[OD]), asked=asked)
    node = dataclasses.replace(_node("n1", "m.xlarge"), allocatable=CATALOG["m.xlarge"].allocatable)
    held = dataclasses.replace(pod("p1", cpu="1", memory="1Gi", node="n1", phase=PodPhase.RUNNING), tolerations=tolerations)
    result, why = planner.consolidate(ClusterSnapshot((held,), (node,)), [node])
    assert (asked == []) is skipped
    if skipped:
        assert result is None
        assert why == "its pods fit neither on the other nodes nor with them on a cheaper node"
    else:
        assert result is not None
        assert [r.instance_type for r in result.replacements] == ["a.large"]


GPU = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU, "value": "true", "effect": "NoSchedule"}
TOLERATES_GPU = (Toleration(GPU, "Exists", "", TaintEffect.NO_SCHEDULE),)
# GPU types by GPU count (4 vCPU and 16 GiB a GPU), dearer than the CPU types for their CPU
GPU_CATALOG = Catalog(
    (*TYPES, *(InstanceType(f"g{n}.xlarge", 4 * n, 16384 * n, 0.50 * n, zones=ZONES, max_pods=29, gpus=(Gpu(n, "NVIDIA", "T4", 16384),)) for n in (1, 2, 4))),
    region="zone-1",
)


def _gpu_pools() -> tuple[Pool, Pool]:
    general = Pool(name="general", instance_types=["m.xlarge"], capacity_types=[OD])
    gpu = Pool(name="gpu", instance_types=["g1.xlarge", "g2.xlarge", "g4.xlarge"], capacity_types=[OD], taints=[GPU_TAINT])
    return general, gpu


def _gpu_node(name: str, itype: str) -> Node:
    return dataclasses.replace(
        _node(name, itype), pool="gpu", allocatable=GPU_CATALOG[itype].allocatable, taints=(Taint(GPU, TaintEffect.NO_SCHEDULE, "true"),)
    )


def _gpu_pod(name: str, node: str, gpus: int, cpu: str = "1") -> Pod:
    return dataclasses.replace(
        pod(name, cpu=cpu, memory="1Gi", node=node, phase=PodPhase.RUNNING, extra={GPU: gpus} if gpus else None),
        tolerations=TOLERATES_GPU if gpus else (),
    )


def test_the_quick_test_counts_no_room_on_a_node_whose_taint_the_moving_pods_do_not_tolerate() -> None:
    """A CPU pod fills most of its m.xlarge, the cheapest node that holds it; the only other
    node is a GPU node, tainted, with CPU and memory to spare. The pod cannot go there, so
    the what-if (which would boot another m.xlarge, at the same price) is not asked."""
    asked: list[ClusterSnapshot] = []
    planner = _real_planner(*_gpu_pools(), asked=asked, catalog=GPU_CATALOG)
    general = dataclasses.replace(_node("n1", "m.xlarge"), allocatable=GPU_CATALOG["m.xlarge"].allocatable)
    gpu_node = _gpu_node("g1", "g4.xlarge")
    held = _gpu_pod("p1", "n1", 0, cpu="3")
    snapshot = ClusterSnapshot((held, _gpu_pod("t1", "g1", 1)), (general, gpu_node))
    result, why = planner.consolidate(snapshot, [general])
    assert (result, why, asked) == (None, "its pods fit neither on the other nodes nor with them on a cheaper node", [])
    planner._hopeless = lambda _s, _n: False  # ask the scaler after all: it refuses
    result, why = planner.consolidate(snapshot, [general])
    assert result is None
    assert "would not be cheaper" in why


def test_the_quick_test_counts_the_gpus_a_node_has_free_and_a_cheaper_one_sells() -> None:
    """A pod asking 2 GPUs on a g2.xlarge; the other GPU node has CPU and memory to spare but
    no GPU free, and the only cheaper GPU type has one GPU: hopeless, no what-if. With a GPU
    free beside it on the other node... still not 2 in one place: hopeless. With 2 free: asked."""
    general, gpu = _gpu_pools()
    candidate = _gpu_node("g1", "g2.xlarge")
    other = _gpu_node("g2", "g4.xlarge")
    moving = _gpu_pod("p1", "g1", 2)
    for others_gpus, skipped in (((1, 1, 1, 1), True), ((1, 1, 1), True), ((1, 1), False)):
        asked: list[ClusterSnapshot] = []
        planner = _real_planner(general, gpu, asked=asked, catalog=GPU_CATALOG)
        pods = (moving, *(_gpu_pod(f"o{i}", "g2", n, cpu="500m") for i, n in enumerate(others_gpus)))
        result, why = planner.consolidate(ClusterSnapshot(pods, (candidate, other)), [candidate])
        assert (asked == []) is skipped, others_gpus
        if skipped:
            assert (result, why) == (None, "its pods fit neither on the other nodes nor with them on a cheaper node")
        else:
            assert result is not None
            assert result.replacements == ()  # it fits beside the others: a deletion


def test_the_quick_test_reads_taints_and_gpus_only_as_the_profiles_filters_do() -> None:
    """What a pod needs besides CPU and memory is what the scaler's filters check: its
    extended resources (not those NodeResourcesFit's ``ignoredResources`` leaves out, nor
    batch capacity, a ``kubernetes.io/`` resource), and its tolerations only where
    TaintToleration filters. A planner told nothing of them (a profile filtering on neither)
    asks the what-if where the GPU-aware one skips it."""
    from nodemanager.scaler import ScalerSettings
    from nodemanager.scheduling.profile import DEFAULT_PROFILE

    general, gpu = _gpu_pools()
    gpu_pod = _gpu_pod("p1", "g1", 2)
    batch = pod("b", cpu="0", memory="0", extra={"kubernetes.io/batch-cpu": 500, "kubernetes.io/batch-memory": 1 << 30})
    plain = ScalerSettings((general, gpu))
    assert plain.device_asks(gpu_pod) == ((GPU, 2),)
    assert plain.device_asks(batch) == ()
    assert plain.filters_taints
    ignoring = ScalerSettings((general, gpu), profile=dataclasses.replace(DEFAULT_PROFILE, plugin_args={"NodeResourcesFit": {"ignoredResources": [GPU]}}))
    assert ignoring.device_asks(gpu_pod) == ()
    filters = tuple(f for f in DEFAULT_PROFILE.filter if f != "TaintToleration")
    untainted = ScalerSettings((general, gpu), profile=dataclasses.replace(DEFAULT_PROFILE, filter=filters))
    assert not untainted.filters_taints

    candidate, other = _gpu_node("g1", "g2.xlarge"), _gpu_node("g2", "g4.xlarge")
    snapshot = ClusterSnapshot((gpu_pod, *(_gpu_pod(f"o{i}", "g2", 1, cpu="500m") for i in range(4))), (candidate, other))
    asked: list[ClusterSnapshot] = []
    blind = _real_planner(general, gpu, asked=asked, catalog=GPU_CATALOG)
    blind.needs = lambda _pod: (None, ())
    blind.consolidate(snapshot, [candidate])
    assert len(asked) == 1


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["m.xlarge", "g1.xlarge", "g2.xlarge", "g4.xlarge"]),
            st.lists(st.tuples(st.sampled_from(["250m", "1500m", "3"]), st.sampled_from([0, 0, 1, 2, 4])), max_size=4),
        ),
        min_size=2,
        max_size=4,
    ),
    st.integers(1, 2),
)
def test_a_consolidation_the_gpu_aware_quick_test_skips_is_one_the_scaler_refuses(layout: list[tuple[str, list[tuple[str, int]]]], take: int) -> None:
    """Soundness of the quick test's taints and GPUs against the real scaler: CPU pods and
    pods asking 1-4 GPUs (tolerating the GPU pool's taint) on CPU and GPU nodes, overfull or
    not as the draw falls; whatever the quick test skips, the what-if would not have allowed."""
    planner = _real_planner(*_gpu_pools(), catalog=GPU_CATALOG)
    nodes = [
        _gpu_node(f"n{i}", itype) if itype.startswith("g") else dataclasses.replace(_node(f"n{i}", itype), allocatable=GPU_CATALOG[itype].allocatable)
        for i, (itype, _) in enumerate(layout)
    ]
    pods = tuple(
        _gpu_pod(f"p{i}-{j}", f"n{i}", gpus if itype.startswith("g") else 0, cpu=cpu)
        for i, (itype, asks) in enumerate(layout)
        for j, (cpu, gpus) in enumerate(asks)
    )
    snapshot = ClusterSnapshot(pods, tuple(nodes))
    candidates = nodes[:take]
    if planner._hopeless(snapshot, candidates):
        planner._hopeless = lambda _s, _n: False  # ask the scaler after all
        assert planner.consolidate(snapshot, candidates)[0] is None


# -- the controller on the virtual clock ----------------------------------------------------


def _steady_and_finishing() -> list:
    """Four pods for good and four that finish after 15 minutes, interleaved: once the
    short ones are gone, the long ones sit one per node."""
    stay = [arrive(f"p{i}", at=i * 120, cpu="700m", memory="1Gi") for i in range(4)]
    leave = [arrive(f"q{i}", at=i * 120 + 60, duration=900, cpu="700m", memory="1Gi") for i in range(4)]
    return stay + leave


def _run(pool: Pool, arrivals: list, seconds: float = 3600.0) -> Harness:
    h = Harness(pool, arrivals=arrivals, idle_grace=30)
    h.run(seconds)
    return h


def test_underutilized_nodes_are_consolidated_and_every_pod_runs() -> None:
    h = _run(binpack_pool(), _steady_and_finishing())
    done = h.controller.disruption.summary()
    assert done["Underutilized"]["nodes"] >= 1
    live = [n for n in h.controller.state.nodes.values() if n.state is not NodeState.TERMINATED]
    assert len(live) == 2  # 4 x 700m: two a.large hold them
    assert set(h.bound()) == {f"default/p{i}" for i in range(4)}
    actions = [a for a in h.controller.disruption.actions if a["reason"] == "Underutilized"]
    assert all(a["savingsPerHour"] > 0 for a in actions)
    assert sum(h.cluster.evictions.values()) == done["Underutilized"]["pods"]  # each pod moved was evicted once, and no other


def test_the_node_whose_pods_have_run_least_is_consolidated_first(caplog: pytest.LogCaptureFixture) -> None:
    """Two nodes, each of whose pods fit on the other: one holds a pod that has run for most
    of an hour, the other two that just started. Moving the young pods loses the least work
    (a Job's pod starts again), though they are more: the old pod stays where it runs."""
    arrivals = [
        arrive("old", at=0, cpu="700m", memory="1Gi"),
        arrive("big", at=0, duration=3000, cpu="1", memory="1Gi"),  # leaves the old pod's node no room for the young ones
        arrive("young-1", at=2900, cpu="250m", memory="512Mi"),
        arrive("young-2", at=2900, cpu="250m", memory="512Mi"),
    ]
    caplog.set_level("INFO", logger="nodemanager")
    h = Harness(binpack_pool(), arrivals=arrivals, idle_grace=30)
    h.run(2990)
    first = h.bound()
    assert first["default/old"] != first["default/young-1"] == first["default/young-2"]
    h.run(600)
    actions = [a for a in h.controller.disruption.actions if a["reason"] == "Underutilized"]
    assert [a["nodes"] for a in actions] == [[first["default/young-1"]]]
    assert set(h.bound().values()) == {first["default/old"]}
    assert h.controller.disruption.tenure.pods_since[first["default/old"]].started["default/old"] <= 1000 + 60  # never moved: counted from its first pass
    proposed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("consolidation proposed")]
    assert proposed
    assert all(first["default/young-1"] in m and "pod-minutes there" in m for m in proposed)


def test_a_do_not_disrupt_pod_keeps_its_node() -> None:
    arrivals = [dataclasses.replace(a, pod=dataclasses.replace(a.pod, do_not_disrupt=True)) for a in _steady_and_finishing()]
    h = _run(binpack_pool(), arrivals)
    assert "Underutilized" not in h.controller.disruption.summary()
    assert h.controller.disruption.progress.startswith("nothing to consolidate among 0 candidate")


def test_a_zero_budget_inside_its_window_blocks_consolidation_and_lets_it_after() -> None:
    # The harness's clock starts at 1970-01-01 00:16:40 UTC; the window is midnight to 01:00.
    window = Disruption(budgets=[DisruptionBudget(nodes="0", schedule="0 0 * * *", duration=HOUR)])
    inside = _run(binpack_pool(disruption=window), _steady_and_finishing(), seconds=2400)
    assert "Underutilized" not in inside.controller.disruption.summary()
    inside.run(3600)  # past 01:00
    assert inside.controller.disruption.summary()["Underutilized"]["nodes"] >= 1


def test_with_a_budget_of_one_node_at_most_one_is_disrupted_at_a_time() -> None:
    one = Disruption(budgets=[DisruptionBudget(nodes="1")])
    arrivals = [arrive(f"p{i}", at=i * 60, cpu="700m", memory="1Gi") for i in range(6)]
    arrivals += [arrive(f"q{i}", at=i * 60 + 30, duration=600, cpu="700m", memory="1Gi") for i in range(6)]
    h = Harness(binpack_pool(disruption=one), arrivals=arrivals, idle_grace=30)
    most = 0
    while h.clock.now() < 1000 + 2 * HOUR:
        h.driver.step()
        most = max(most, sum(1 for label in h.controller.state.marked.values() if label[1] in ("consolidation", "idle")))
    assert most == 1
    assert h.controller.disruption.summary()["Underutilized"]["nodes"] >= 1


def test_with_a_budget_of_one_node_a_candidate_that_cannot_go_does_not_keep_the_next_one() -> None:
    """Karpenter's single-node consolidation tries every candidate of a pool whose budget
    allows one more, one at a time. Cutting the candidates to the budget first left only the
    cheapest to disrupt: a node no move can empty (its pod fits no cheaper type) then kept a
    node that could go, for good (the corpus's ``jobs`` day kept four m5.4xlarge for one pod
    each for four hours this way)."""
    one = Disruption(budgets=[DisruptionBudget(nodes="1")])
    arrivals = [arrive("small", at=0, cpu="700m", memory="1Gi"), arrive("huge", at=600, cpu="12", memory="1Gi")]
    h = Harness(binpack_pool(disruption=one), arrivals=arrivals, idle_grace=30)
    h.run(2400)
    nodes = h.controller.state.nodes
    [action] = [a for a in h.controller.disruption.actions if a["reason"] == "Underutilized"]
    assert action["types"] == ["a.large on-demand"]  # the small pod's own node
    assert {nodes[name].instance_type for name in h.bound().values()} == {"m.4xlarge"}  # both pods on the huge one's


def test_a_pools_budget_counts_its_live_nodes_and_those_being_disrupted_as_a_fresh_count_does() -> None:
    """The counts a pool's budget is applied to come from the fleet tally and the marks: at
    every step of a day with consolidation, idle stops and a second pool, what a count of
    every record gives."""
    from nodemanager.model import LIVE_STATES

    arrivals = [arrive(f"p{i}", at=i * 60, cpu="700m", memory="1Gi") for i in range(6)]
    arrivals += [arrive(f"q{i}", at=i * 60 + 30, duration=600, cpu="700m", memory="1Gi") for i in range(6)]
    arrivals += [arrive(f"c{i}", at=i * 90, duration=900, cpu="1", selector={"pool": "cells"}) for i in range(3)]
    cells = Pool(name="cells", packing="cell", instance_types=["a.large"], capacity_types=[OD], labels={"pool": "cells"})
    h = Harness(binpack_pool(), cells, arrivals=arrivals, idle_grace=30)
    seen: set[tuple[str, int, int]] = set()
    while h.clock.now() < 1000 + 2 * HOUR:
        h.driver.step()
        c = h.controller
        for pool in ("general", "cells"):
            live = [n for n in c.state.nodes.values() if n.pool == pool and n.state in LIVE_STATES]
            fresh = (len(live), sum(1 for n in live if n.name in c.state.marked))
            assert c.disruption._counts(pool) == fresh
            seen.add((pool, *fresh))
    assert any(marked for _, _, marked in seen)
    assert {live for pool, live, _ in seen if pool == "cells"} >= {0, 1}
    assert len({live for pool, live, _ in seen if pool == "general"}) > 2


def test_consolidate_after_counts_from_the_last_change_of_a_nodes_pods() -> None:
    wait = 1200.0
    h = Harness(binpack_pool(disruption=Disruption(consolidate_after=wait)), arrivals=_steady_and_finishing(), idle_grace=30)
    held: dict[str, tuple[frozenset, float]] = {}  # node -> its pods, unchanged since (seen from the cluster itself)
    proposed = 0
    while h.clock.now() < 1000 + 2 * HOUR:
        h.driver.step()
        now = h.clock.now()
        on: dict[str, set] = {}
        for sim in h.cluster.pods.values():
            if sim.pod.node_name:
                on.setdefault(sim.pod.node_name, set()).add(sim.pod.key)
        held = {name: held[name] if name in held and held[name][0] == pods else (pods, now) for name in on if (pods := frozenset(on[name]))}
        proposal = h.controller.disruption.proposal
        if proposal is not None and proposal.at == now:
            proposed += 1
            assert all(now - held[name][1] >= wait for name in proposal.command.nodes), (now, proposal.command.nodes, held)
    assert proposed
    assert h.controller.disruption.summary()["Underutilized"]["nodes"] >= 1


def test_a_proposal_is_dropped_when_a_pod_arrives_before_it_is_acted_on() -> None:
    first = Harness(binpack_pool(), arrivals=_steady_and_finishing(), idle_grace=30)
    while first.controller.disruption.proposal is None:
        first.driver.step()
    proposed_at = first.controller.disruption.proposal.at - 1000.0  # the harness's origin
    arrivals = [*_steady_and_finishing(), arrive("late", at=proposed_at + 5, cpu="700m", memory="1Gi")]
    second = Harness(binpack_pool(), arrivals=arrivals, idle_grace=30)
    second.run(proposed_at + 20)
    assert second.controller.disruption.proposal is None
    assert not [a for a in second.controller.disruption.actions if a["reason"] == "Underutilized" and a["at"] <= 1000 + proposed_at + 20]


def test_a_pending_proposal_waits_its_delay_without_looking_again_then_is_validated() -> None:
    """While a proposal waits out its validation delay a pass only checks that the cluster is
    settled (nothing is planned or weighed); once the delay is over it is checked again."""
    h = Harness(binpack_pool(), arrivals=_steady_and_finishing(), idle_grace=30)
    while h.controller.disruption.proposal is None:
        h.driver.step()
    dc = h.controller.disruption
    proposal = dc.proposal
    looked: list[float] = []
    weigh = dc._candidates
    dc._candidates = lambda snapshot, now: looked.append(now) or weigh(snapshot, now)  # type: ignore[method-assign]
    while dc.proposal is proposal:
        h.driver.step()
    assert looked == [h.clock.now()]  # one look, the pass that validated it
    assert looked[0] - proposal.at >= VALIDATION_DELAY


@pytest.mark.heavy
def test_a_steady_cluster_reaches_a_fixed_point_with_no_disruption_for_a_week() -> None:
    h = _run(binpack_pool(), _steady_and_finishing(), seconds=HOUR)
    before = len(h.controller.disruption.actions)
    h.run(7 * 24 * HOUR)
    assert len(h.controller.disruption.actions) == before
    assert h.controller.state.cost_per_hour() == pytest.approx(0.20)


@pytest.mark.parametrize("resume", [False, True])
def test_an_evicted_pod_restarts_its_work_or_resumes_it(resume: bool) -> None:
    """Its node dies 600 s into a 900 s run (its pod runs on until the node is gone): the
    pod waits, is placed again, and runs the whole 900 s again (a Job's pod) or what it had
    left (work that checkpoints)."""
    h = Harness(binpack_pool(), arrivals=[arrive("job", duration=900, cpu="700m", memory="1Gi")], idle_grace=30, resume_evicted=resume)
    h.run(60)
    [first] = h.bound().values()
    started = h.cluster.first_bound["default/job"]
    h.run(started + 600 - h.clock.now())
    h.cluster.silence(first)
    evicted_at = rebound_at = None
    while "default/job" in h.cluster.pods:
        h.driver.step()
        node = h.cluster.pods["default/job"].pod.node_name if "default/job" in h.cluster.pods else None
        if evicted_at is None and node == "":
            evicted_at = h.clock.now()
        if rebound_at is None and node and node != first:
            rebound_at = h.clock.now()
    assert evicted_at is not None
    assert rebound_at is not None
    left = 900 - (evicted_at - started) if resume else 900
    assert 600 < evicted_at - started < 900
    assert h.clock.now() - rebound_at == pytest.approx(left, abs=10)
    # What the report says it cost: one eviction, the work done before it done again (or none)
    assert h.cluster.evictions == {"default/job": 1}
    assert h.cluster.work_redone == (0.0 if resume else pytest.approx(evicted_at - started, abs=10))
    assert h.cluster.waited_again == [pytest.approx(rebound_at - evicted_at, abs=10)]


# -- PodDisruptionBudgets --------------------------------------------------------------------


def _pdb(spec: dict, status: dict | None = None, generation: int = 1) -> PodDisruptionBudget:
    doc = {"metadata": {"name": "b", "namespace": "default", "generation": generation}, "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}
    return PodDisruptionBudget.from_manifest({**doc, **({"status": status} if status is not None else {})})


def _web(n: int, running: int) -> list:
    phase = [PodPhase.RUNNING] * running + [PodPhase.PENDING] * (n - running)
    return [dataclasses.replace(pod(f"w{i}", node="n1" if i < running else ""), labels={"app": "web"}, phase=phase[i]) for i in range(n)]


@pytest.mark.parametrize(
    ("spec", "pods", "running", "allowed"),
    [
        ({"minAvailable": 2}, 4, 4, 2),  # desiredHealthy 2 of 4 healthy
        ({"minAvailable": 2}, 4, 2, 0),
        ({"minAvailable": "50%"}, 5, 5, 2),  # 50% of 5 rounds up to 3
        ({"maxUnavailable": 1}, 4, 4, 1),
        ({"maxUnavailable": 1}, 4, 3, 0),  # one is already down
        ({"maxUnavailable": "30%"}, 10, 10, 3),  # 30% of 10 is 3: desiredHealthy 7
        ({"maxUnavailable": "25%"}, 3, 3, 1),  # 25% of 3 rounds up to 1
        ({"minAvailable": 0}, 0, 0, 0),  # no pod expected: nothing allowed
        ({}, 3, 3, 0),  # neither set: kube expects no pod
    ],
)
def test_disruptions_allowed_follow_kubes_disruption_controller(spec: dict, pods: int, running: int, allowed: int) -> None:
    assert _pdb(spec).allowed(_web(pods, running)) == allowed


def test_the_servers_count_wins_once_it_has_processed_the_budget() -> None:
    assert _pdb({"minAvailable": 1}, {"observedGeneration": 1, "disruptionsAllowed": 4}).allowed(_web(2, 2)) == 4
    assert _pdb({"minAvailable": 1}, {"observedGeneration": 1, "disruptionsAllowed": 4}, generation=2).allowed(_web(9, 9)) == 0


def test_policy_v1_selectors_an_empty_one_selects_the_namespace_a_missing_one_nothing() -> None:
    everyone = PodDisruptionBudget.from_manifest({"metadata": {"name": "b"}, "spec": {"selector": {}, "maxUnavailable": 0}})
    nobody = PodDisruptionBudget.from_manifest({"metadata": {"name": "b"}, "spec": {"maxUnavailable": 0}})
    other = dataclasses.replace(pod("x"), namespace="other")
    assert everyone.selects(pod("x"))
    assert not everyone.selects(other)
    assert not nobody.selects(pod("x"))
    with pytest.raises(InvalidManifest, match="minAvailable and maxUnavailable cannot both be set"):
        PodDisruptionBudget.from_manifest({"metadata": {"name": "b"}, "spec": {"minAvailable": 1, "maxUnavailable": 1}})
    with pytest.raises(InvalidManifest, match=r"spec.minAvailable: expected a non-negative integer or a percentage"):
        PodDisruptionBudget.from_manifest({"metadata": {"name": "b"}, "spec": {"minAvailable": "half"}})


def _guarded() -> list:
    """The scenario above, its steady pods labelled app=steady."""
    label = {"app": "steady"}
    return [dataclasses.replace(a, pod=dataclasses.replace(a.pod, labels=label)) if a.pod.name.startswith("p") else a for a in _steady_and_finishing()]


def test_a_budget_that_allows_no_eviction_blocks_consolidation_and_status_names_it() -> None:
    budget = PodDisruptionBudget("default", "steady", parse_label_selector({"matchLabels": {"app": "steady"}}, "s"), min_available="100%")
    h = Harness(binpack_pool(), arrivals=_guarded(), idle_grace=30, objects=ClusterObjects(pdbs=(budget,)))
    h.run(3600)
    assert "Underutilized" not in h.controller.disruption.summary()
    blocked = h.controller.status()["disruption"]["blocked"]
    assert blocked
    assert all("PodDisruptionBudget default/steady allows no eviction now" in why for why in blocked.values())


def test_a_budget_that_allows_one_eviction_lets_nodes_go_one_at_a_time() -> None:
    budget = PodDisruptionBudget("default", "steady", parse_label_selector({"matchLabels": {"app": "steady"}}, "s"), max_unavailable=1)
    h = Harness(binpack_pool(), arrivals=_guarded(), idle_grace=30, objects=ClusterObjects(pdbs=(budget,)))
    h.run(3600)
    actions = [a for a in h.controller.disruption.actions if a["reason"] == "Underutilized"]
    assert actions
    assert all(a["pods"] <= 1 for a in actions)
    assert set(h.bound()) == {f"default/p{i}" for i in range(4)}


def test_a_workload_file_carries_budgets_and_a_bad_one_names_its_field() -> None:
    (budget,) = parse_cluster_objects("podDisruptionBudgets: [{metadata: {name: b}, spec: {maxUnavailable: 1, selector: {}}}]\npods: []").pdbs
    assert (budget.key, budget.max_unavailable) == ("default/b", 1)
    with pytest.raises(WorkloadError, match=r"podDisruptionBudgets\[0\].spec.maxUnavailable: expected a non-negative integer"):
        parse_cluster_objects("podDisruptionBudgets: [{metadata: {name: b}, spec: {maxUnavailable: -1}}]\npods: []")


# -- expiration and drift -------------------------------------------------------------------


def _one_steady(**kw: object) -> list:
    return [arrive("p0", cpu="700m", memory="1Gi", **kw)]


def test_an_expired_node_is_replaced_before_it_goes_even_with_do_not_disrupt() -> None:
    arrivals = [dataclasses.replace(a, pod=dataclasses.replace(a.pod, do_not_disrupt=True)) for a in _one_steady()]
    h = Harness(binpack_pool(disruption=Disruption(expire_after=HOUR)), arrivals=arrivals, idle_grace=30)
    h.run(600)
    [first] = h.bound().values()
    h.run(HOUR)
    [second] = h.bound().values()
    assert second != first
    assert first not in [i.node_name for i in h.cloud.list_instances()]  # terminated
    assert h.controller.disruption.summary()["Expired"] == {"nodes": 1, "pods": 1, "savings_per_hour": pytest.approx(0.0)}
    (action,) = [a for a in h.controller.disruption.actions if a["reason"] == "Expired"]
    assert action["action"] == "replace"  # the new node was Ready before the old one was marked
    assert h.cluster.evictions == {"default/p0": 1}
    assert h.cluster.work_redone == 0.0  # a pod that runs for good has no work to do again
    [again] = h.cluster.waited_again
    assert 0 <= again <= 7.0  # its new node was Ready: bound again at the next pass of the pool loop (every 7 s)


def test_expiration_waits_for_its_budget() -> None:
    closed = Disruption(expire_after=HOUR, budgets=[DisruptionBudget(nodes="0", reasons=[DisruptionReason.EXPIRED])])
    h = Harness(binpack_pool(disruption=closed), arrivals=_one_steady(), idle_grace=30)
    h.run(2 * HOUR)
    assert "Expired" not in h.controller.disruption.summary()
    (why,) = h.controller.status()["disruption"]["held"].values()
    assert why.startswith("expired (older than expireAfter 3600s); waits for pool general's budgets[0] (nodes: 0): 0 of 1 live node(s) at once")


def test_never_keeps_nodes_for_good() -> None:
    config, _ = parse_config("pools: [{name: a, disruption: {expireAfter: Never}}]\n", "provider.yaml", Path("."))
    assert config.pools[0].disruption.expire_after is None
    assert Pool(name="b").disruption.expire_after == 720 * HOUR


def test_a_node_its_pool_no_longer_allows_is_replaced_unless_held() -> None:
    h = Harness(binpack_pool(instance_types=["a.large"]), arrivals=_one_steady(), idle_grace=30)
    h.run(600)
    [first] = h.bound().values()
    assert h.controller.state.nodes[first].instance_type == "a.large"
    h.config = h.config.model_copy(update={"pools": [binpack_pool(instance_types=["m.*"])]})
    h.new_controller()  # restarted with the new provider.yaml
    h.run(600)
    [second] = h.bound().values()
    assert h.controller.state.nodes[second].instance_type == "m.xlarge"
    assert h.controller.disruption.summary()["Drifted"]["nodes"] == 1


def test_a_node_launched_from_an_image_no_longer_current_is_replaced_from_the_new_one() -> None:
    """Karpenter's AMI drift: the cloud's image for new boots changes (a new bootImageSpec
    resolved); the node launched from the old one is replaced, its pod moved, and the new
    node carries the new image (in its record and in /status)."""
    h = Harness(binpack_pool(), arrivals=_one_steady(), idle_grace=30)
    h.run(600)
    [first] = h.bound().values()
    assert h.controller.state.nodes[first].image_id == "ami-simulated"
    h.run(600)
    assert "Drifted" not in h.controller.disruption.summary()  # the same image: no drift
    h.cloud.image = "ami-2"
    h.run(600)
    [second] = h.bound().values()
    assert second != first
    assert h.controller.state.nodes[second].image_id == "ami-2"
    assert h.controller.disruption.summary()["Drifted"]["nodes"] == 1
    assert first not in [i.node_name for i in h.cloud.list_instances()]
    (listed,) = [n for n in h.controller.status()["nodes"] if n["name"] == second]
    assert listed["image_id"] == "ami-2"


def test_image_drift_needs_both_images_known() -> None:
    node = Node(NodeName("n"), "general", "a.large", OD, "zone-1a", image_id="ami-1")
    pool = Pool(name="general", instance_types=["a.large"], capacity_types=[OD])
    assert drifted(node, pool, CATALOG, "ami-2") == "image ami-1 replaced by ami-2"
    assert drifted(node, pool, CATALOG, "ami-1") == ""
    assert drifted(node, pool, CATALOG, None) == ""  # a launch template, or not resolved yet
    assert drifted(dataclasses.replace(node, image_id=""), pool, CATALOG, "ami-2") == ""  # launched before images were recorded


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"instance_type": "m.xlarge"}, "instance type m.xlarge is no longer allowed"),
        ({"capacity_type": SPOT}, "capacity type spot is no longer allowed"),
        ({"zone": "zone-1b"}, "zone zone-1b is no longer allowed"),
        ({"labels": {}}, "label tier changed"),
        ({"taints": ()}, "taints changed"),
        ({"image_id": "ami-0"}, "image ami-0 replaced by ami-1"),
    ],
)
def test_drift_is_worked_out_again_when_what_it_reads_of_a_record_changes_and_only_then(change: dict, why: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disruption pass asks it of every settled node at every pass, and a record changes
    with every binding: the answer is kept until a field drift reads changes."""
    import nodemanager.controller.disruption as disruption_module

    worked_out: list[str] = []
    monkeypatch.setattr(disruption_module, "drifted", lambda node, *rest: worked_out.append(node.name) or drifted(node, *rest))
    taint = Taint("tier", TaintEffect.NO_SCHEDULE, "a")
    pool = binpack_pool(instance_types=["a.large"], zones=["zone-1a"], labels={"tier": "a"}, taints=[{"key": "tier", "value": "a", "effect": "NoSchedule"}])
    disruption = Harness(pool).controller.disruption
    node = Node(NodeName("n"), "general", "a.large", OD, "zone-1a", labels={"tier": "a"}, taints=(taint,), image_id="ami-1")
    assert disruption._drifted(node, pool, "ami-1") == ""
    bound = dataclasses.replace(node, bound_pods=("default/p",), state=NodeState.CLAIMED)  # what a binding changes: drift reads none of it
    assert disruption._drifted(bound, pool, "ami-1") == ""
    assert worked_out == ["n"]
    assert disruption._drifted(dataclasses.replace(bound, **change), pool, "ami-1") == why
    assert worked_out == ["n", "n"]


def test_a_drifted_node_with_a_do_not_disrupt_pod_is_held_and_says_so() -> None:
    arrivals = [dataclasses.replace(a, pod=dataclasses.replace(a.pod, do_not_disrupt=True)) for a in _one_steady()]
    h = Harness(binpack_pool(instance_types=["a.large"]), arrivals=arrivals, idle_grace=30)
    h.run(600)
    h.config = h.config.model_copy(update={"pools": [binpack_pool(instance_types=["m.*"], labels={"tier": "new"})]})
    h.new_controller()
    h.run(600)
    assert "Drifted" not in h.controller.disruption.summary()
    (why,) = h.controller.status()["disruption"]["held"].values()
    assert why == "drifted (instance type a.large is no longer allowed) but nodemanager.io/do-not-disrupt holds it"


# -- churn ---------------------------------------------------------------------------------


@given(
    st.lists(st.tuples(st.sampled_from(["250m", "500m", "700m", "1"]), st.sampled_from(["256Mi", "1Gi", "2Gi"]), st.integers(1, 4)), min_size=1, max_size=4),
    st.integers(0, 4),
)
@settings(max_examples=6, deadline=None)
def test_any_steady_workload_reaches_a_fixed_point(shapes: list[tuple[str, str, int]], short: int) -> None:
    """Pods that stay (and a few that leave early): once settled, six hours without one more
    disruption, whatever the sizes (the week-long run above shows one case for longer)."""
    stay = [arrive(f"s{i}-{k}", at=60.0 * i, cpu=c, memory=m) for i, (c, m, n) in enumerate(shapes) for k in range(n)]
    leave = [arrive(f"l{k}", at=30.0 * k, duration=900, cpu="700m", memory="1Gi") for k in range(short)]
    h = Harness(binpack_pool(), arrivals=stay + leave, idle_grace=30)
    h.run(HOUR)
    settled = len(h.controller.disruption.actions)
    h.run(6 * HOUR)
    assert len(h.controller.disruption.actions) == settled
    assert len(h.bound()) == len(stay)


def test_a_diurnal_workloads_consolidations_each_save_money_and_never_swap_a_type_for_itself() -> None:
    """Waves of pods that come and go over a day: every consolidation is strictly cheaper,
    and a replacement is never the type and capacity type of a node it replaces."""
    arrivals = [arrive(f"base{i}", cpu="500m", memory="1Gi") for i in range(3)]
    for wave, count in enumerate([2, 6, 10, 8, 4, 1]):
        arrivals += [arrive(f"w{wave}p{k}", at=wave * 7200 + 30 * k, duration=5400 - 300 * k, cpu="700m", memory="2Gi") for k in range(count)]
    h = Harness(binpack_pool(), arrivals=arrivals, idle_grace=60)
    h.run(14 * HOUR)
    consolidations = [a for a in h.controller.disruption.actions if a["reason"] == "Underutilized"]
    assert consolidations  # the waves leave nodes part-used
    for action in consolidations:
        assert action["savingsPerHour"] > 0
        assert not set(action["replacements"]) & set(action["types"])


def test_an_expired_standby_node_is_replaced_by_a_fresh_one() -> None:
    pool = binpack_pool(disruption=Disruption(expire_after=HOUR), standby=[Standby(instance_type="a.large", count=1)])
    h = Harness(pool, idle_grace=30)
    h.run(600)
    [first] = [n for n, node in h.controller.state.nodes.items() if node.state is not NodeState.TERMINATED]
    h.run(HOUR)
    live = [n for n, node in h.controller.state.nodes.items() if node.state not in (NodeState.TERMINATING, NodeState.TERMINATED)]
    assert len(live) == 1
    assert live != [first]
    assert h.controller.disruption.summary()["Expired"]["nodes"] == 1


def test_a_pod_no_pool_can_ever_hold_does_not_block_consolidation() -> None:
    never = arrive("huge", cpu="500", memory="1Gi")  # 500 CPUs: unschedulable, and waiting for good
    h = _run(binpack_pool(), [*_steady_and_finishing(), never])
    assert "default/huge" in h.controller.state.last_decision.unschedulable
    assert h.controller.disruption.summary()["Underutilized"]["nodes"] >= 1


def test_the_quick_tests_offerings_stay_bounded_whatever_pods_come() -> None:
    """A long-running controller meets ever new kinds of pods (each pinned to its own host):
    what the quick test keeps of them stays bounded, and answers stay right after it starts again."""
    from builders import scaler

    sizes = CheaperSizes(scaler(Pool(name="general", instance_types=CELL_TYPES, capacity_types=[OD])).views)
    everything = sizes.below(1.0, ())
    for i in range(3 * SIZES_KEPT):
        pinned = pod(f"p{i}", selector={"kubernetes.io/hostname": f"host-{i}"})
        assert sizes.below(1.0, [pinned]) == []  # no offering is that host
        assert len(sizes.usable.found) <= SIZES_KEPT
        assert len(sizes._kinds) <= SIZES_KEPT
    assert sizes.below(1.0, [pod("free")]) == everything
