"""Consolidation that pays for its evictions: the payback rule, the run lengths it learns,
Karpenter's Balanced score, the cooldown of pods moved lately, and the cost issue's
seeded batch workload (a pod moved 14 times and 14% of the work done again before)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from bench_modules import load_benchmark
from builders import pod
from harness import Harness, arrive, binpack_pool
from hypothesis import given, settings
from hypothesis import strategies as st

from nodemanager.cluster.workload import WorkloadError, parse_workload
from nodemanager.config import parse_config
from nodemanager.config.schema import ConsolidationPayback, Disruption
from nodemanager.controller.move_worth import MoveWorth
from nodemanager.controller.run_lengths import KEPT, RunLengths
from nodemanager.model.pod import OwnerRef
from nodemanager.scaler.payback import Destination, Evicted, Payback, balanced_verdict, eviction_cost, node_disruption
from nodemanager.simulator import Simulation
from nodemanager.status.metrics import Metrics

corpus = load_benchmark("corpus")
RULE = Payback(horizon=3600.0, startup=30.0)


# -- the payback rule (pure) ----------------------------------------------------------------


STAYS = Destination(price=0.4, until=math.inf)  # a node its own services keep
NEW = Destination(price=0.1, until=0.0)  # a replacement nothing else keeps


def _job(ran: float, left: float | None, to: str = "stays") -> Evicted:
    return Evicted(ran=ran, left=left, share=0.05, to=to)


@pytest.mark.parametrize(
    ("removed", "destinations", "pays"),
    [
        # a service moves into the room of a node that stays anyway: only its start-up
        ([(0.2, [_job(7200, None)])], {"stays": STAYS}, True),
        # a Job's pod expected to end now: its node would be empty soon anyway
        ([(0.2, [_job(60, 0.0)])], {"stays": STAYS}, False),
        # young Job pods with half an hour to go, into a node that stays: the node's half hour saved
        ([(0.2, [_job(120, 1800.0)] * 3)], {"stays": STAYS}, True),
        # the same pods onto a new node of half the price: it runs their half hour and the two minutes again
        ([(0.2, [_job(120, 1800.0, "new")] * 3)], {"new": NEW}, True),
        # an old Job pod restarted on a new node: the new node runs its hour again, more than the half hour saved
        ([(0.2, [_job(3600, 1800.0, "new")])], {"new": NEW}, False),
        # a Job's pod onto a node whose own Job ends in ten minutes: that node stays its whole run longer
        ([(0.2, [_job(600, 1800.0, "ending")])], {"ending": Destination(0.4, 600.0)}, False),
        # a service onto such a node keeps it the whole horizon
        ([(0.2, [_job(600, None, "ending")])], {"ending": Destination(0.4, 600.0)}, False),
        # a Job's pod half done, in half of its node, into room that stays: the node's half hour
        # saved pays for the room of its half hour done again, not for its Job's delay as well
        ([(0.2, [Evicted(ran=1800, left=1800.0, share=0.1, to="stays")])], {"stays": STAYS}, False),
    ],
)
def test_a_move_pays_when_the_fleet_costs_less_with_it_until_its_pods_end(removed: list, destinations: dict, pays: bool) -> None:
    without, with_move = RULE.weigh(removed, destinations)
    assert (with_move <= without) is pays
    assert (RULE.verdict(removed, destinations) == "") is pays


def test_what_the_move_saves_is_counted_until_the_last_pod_would_end_and_never_past_the_horizon() -> None:
    assert RULE.weigh([(0.36, [_job(0, 600.0), _job(0, 1200.0)])], {"stays": STAYS})[0] == pytest.approx(0.36 * 1200 / 3600)
    assert RULE.weigh([(0.36, [_job(0, 10 * 3600.0)])], {"stays": STAYS})[0] == pytest.approx(0.36)
    assert RULE.weigh([(0.36, [_job(0, None)])], {"stays": STAYS})[0] == pytest.approx(0.36)
    # a new node is charged from now until its last pod ends, its redone work included, at most the
    # horizon; and the pod its share for its start-up, and twice that for the work it does again
    # (the room it takes again, and its Job's delay)
    assert RULE.weigh([(0.36, [_job(600, 1200.0, "new")])], {"new": NEW})[1] == pytest.approx((0.1 * 1800 + 0.05 * (30 + 2 * 600)) / 3600)
    assert RULE.weigh([(0.36, [_job(3000, 1200.0, "new")])], {"new": NEW})[1] == pytest.approx((0.1 * 3600 + 0.05 * (30 + 2 * 3000)) / 3600)
    assert RULE.weigh([(0.36, [_job(3000, None, "stays")])], {"stays": STAYS})[1] == pytest.approx(0.05 * 30 / 3600)  # a service loses no work


def test_a_move_that_pays_more_once_a_pod_it_would_restart_has_ended_waits_for_it() -> None:
    """A Job's pod two minutes from its end after fifty of work, beside a young one: the move
    pays now, but keeping the node two minutes spares the fifty minutes done again."""
    removed = [(0.2, [_job(3000, 120.0), _job(120, 1800.0)])]
    without, now = RULE.weigh(removed, {"stays": STAYS})
    assert now <= without  # it pays now
    later = 0.2 * 120 / 3600 + 0.05 * (30 + 2 * 240) / 3600  # the node two more minutes, the young pod's work of them
    assert later < now
    assert RULE.verdict(removed, {"stays": STAYS}) == (
        f"it pays more in 2 min, once pods it would restart have ended: ${later:.4f} then (the nodes kept meanwhile included) against ${now:.4f} now"
    )
    assert RULE.verdict([(0.2, [_job(3000, 45.0), _job(120, 1800.0)])], {"stays": STAYS}).startswith("it pays more in 45 s, ")


@pytest.mark.parametrize(
    "removed",
    [
        [(2.0, [_job(60, 600.0), _job(120, 1800.0)])],  # a dear node for ten minutes, to spare a minute's work
        [(0.2, [_job(3000, 0.0), _job(120, 1800.0)])],  # expected to end now: nothing to wait for
        [(0.2, [_job(3000, None), _job(120, 1800.0)])],  # a service: it never ends
        [(0.2, [_job(3000, 2 * 3600.0), _job(120, 1800.0)])],  # past the horizon
    ],
)
def test_a_move_does_not_wait_for_pods_when_waiting_costs_more_or_they_do_not_end_soon(removed: list) -> None:
    assert RULE.verdict(removed, {"stays": STAYS}) == ""


def _cost_after(removed: list, destinations: dict, wait: float) -> float:
    """The move after ``wait``, weighed as the rule weighs a move now: the nodes kept meanwhile,
    then the pods still there, each having run the wait longer with that much less left."""
    still = [
        (price, [Evicted(e.ran + wait, None if e.left is None else e.left - wait, e.share, e.to) for e in pods if e.left is None or e.left > wait])
        for price, pods in removed
    ]
    after = {name: Destination(d.price, max(d.until - wait, 0.0)) for name, d in destinations.items()}
    return sum(price for price, _ in removed) * wait / 3600 + RULE.weigh(still, after)[1]


_evicted = st.builds(
    Evicted,
    ran=st.floats(0, 7200),
    left=st.none() | st.floats(0, 5000),
    share=st.floats(0, 0.5),
    to=st.sampled_from(["a", "b", "new"]),
)


@settings(max_examples=300, deadline=None)
@given(
    removed=st.lists(st.tuples(st.floats(0.01, 3.0), st.lists(_evicted, max_size=8)), min_size=1, max_size=3),
    untils=st.tuples(st.floats(0, 4000) | st.just(math.inf), st.floats(0, 4000) | st.just(math.inf)),
)
def test_the_best_wait_is_the_cheapest_of_the_moves_weighed_after_each_pods_end(removed: list, untils: tuple) -> None:
    """``_later`` works the waits out from sums over the pods in the order they end; weighing
    the move again after each wait, as the rule weighs a move now, gives the same cheapest."""
    destinations = {"a": Destination(0.4, untils[0]), "b": Destination(0.2, untils[1]), "new": Destination(0.1, 0.0)}
    waits = sorted({e.left for _, pods in removed for e in pods if e.left is not None and 0 < e.left < RULE.horizon})
    cheapest = min((_cost_after(removed, destinations, w) for w in waits), default=math.inf)
    wait, cost = RULE._later(removed, destinations, math.inf)
    assert cost == pytest.approx(cheapest, rel=1e-9, abs=1e-12)
    if waits:
        assert _cost_after(removed, destinations, wait) == pytest.approx(cheapest, rel=1e-9, abs=1e-12)


# -- run lengths ------------------------------------------------------------------------------


def test_what_is_left_is_the_mean_residual_of_the_durations_seen() -> None:
    lengths = RunLengths()
    assert lengths.left("a", 0.0) == 0.0  # nothing seen: nothing expected
    for seconds in (600.0, 1200.0, 1800.0):
        lengths.finished("a", seconds)
    assert lengths.left("a", 0.0) == pytest.approx(1200.0)
    assert lengths.left("a", 900.0) == pytest.approx(1500.0 - 900.0)
    assert lengths.left("a", 1800.0) == 0.0  # longer than any seen


def test_a_controllers_own_pods_are_used_once_three_have_ended() -> None:
    lengths = RunLengths()
    for _ in range(10):
        lengths.finished("short", 60.0)
    lengths.finished("long", 3600.0)
    lengths.finished("long", 3600.0)
    assert lengths.left("long", 0.0) == pytest.approx((10 * 60 + 2 * 3600) / 12)  # two of its own: everyone's
    lengths.finished("long", 3600.0)
    assert lengths.left("long", 0.0) == pytest.approx(3600.0)
    assert lengths.left("other", 0.0) == pytest.approx((10 * 60 + 3 * 3600) / 13)


def test_only_the_latest_durations_are_kept() -> None:
    lengths = RunLengths()
    for _ in range(KEPT):
        lengths.finished("a", 10.0)
    for i in range(KEPT):
        lengths.finished(f"b{i}", 1000.0)
    assert lengths.left("c", 0.0) == pytest.approx(1000.0)


# -- Karpenter's Balanced score (its RFC's cases) -------------------------------------------


def test_balanced_passes_a_move_whose_savings_share_is_at_least_half_its_disruption_share() -> None:
    assert balanced_verdict(10.0, 11.0, 10.0, 11.0, 2) == ""  # a single-node pool's delete scores 1.0
    assert balanced_verdict(1.0, 3.0, 10.0, 30.0, 2) == ""  # 10% saved for 10%
    assert balanced_verdict(1.0, 6.0, 10.0, 30.0, 2) == ""  # 10% for 20%: score 0.5, at the threshold
    assert "Balanced score 0.33" in balanced_verdict(1.0, 9.0, 10.0, 30.0, 2)  # 10% for 30%
    assert balanced_verdict(1.0, 9.0, 10.0, 30.0, 3) == ""  # k = 3 lets it through
    assert "saves nothing" in balanced_verdict(0.0, 1.0, 10.0, 30.0, 3)


def test_a_pods_eviction_cost_grows_with_its_priority_within_0_and_10() -> None:
    assert eviction_cost(pod("a")) == 1.0
    assert eviction_cost(pod("b", priority=2**25)) == 2.0
    assert eviction_cost(pod("c", priority=-(2**30))) == 0.0
    assert eviction_cost(pod("d", priority=2**30)) == 10.0
    assert node_disruption([pod("a"), pod("b", priority=2**25)]) == 4.0  # 1 for the node


# -- configuration ---------------------------------------------------------------------------


def test_the_defaults_pay_back_cool_down_and_balanced_defaults_to_karpenters_k() -> None:
    d = Disruption()
    assert d.consolidation_payback == ConsolidationPayback(enabled=True, horizon=3600.0, pod_startup=30.0)
    assert d.consolidation_cooldown == 1800.0
    assert Disruption(consolidation_policy="Balanced").threshold == 2
    assert Disruption(consolidation_policy="Balanced").consolidates
    assert not Disruption(consolidation_policy="WhenEmpty").consolidates


# -- workloads: a group that runs for a duration is a Job's ----------------------------------


def test_a_group_with_a_duration_is_a_jobs_pods_and_one_without_runs_for_good() -> None:
    text = json.dumps(
        {
            "pods": [
                {"name": "job", "duration": "10m", "pod": {"spec": {"containers": [{"name": "c"}]}}},
                {"name": "svc", "pod": {"spec": {"containers": [{"name": "c"}]}}},
                {
                    "name": "web",
                    "duration": "1h",
                    "pod": {
                        "metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "controller": True}]},
                        "spec": {"containers": [{"name": "c"}]},
                    },
                },
                {"name": "once", "pod": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}}},
            ]
        }
    )
    pods = {a.pod.name: a.pod for a in parse_workload(text, "w.json")}
    assert pods["job"].owner == OwnerRef("batch/v1", "Job", "job")
    assert [pods[n].completes for n in ("job", "svc", "web", "once")] == [True, False, False, True]


def test_a_restart_policy_kube_does_not_know_names_its_field() -> None:
    text = json.dumps({"pods": [{"name": "x", "pod": {"spec": {"restartPolicy": "Sometimes", "containers": [{"name": "c"}]}}}]})
    with pytest.raises(WorkloadError, match=r"pods\[0\]\.pod\.spec\.restartPolicy: expected one of Always, OnFailure, Never, got 'Sometimes'"):
        parse_workload(text, "w.json")


# -- the controller ----------------------------------------------------------------------------


def _old_job_beside_room(payback: bool) -> Harness:
    """Node 1 holds a long job and room; node 2 a job that has run 50 minutes, which would
    fit on node 1. No job has ended yet, so how long it has left is not known."""
    pool = binpack_pool(disruption=Disruption(consolidation_payback=ConsolidationPayback(enabled=payback)))
    arrivals = [
        arrive("long", at=0, duration=6 * 3600, cpu="1", memory="1Gi"),
        arrive("filler", at=0, duration=600, cpu="700m", memory="1Gi"),  # keeps node 1 full until it ends
        arrive("late", at=60, duration=4 * 3600, cpu="700m", memory="1Gi"),
    ]
    h = Harness(pool, arrivals=arrivals, idle_grace=30)
    h.run(3000)
    return h


def test_a_job_pod_whose_end_is_not_known_is_not_moved_for_a_saving_that_depends_on_it() -> None:
    kept = _old_job_beside_room(payback=True)
    assert "Underutilized" not in kept.controller.disruption.summary()
    assert kept.cluster.evictions == {}
    assert kept.controller.disruption.worth.rejected["payback"] >= 1
    assert any("can pay" in why or "with the move against" in why for why in kept.controller.disruption.blocked.values())
    moved = _old_job_beside_room(payback=False)  # Karpenter's WhenEmptyOrUnderutilized: any saving
    assert moved.controller.disruption.summary()["Underutilized"]["nodes"] >= 1
    assert moved.cluster.work_redone > 0


def test_a_pod_consolidation_moved_keeps_its_new_node_for_the_cooldown() -> None:
    """Four services and four jobs interleaved on four nodes: once the jobs end, services
    are moved together. The node they land on is held while the cooldown runs."""
    stay = [arrive(f"p{i}", at=i * 120, cpu="700m", memory="1Gi") for i in range(4)]
    leave = [arrive(f"q{i}", at=i * 120 + 60, duration=900, cpu="700m", memory="1Gi") for i in range(4)]
    h = Harness(binpack_pool(disruption=Disruption(consolidation_cooldown=7200)), arrivals=stay + leave, idle_grace=30)
    h.run(3600)
    assert h.controller.disruption.summary()["Underutilized"]["nodes"] >= 1
    moved = {key for key, n in h.cluster.evictions.items() if n}
    assert moved
    assert h.controller.disruption.worth.rejected["cooldown"] >= 1
    held_for = {node: why for node, why in h.controller.disruption.blocked.items() if "was moved" in why}
    assert held_for
    assert set(held_for) <= set(h.bound().values())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_seeded_batch_workload_moves_no_pod_more_than_twice_and_redoes_little(seed: int) -> None:
    """The cost issue's shape (60 groups of 1-40 Job pods over two hours, 5-90 minutes each)
    on seeds nobody tuned for. Before: one pod evicted 9-12 times, 10-15% of the work done
    again, and the day ran to 6-7 hours for work that ends after 3.1-3.3. Now 1.6%, 1.1% and
    1.8%, ending 0.1-1.3 hours after the work. These move with the loops' phase (seeds 4 and
    5 do 3.2% and 3.4% again), so the bounds here are the pathology's, with room for that."""
    doc, text = corpus.workload("batch", seed)
    config, catalog = parse_config(text, "corpus", Path("."))
    report = Simulation(config, catalog, parse_workload(json.dumps(doc), "batch")).run()
    evicted = report["pods"]["evicted"]
    assert report["ended"] == "settled"
    assert report["pods"]["bound"] == report["pods"]["total"]
    assert evicted["max_per_pod"] <= 2
    assert evicted["work_redone_hours"] <= 0.065 * corpus._asked(doc)
    last_end = max(float(g["at"].rstrip("s")) + float(g["duration"].rstrip("s")) for g in doc["pods"])
    assert report["simulated_seconds"] <= last_end + 2 * 3600


def test_pods_first_seen_in_one_pass_are_told_in_the_order_of_their_keys() -> None:
    """Who is taken for a moved pod depends on the order arrivals are told in: in a set's
    order it varied with the hash seed from run to run, and with it a day's cost."""
    names = [f"p{i}" for i in range(40)]
    h = Harness(binpack_pool(), arrivals=[arrive(n, at=0, cpu="10m", memory="16Mi") for n in names])
    h.run(120)
    arrived = h.controller.disruption.tenure.track(h.clock.now() + 1)  # nothing new since the loops ran
    assert arrived.arrived == []
    fresh = Harness(binpack_pool(), arrivals=[arrive(n, at=0, cpu="10m", memory="16Mi") for n in names])
    fresh.run(120)
    fresh.controller.disruption.tenure.pods_since.clear()
    fresh.controller.disruption.tenure._marks = None  # as after a restart: every node looked at again
    told = [p.key for p in fresh.controller.disruption.tenure.track(fresh.clock.now()).arrived]
    assert len(told) == 40
    assert told == sorted(told)


def test_a_pod_moved_twice_in_a_day_is_not_moved_again_that_day() -> None:
    """The cooldown after a first move, then a day: before, a second move's wait was four times
    the cooldown (2 hours), and a web service was moved four times in a simulated day."""
    worth = MoveWorth(None, Metrics(scraped=False), None)  # type: ignore[arg-type]
    web = pod("web-1")
    worth.forget(0.0, 1800.0)
    worth.moved([web], 0.0)
    worth.arrived(web, 10.0)
    assert worth.cooling([web], 1800.0, 1000.0)
    assert not worth.cooling([web], 1800.0, 1900.0)
    worth.moved([web], 2000.0)
    worth.arrived(web, 2010.0)
    assert "a day at least after two" in worth.cooling([web], 1800.0, 2000.0 + 3 * 3600)
    assert worth.cooling([web], 1800.0, 2000.0 + 86399)
    assert not worth.cooling([web], 1800.0, 2000.0 + 86401)
