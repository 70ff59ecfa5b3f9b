"""Quiet stretches of a simulation skipped: the same report as playing every loop through
them, far fewer loop runs, and skipping off where the next change cannot be told."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest
from bench_modules import load_benchmark

from nodemanager.cluster.workload import parse_workload
from nodemanager.config import parse_config
from nodemanager.controller.virtual import VirtualDriver
from nodemanager.simulator import GC_THRESHOLDS, Simulation

DAY = 86400
CONFIG = """
controllerId: quiet
cloud: {provider: simulated, simulated: {bootDelay: 40s, seed: 1%s}}
cluster: {source: simulated, simulated: {registerDelay: 20s}}
pools:
  - name: general
    instanceTypes: ["m5.*", "c5.*"]
    capacityTypes: [on-demand, spot]
"""
POD = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}
# A few pods alive for days, arriving and ending far apart: quiet most of the time.
LONG = {"pods": [{"name": f"q{i}", "at": round(i * 0.4 * DAY), "duration": round((1 + i % 3) * 0.3 * DAY), "pod": POD} for i in range(5)]}


def play(doc: dict, skip: bool, faults: str = "", config: str = "") -> tuple[dict, Simulation]:
    """The simulation of ``doc`` (on ``config``, else ``CONFIG`` with ``faults``), and its report."""
    config, catalog = parse_config(config or CONFIG % faults, "quiet", Path("."))
    sim = Simulation(config, catalog, parse_workload(json.dumps(doc), "quiet"), clairvoyant=False, skip_quiet=skip)
    report = sim.run()
    report.pop("decisions")  # (the scaler's own timings: never the same twice)
    return report, sim


def test_a_few_pods_over_days_report_the_same_with_most_of_the_time_skipped() -> None:
    skipped, sim = play(LONG, skip=True)
    played, _ = play(LONG, skip=False)
    assert skipped == played
    assert sim.quiet is not None
    assert sim.quiet.skipped > 0.8 * skipped["simulated_seconds"]
    assert skipped["cost"]["usd"] > 0


def test_an_idle_nodes_grace_is_skipped_up_to_its_stop_and_reports_the_same() -> None:
    """Two one-hour pods two days apart, with a six-hour idle grace: each node waits out its
    grace idle, then is stopped. The first wait is skipped (it was played, pass by pass) up
    to a pool period before the stop, which comes at the same instant as when played; the
    last is played, as the run ends with it. (The empty day between is skipped apart.)"""
    doc = {"pods": [{"name": f"p{i}", "at": i * 2 * DAY, "duration": 3600, "pod": POD} for i in range(2)]}
    config = CONFIG.replace("pools:", "nodes: {idleGrace: 6h}\npools:") % ""
    skipped, sim = play(doc, skip=True, config=config)
    played, _ = play(doc, skip=False, config=config)
    assert skipped == played
    assert skipped["simulated_seconds"] > 2 * DAY + 6 * 3600
    assert sim.quiet is not None
    assert sim.quiet.skipped > 7 * 3600  # most of the first pod's hour and its node's six idle hours (2 h before)


def test_an_empty_cluster_is_skipped_to_the_beat_each_loop_would_have_run_at(monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing alive, the run jumps to the next arrival; the pool loop then sees the pod
    at its own next beat, as when every empty pass is played (not at the arrival itself,
    which a beat seldom falls on: the pod waited less than it would have)."""
    doc = {"pods": [{"name": f"p{i}", "at": i * DAY + 7, "duration": 600, "pod": POD} for i in range(2)]}
    skipped, _ = play(doc, skip=False)
    monkeypatch.setattr(Simulation, "_quiet", lambda self: False)
    played, _ = play(doc, skip=False)
    assert skipped == played
    assert skipped["pods"]["bound"] == 2


@pytest.mark.heavy
def test_a_corpus_workload_with_payback_retries_and_cooldowns_reports_the_same() -> None:
    """``jobs`` seed 1 skips stretches that end at consolidation's payback retry and at
    pods' cooldowns: a skip that ran past either missed passes the played run made."""
    corpus = load_benchmark("corpus")
    doc, text = corpus.workload("jobs", 1)
    skipped, sim = play(doc, skip=True, config=text)
    played, _ = play(doc, skip=False, config=text)
    assert skipped == played
    assert sim.quiet is not None
    assert sim.quiet.skipped > 3600


def test_injected_failures_turn_skipping_off() -> None:
    report, sim = play(LONG, skip=True, faults=", spotInterruptionPerHour: 0.01")
    assert sim.quiet is not None
    assert not sim.quiet.possible
    assert sim.quiet.skipped == 0
    assert report["pods"]["bound"] == 5


def test_a_timeline_being_drawn_turns_skipping_off() -> None:
    config, catalog = parse_config(CONFIG % "", "quiet", Path("."))
    assert Simulation(config, catalog, parse_workload(json.dumps(LONG), "quiet"), timeline=True).quiet is None


class _Loops:
    """A controller whose loops only note when they ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, float]] = []
        self.clock = None

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        loop = name.removesuffix("_loop")
        return lambda: self.ran.append((loop, self.clock.now()))  # type: ignore[union-attr]


def test_after_a_jump_every_loop_runs_at_the_very_instant_of_its_own_beat() -> None:
    from nodemanager.clock import VirtualClock

    intervals = {
        "pool": 5.0,
        "heartbeat": 7.0,
        "reaper": 0.3,
        "orphan_gc": 60.0,
        "prices": 43200.0,
        "colocation": 30.0,
        "disruption": 10.0,
        "interruption": 2.0,
        "reservations": 60.0,
    }
    runs = []
    for jump in (True, False):
        clock, loops = VirtualClock(0.0), _Loops()
        loops.clock = clock
        driver = VirtualDriver(loops, clock, intervals)  # type: ignore[arg-type]
        driver.step()
        if jump:
            driver.jump_to(1000.0)
        else:
            while driver.next_due() < 1000.0:
                driver.step()
        loops.ran.clear()
        driver.run_until(1100.0)
        runs.append(loops.ran)
    assert runs[0][0] == ("pool", 1000.0)
    assert runs[0] == runs[1]  # (floats added up as stepping adds them: equal to the last bit)


def _worth():  # type: ignore[no-untyped-def]
    from nodemanager.controller.move_worth import MoveWorth
    from nodemanager.status.metrics import Metrics

    return MoveWorth(None, Metrics(scraped=False), None)  # type: ignore[arg-type]


@pytest.mark.parametrize("passes", [(), (600.0,), (86000.0, 86300.0), tuple(float(t) for t in range(0, 86340, 600))])
def test_what_a_move_counts_for_does_not_depend_on_when_passes_forget(passes: tuple[float, ...]) -> None:
    """A pod moved at 0 and again a day and a minute later starts its count again, and one
    moved again within the day counts two, however many forgetting passes ran before
    (a skipped quiet stretch has none)."""
    from nodemanager.controller.move_worth import REMEMBERED
    from nodemanager.model import Pod, Resources

    pods = [Pod("default", name, f"default/{name}", Resources()) for name in ("late", "soon")]
    worth = _worth()
    worth.forget(0.0, 1800.0)
    worth.moved(pods, 0.0)
    for pod in pods:
        worth.arrived(pod, 100.0)
    for t in passes:
        worth.forget(t, 1800.0)
    worth.moved(pods[:1], REMEMBERED + 60)
    worth.moved(pods[1:], REMEMBERED - 60)
    for pod in pods:
        worth.arrived(pod, REMEMBERED + 100)
    assert worth._moved[pods[0].key].count == 1
    assert worth._moved[pods[1].key].count == 2
    assert worth.next_change(REMEMBERED + 100) == REMEMBERED + 60 + 1800  # ("late": one move, one cooldown)
    assert worth.next_change(REMEMBERED + 60 + 1800) == REMEMBERED - 60 + REMEMBERED  # ("soon": its second move, a day)


def test_a_stretch_is_skipped_two_passes_after_the_last_change_not_two_orphan_collections() -> None:
    """Skipping waits for two runs of each loop that may act (ten seconds apiece), not for
    the orphan collector's minute: its next pass is told directly. Waiting 120 s after
    every change cost a busy month more than all its quiet ones."""
    config, catalog = parse_config(CONFIG % "", "quiet", Path("."))
    sim = Simulation(config, catalog, parse_workload(json.dumps(LONG), "quiet"), clairvoyant=False)
    assert sim.quiet is not None
    waited: dict[float, float] = {}  # each last change -> how long after it a skip was first offered
    until = sim.quiet.until

    def noting(now: float, horizon: float) -> float | None:
        target = until(now, horizon)
        if target is not None:
            waited.setdefault(sim.quiet._since, now - sim.quiet._since)  # type: ignore[union-attr]
        return target

    sim.quiet.until = noting  # type: ignore[method-assign]
    sim.run()
    assert waited
    assert min(waited.values()) >= 20
    assert max(waited.values()) < 60  # (before: 120 s at least)


def test_an_instance_no_record_knows_or_a_suspect_keeps_the_collector_awake() -> None:
    from cloud.base import BootRequest
    from nodemanager.model import CapacityType

    config, catalog = parse_config(CONFIG % "", "quiet", Path("."))
    sim = Simulation(config, catalog, parse_workload(json.dumps(LONG), "quiet"), clairvoyant=False)
    assert sim.quiet is not None
    gc = sim.controller.gc
    assert gc.idle(sim.cloud.live_ids())
    gc.suspects.add("i-suspected")
    assert not gc.idle(sim.cloud.live_ids())
    gc.suspects.clear()
    sim.cloud.boot(BootRequest("stray", "general", "m5.large", CapacityType.ON_DEMAND, "us-east-1a", "stray", 0))
    assert not gc.idle(sim.cloud.live_ids())  # an orphan: the collector's next pass terminates it


def test_the_candidates_order_changes_where_two_ranks_meet() -> None:
    """Ranked by work lost per dollar (pods × seconds run, over the price): a node with more
    pods overtakes a cheaper rank as time passes, at the instant the lines meet."""
    from nodemanager.controller.tenure import Held, first_overtaking
    from nodemanager.model import PodKey

    def held(*starts: float) -> Held:
        started = {PodKey(f"ns/p{i}"): s for i, s in enumerate(starts)}
        return Held(min(starts), started, sum(starts))

    one, three = held(0.0), held(900.0, 900.0, 900.0)  # at 1000: 1000 s of work, 300 s
    ranked = [(three, 1.0), (one, 1.0)]
    assert three.work(1000.0) < one.work(1000.0)
    met = first_overtaking(ranked, 1000.0)
    assert 1349 < met <= 1350  # 3t - 2700 = t: t = 1350 (a hair early, never late)
    assert three.work(met - 1) < one.work(met - 1)
    assert three.work(met + 1) > one.work(met + 1)
    assert first_overtaking([(one, 1.0), (three, 1.0)], 2000.0) == float("inf")  # the faster already leads
    assert first_overtaking([(three, 0.0), (one, 1.0)], 1000.0) == float("inf")  # a node with no price never moves


def test_a_run_collects_cycles_less_often_and_gives_the_collector_back_its_thresholds() -> None:
    config, catalog = parse_config(CONFIG % "", "quiet", Path("."))
    sim = Simulation(config, catalog, parse_workload(json.dumps(LONG), "quiet"), clairvoyant=False)
    seen, decided = [], sim.controller.provisioner.on_decision
    assert decided is not None
    sim.controller.provisioner.on_decision = lambda decision, now: (seen.append(gc.get_threshold()), decided(decision, now))
    before = gc.get_threshold()
    sim.run()
    assert seen
    assert set(seen) == {GC_THRESHOLDS} != {before}
    assert gc.get_threshold() == before
