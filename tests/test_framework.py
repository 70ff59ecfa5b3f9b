"""Framework semantics at every extension point, with recording plugins."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from builders import pod
from hypothesis import given
from hypothesis import strategies as st

from nodemanager.model import CapacityType, Operator, Pod, Resources, Taint, TaintEffect
from nodemanager.model.selectors import Requirement, SelectorTerm
from nodemanager.scheduling import Code, CycleState, Framework, FrameworkConfigError, NodeInfo, Profile, Registry, Status, default_registry
from nodemanager.scheduling import interfaces as ifc
from nodemanager.scheduling.profile import DEFAULT_PROFILE
from nodemanager.scheduling.status import is_success
from nodemanager.scheduling.waiting import MAX_PERMIT_WAIT

CALLS: list[str] = []


def make(name: str, *bases: type, **methods):
    """A plugin class called ``name`` implementing ``bases`` with the given methods."""
    return type(name, bases, {"name": name, **methods})


def rec(label: str, result=None):
    def method(self, *args):
        CALLS.append(f"{self.name}.{label}")
        return result(self, *args) if callable(result) else result

    return method


def framework(profile: Profile, *plugins: type) -> Framework:
    registry = default_registry()
    for plugin in plugins:
        registry.register(plugin.name, plugin)
    CALLS.clear()
    return Framework(profile, registry, seed=1)


def info(name: str, cpu: int = 4000, memory: int = 8 * 2**30, **kw) -> NodeInfo:
    return NodeInfo(name, "pool", "m.large", CapacityType.ON_DEMAND, "z", Resources({"cpu": cpu, "memory": memory, "pods": 10}), {}, **kw)


def prof(**points) -> Profile:
    base = {"pre_filter": (), "filter": (), "score": (), "reserve": (), "unreserve": (), "permit": (), "bind": (), "post_bind": (), "pre_bind": ()}
    return Profile(**{**base, **points})


P = pod("p")

# -- Status and CycleState -------------------------------------------------------------------


def test_status_codes():
    assert is_success(None)
    assert is_success(Status())
    assert Status(Code.UNSCHEDULABLE).is_unschedulable()
    assert Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE).is_unschedulable()
    assert not Status(Code.ERROR).is_unschedulable()
    assert Status().as_error() is None
    assert str(Status(Code.ERROR, "boom").as_error()) == "boom"
    assert [c.value for c in Code] == [0, 1, 2, 3, 4, 5]


def test_cycle_state_read_write_delete_clone():
    class Box:
        def __init__(self, v):
            self.v = v

        def clone(self):
            return Box(self.v)

    state = CycleState()
    state.write("a", Box(1))
    state.write("b", [1])
    copy = state.clone()
    copy.read("a").v = 2
    copy.read("b").append(2)
    assert state.read("a").v == 1
    assert state.read("b") == [1]
    state.delete("a")
    assert "a" not in state
    with pytest.raises(KeyError, match="'a'"):
        state.read("a")


# -- construction --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "problem"),
    [
        pytest.param(prof(filter=("Nope",)), "filter[0]: unknown plugin 'Nope'", id="unknown"),
        pytest.param(prof(filter=("Zone", "Zone")), "filter[1]: 'Zone' is listed twice", id="twice"),
        pytest.param(prof(score=(("Zone", 1),)), "score[0]: plugin 'Zone' does not implement score", id="wrong-point"),
        pytest.param(prof(queue_sort=()), "queueSort: exactly one plugin must be enabled, got 0", id="no-queue-sort"),
        pytest.param(prof(queue_sort=("PrioritySort", "PrioritySort")), "queueSort[1]: 'PrioritySort' is listed twice", id="two-queue-sorts"),
        pytest.param(prof(score=(("MostAllocated", -1),)), "score: weight of 'MostAllocated' must be >= 0, got -1", id="negative-weight"),
    ],
)
def test_profile_errors(profile, problem):
    with pytest.raises(FrameworkConfigError) as err:
        framework(profile)
    assert any(line.startswith(problem) for line in err.value.problems), err.value.problems


def test_registry_refuses_duplicates_and_is_built_explicitly():
    registry = Registry()
    registry.register("X", object)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="already registered"):
        registry.register("X", object)  # type: ignore[arg-type]
    assert "PrioritySort" in default_registry()
    assert "PrioritySort" not in Registry()


# -- prefilter / filter / postfilter ---------------------------------------------------------


def test_prefilter_unschedulable_keeps_code_and_names_plugin():
    bad = make("Bad", ifc.PreFilterPlugin, pre_filter=rec("pre", Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "no")))
    fw = framework(prof(pre_filter=("Bad",)), bad)
    status = fw.run_pre_filter_plugins(CycleState(), P)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == 'rejected by "Bad" at prefilter: no'


def test_prefilter_other_failure_is_error_and_schedule_aborts():
    bad = make("Bad", ifc.PreFilterPlugin, pre_filter=rec("pre", Status(Code.WAIT, "odd")))
    fw = framework(prof(pre_filter=("Bad",)), bad)
    result = fw.schedule(CycleState(), P, [info("n1")])
    assert result.status.code is Code.ERROR
    assert result.node is None


def test_prefilter_extensions():
    class Ext(ifc.PreFilterExtensions):
        def add_pod(self, state, p, added, node):
            CALLS.append(f"add {added.name}")

        def remove_pod(self, state, p, removed, node):
            return Status(Code.UNSCHEDULABLE, "x")

    plugin = make("WithExt", ifc.PreFilterPlugin, pre_filter=rec("pre"), pre_filter_extensions=lambda self: Ext())
    fw = framework(prof(pre_filter=("WithExt",)), plugin)
    assert fw.run_pre_filter_extension_add_pod(CycleState(), P, pod("other"), info("n")).is_success()
    assert CALLS == ["add other"]
    assert fw.run_pre_filter_extension_remove_pod(CycleState(), P, pod("other"), info("n")).code is Code.ERROR


def test_prefilter_skip_leaves_out_that_plugins_filter_and_extensions_for_the_pod():
    """kube's SkipFilterPlugins: a PreFilter that returns Skip has nothing to check for this
    pod, so its Filter and its PreFilter extensions are not run (the others are)."""

    class Ext(ifc.PreFilterExtensions):
        def add_pod(self, state, p, added, node):
            CALLS.append(f"{added.name} added")

    skipping = make(
        "Skipping",
        ifc.PreFilterPlugin,
        ifc.FilterPlugin,
        pre_filter=rec("pre", Status(Code.SKIP)),
        filter=rec("filter", Status(Code.UNSCHEDULABLE, "never asked")),
        pre_filter_extensions=lambda self: Ext(),
    )
    other = make("Other", ifc.FilterPlugin, filter=rec("filter"))
    fw = framework(prof(pre_filter=("Skipping",), filter=("Skipping", "Other")), skipping, other)
    state = CycleState()
    assert fw.run_pre_filter_plugins(state, P).is_success()
    assert state.skip_filter == {"Skipping"}
    assert fw.run_filter_plugins(state, P, info("n1")).is_success()
    assert fw.run_pre_filter_extension_add_pod(state, P, pod("q"), info("n1")).is_success()
    assert CALLS == ["Skipping.pre", "Other.filter"]
    assert state.clone().skip_filter == {"Skipping"}
    assert fw.run_filter_plugins(CycleState(), P, info("n1")).code is Code.UNSCHEDULABLE  # no PreFilter ran: nothing skipped


def test_filter_stops_at_first_failure_and_unschedulable_excludes_only_that_node():
    first = make("First", ifc.FilterPlugin, filter=rec("filter", lambda self, s, p, n: Status(Code.UNSCHEDULABLE, "full") if n.name == "n1" else None))
    second = make("Second", ifc.FilterPlugin, filter=rec("filter"))
    fw = framework(prof(filter=("First", "Second")), first, second)
    result = fw.schedule(CycleState(), P, [info("n1"), info("n2")])
    assert result.node == "n2"
    assert result.filtered["n1"] == Status(Code.UNSCHEDULABLE, "full", "First")
    assert CALLS == ["First.filter", "First.filter", "Second.filter"]  # Second never saw n1


def test_the_default_filters_run_in_kube_schedulers_order_so_a_node_is_reported_by_the_first_that_fails() -> None:
    """kube-scheduler's default plugins (default_plugins.go) filter NodeUnschedulable, NodeName,
    TaintToleration, NodeAffinity, NodePorts, then NodeResourcesFit, and a node is reported
    by the first that refuses it: a tainted node too small for the pod had an untolerated
    taint, an unlabelled one did not match the node selector, before either lacked CPU."""
    assert DEFAULT_PROFILE.filter[:6] == ("NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit")
    big = pod("p", cpu="8", selector={"disk": "ssd"})
    small = Resources({"cpu": 2000, "memory": 8 * 2**30, "pods": 10})
    taint = Taint("dedicated", TaintEffect.NO_SCHEDULE, "db")
    tainted = NodeInfo("tainted", "pool", "m.large", CapacityType.ON_DEMAND, "z", small, {"disk": "ssd"}, (taint,))
    unlabelled = NodeInfo("unlabelled", "pool", "m.large", CapacityType.ON_DEMAND, "z", small, {})
    result = Framework(DEFAULT_PROFILE, default_registry()).schedule(CycleState(), big, [tainted, unlabelled])
    assert result.node is None
    assert {name: status.plugin for name, status in result.filtered.items()} == {"tainted": "TaintToleration", "unlabelled": "NodeAffinity"}


def test_the_default_score_weights_are_kube_schedulers_where_the_plugins_are_its() -> None:
    """default_plugins.go: TaintToleration 3, NodeAffinity 2, PodTopologySpread 2, InterPodAffinity 2,
    NodeResourcesBalancedAllocation 1, NodeResourcesFit 1 (here MostAllocated, the cluster
    autoscaler's packing strategy, in its place)."""
    weights = {"MostAllocated": 1, "BalancedAllocation": 1, "TaintToleration": 3, "NodeAffinity": 2, "PodTopologySpread": 2, "InterPodAffinity": 2}
    assert dict(DEFAULT_PROFILE.score) == weights


def test_filter_error_aborts_the_whole_attempt():
    boom = make("Boom", ifc.FilterPlugin, filter=rec("filter", lambda self, s, p, n: Status(Code.SKIP, "weird") if n.name == "n1" else None))
    fw = framework(prof(filter=("Boom",)), boom)
    result = fw.schedule(CycleState(), P, [info("n1"), info("n2")])
    assert result.status.code is Code.ERROR
    assert result.node is None
    assert CALLS == ["Boom.filter"]  # n2 was never filtered


def test_no_feasible_node_is_unschedulable():
    no = make("No", ifc.FilterPlugin, filter=rec("filter", Status(Code.UNSCHEDULABLE, "no")))
    result = framework(prof(filter=("No",)), no).schedule(CycleState(), P, [info("n1")])
    assert result.status.code is Code.UNSCHEDULABLE
    assert result.status.message == "0/1 nodes are available"


def test_postfilter_sees_feasible_and_filtered_and_failure_is_error():
    seen = {}

    def post(self, state, p, feasible, filtered):
        seen["feasible"] = [n.name for n in feasible]
        seen["filtered"] = sorted(filtered)
        return Status(Code.UNSCHEDULABLE, "nope")

    only_n2 = make("OnlyN2", ifc.FilterPlugin, filter=lambda self, s, p, n: None if n.name == "n2" else Status(Code.UNSCHEDULABLE, "x"))
    post_plugin = make("Post", ifc.PostFilterPlugin, post_filter=post)
    fw = framework(prof(filter=("OnlyN2",), post_filter=("Post",)), only_n2, post_plugin)
    result = fw.schedule(CycleState(), P, [info("n1"), info("n2")])
    assert seen == {"feasible": ["n2"], "filtered": ["n1"]}
    assert result.status.code is Code.ERROR


# -- score ---------------------------------------------------------------------------------


def scorer(name, table, normalize=None):
    methods = {"score": lambda self, s, p, n: (table[n.name], None)}
    if normalize:
        methods["normalize_score"] = normalize
    return make(name, ifc.ScorePlugin, **methods)


def test_scores_are_weighted_sums_and_weight_zero_counts_as_one():
    a = scorer("A", {"n1": 10, "n2": 50})
    b = scorer("B", {"n1": 40, "n2": 0})
    fw = framework(prof(score=(("A", 0), ("B", 2))), a, b)
    scores, status = fw.run_score_plugins(CycleState(), P, [info("n1"), info("n2")])
    assert status.is_success()
    assert scores == {"A": {"n1": 10, "n2": 50}, "B": {"n1": 80, "n2": 0}}
    assert fw.schedule(CycleState(), P, [info("n1"), info("n2")]).node == "n1"  # 90 > 50


def test_score_out_of_range_is_an_error_even_without_normalize():
    fw = framework(prof(score=(("A", 1),)), scorer("A", {"n1": 101, "n2": 0}))
    _, status = fw.run_score_plugins(CycleState(), P, [info("n1"), info("n2")])
    assert status.code is Code.ERROR
    assert "invalid score 101" in status.message


def test_normalize_score_runs_before_the_range_check():
    def halve(self, state, p, scores):
        for k in scores:
            scores[k] //= 2

    fw = framework(prof(score=(("A", 1),)), scorer("A", {"n1": 200, "n2": 100}, halve))
    scores, status = fw.run_score_plugins(CycleState(), P, [info("n1"), info("n2")])
    assert status.is_success()
    assert scores == {"A": {"n1": 100, "n2": 50}}


def test_a_prescore_skip_leaves_the_score_out_and_a_prescore_error_is_an_error():
    skipping = make("Skipping", ifc.ScorePlugin, pre_score=rec("prescore", Status(Code.SKIP)), score=rec("score", (0, None)))
    fw = framework(prof(score=(("Skipping", 1), ("A", 1))), skipping, scorer("A", {"n1": 10, "n2": 50}))
    scores, status = fw.run_score_plugins(CycleState(), P, [info("n1"), info("n2")])
    assert status.is_success()
    assert scores == {"A": {"n1": 10, "n2": 50}}
    assert CALLS == ["Skipping.prescore"]  # its Score never ran
    failing = make("Failing", ifc.ScorePlugin, pre_score=rec("prescore", Status(Code.ERROR, "boom")), score=rec("score", (0, None)))
    _, status = framework(prof(score=(("Failing", 1),)), failing).run_score_plugins(CycleState(), P, [info("n1")])
    assert status.code is Code.ERROR
    assert "boom" in status.message


def test_a_failing_score_of_one_node_fails_the_batch():
    def score(self, state, p, node):
        return (0, Status(Code.ERROR, f"no score for {node.name}")) if node.name == "n2" else (1, None)

    fw = framework(prof(score=(("A", 1),)), make("A", ifc.ScorePlugin, score=score))
    _, status = fw.run_score_plugins(CycleState(), P, [info("n1"), info("n2")])
    assert status.code is Code.ERROR
    assert "no score for n2" in status.message


def test_ties_are_broken_by_a_seeded_draw_not_by_order():
    fw = framework(prof(score=(("A", 1),)), scorer("A", dict.fromkeys([f"n{i}" for i in range(8)], 7)))
    nodes = [info(f"n{i}") for i in range(8)]
    winners = {fw.schedule(CycleState(), pod(f"p{j}"), nodes).node for j in range(40)}
    assert len(winners) > 1  # different pods spread over tied nodes
    again = framework(prof(score=(("A", 1),)), scorer("A", dict.fromkeys([f"n{i}" for i in range(8)], 7)))
    for j in range(10):
        p = pod(f"p{j}")
        assert fw.schedule(CycleState(), p, nodes).node == again.schedule(CycleState(), p, list(reversed(nodes))).node


# -- reserve / permit / bind ------------------------------------------------------------------


def test_reserve_failure_is_error_and_does_not_unreserve():
    bad = make("R", ifc.ReservePlugin, ifc.UnreservePlugin, reserve=rec("reserve", Status(Code.UNSCHEDULABLE, "x")), unreserve=rec("unreserve"))
    fw = framework(prof(reserve=("R",), unreserve=("R",)), bad)
    status = fw.run_reserve_and_permit(CycleState(), P, "n1")
    assert status.code is Code.ERROR
    assert CALLS == ["R.reserve"]


def test_permit_rejection_unreserves():
    r = make("R", ifc.ReservePlugin, ifc.UnreservePlugin, reserve=rec("reserve"), unreserve=rec("unreserve"))
    no = make("No", ifc.PermitPlugin, permit=rec("permit", (Status(Code.UNSCHEDULABLE, "gate"), 0)))
    fw = framework(prof(reserve=("R",), unreserve=("R",), permit=("No",)), r, no)
    status = fw.run_reserve_and_permit(CycleState(), P, "n1")
    assert status.code is Code.UNSCHEDULABLE
    assert status.message == 'rejected by "No" at permit: gate'
    assert CALLS == ["R.reserve", "No.permit", "R.unreserve"]


def test_permit_error_is_error_and_unreserves():
    r = make("R", ifc.ReservePlugin, ifc.UnreservePlugin, reserve=rec("reserve"), unreserve=rec("unreserve"))
    odd = make("Odd", ifc.PermitPlugin, permit=rec("permit", (Status(Code.SKIP), 0)))
    fw = framework(prof(reserve=("R",), unreserve=("R",), permit=("Odd",)), r, odd)
    assert fw.run_reserve_and_permit(CycleState(), P, "n1").code is Code.ERROR
    assert CALLS[-1] == "R.unreserve"


def waiters(*timeouts):
    return [make(f"W{i}", ifc.PermitPlugin, permit=rec("permit", (Status(Code.WAIT, "hold"), t))) for i, t in enumerate(timeouts)]


def test_permit_wait_until_every_plugin_allows():
    w0, w1 = waiters(30, 60)
    fw = framework(prof(permit=("W0", "W1")), w0, w1)
    fw.handle.now = 100.0
    assert fw.run_permit_plugins(CycleState(), P, "n1").code is Code.WAIT
    waiting = fw.handle.get_waiting_pod(P.uid)
    assert waiting.deadlines == {"W0": 130.0, "W1": 160.0}
    waiting.allow("W0")
    assert fw.take_resolved() == []
    waiting.allow("W1")
    [(done, outcome)] = fw.take_resolved()
    assert done.pod == P
    assert outcome.is_success()
    assert fw.handle.get_waiting_pod(P.uid) is None


def test_permit_wait_times_out_at_the_capped_deadline_and_unreserves():
    r = make("R", ifc.ReservePlugin, ifc.UnreservePlugin, reserve=rec("reserve"), unreserve=rec("unreserve"))
    (w0,) = waiters(3600)
    fw = framework(prof(reserve=("R",), unreserve=("R",), permit=("W0",)), r, w0)
    fw.handle.now = 0.0
    assert fw.run_reserve_and_permit(CycleState(), P, "n1").code is Code.WAIT
    fw.expire_waiting(MAX_PERMIT_WAIT - 1)
    assert fw.take_resolved() == []
    fw.expire_waiting(MAX_PERMIT_WAIT)
    [(_, outcome)] = fw.take_resolved()
    assert outcome.code is Code.UNSCHEDULABLE
    assert "rejected due to timeout after waiting 900s at plugin W0" in outcome.message
    assert outcome.message.startswith('pod "default/p" rejected while waiting at permit')
    assert CALLS[-1] == "R.unreserve"


def test_waiting_pod_rejected_by_another_plugin():
    (w0,) = waiters(60)
    fw = framework(prof(permit=("W0",)), w0)
    fw.run_permit_plugins(CycleState(), P, "n1")
    for waiting in fw.handle.iterate_over_waiting_pods():
        assert waiting.reject("preempted")
        assert not waiting.allow("W0")  # already decided
    [(_, outcome)] = fw.take_resolved()
    assert outcome.code is Code.UNSCHEDULABLE
    assert "preempted" in outcome.message


def test_bind_skip_passes_to_the_next_and_postbind_follows():
    skip = make("Skip", ifc.BindPlugin, bind=rec("bind", Status(Code.SKIP)))
    do = make("Do", ifc.BindPlugin, bind=rec("bind"))
    after = make("After", ifc.PostBindPlugin, post_bind=rec("post"))
    pre = make("Pre", ifc.PreBindPlugin, pre_bind=rec("pre"))
    fw = framework(prof(pre_bind=("Pre",), bind=("Skip", "Do"), post_bind=("After",)), skip, do, after, pre)
    assert fw.run_binding_cycle(CycleState(), P, "n1").is_success()
    assert CALLS == ["Pre.pre", "Skip.bind", "Do.bind", "After.post"]


def test_all_bind_plugins_skipping_is_skip():
    skip = make("Skip", ifc.BindPlugin, bind=rec("bind", Status(Code.SKIP)))
    fw = framework(prof(bind=("Skip",)), skip)
    assert fw.run_bind_plugins(CycleState(), P, "n1").code is Code.SKIP
    assert framework(prof()).run_bind_plugins(CycleState(), P, "n1").code is Code.SKIP


@pytest.mark.parametrize("failing", ["pre_bind", "bind"])
def test_binding_failure_unreserves(failing):
    r = make("R", ifc.ReservePlugin, ifc.UnreservePlugin, reserve=rec("reserve"), unreserve=rec("unreserve"))
    pre = make("Pre", ifc.PreBindPlugin, pre_bind=rec("pre", Status(Code.ERROR, "x") if failing == "pre_bind" else None))
    bind = make("B", ifc.BindPlugin, bind=rec("bind", Status(Code.UNSCHEDULABLE, "x") if failing == "bind" else None))
    after = make("After", ifc.PostBindPlugin, post_bind=rec("post"))
    fw = framework(prof(reserve=("R",), unreserve=("R",), pre_bind=("Pre",), bind=("B",), post_bind=("After",)), r, pre, bind, after)
    status = fw.run_binding_cycle(CycleState(), P, "n1")
    assert status.code is Code.ERROR
    assert CALLS[-1] == "R.unreserve"
    assert "After.post" not in CALLS


# -- built-in plugins -------------------------------------------------------------------------


def test_priority_sort_order():
    """Priority, then age: how constrained a pod is does not move it (kube's PrioritySort)."""
    fw = Framework()
    pods = [
        pod("old-low", created=1),
        pod("new-high", priority=10, created=5),
        pod("specific", created=0.5, itype="a.large"),
        pod("old-high", priority=10, created=2),
        pod("young-specific", created=9, itype="a.large", zone="zone-1a"),
    ]
    assert [p.name for p in fw.sort_pods(pods)] == ["old-high", "new-high", "specific", "old-low", "young-specific"]


def test_a_queue_sort_plugin_without_a_key_sorts_by_its_less():
    by_name = make("ByName", ifc.QueueSortPlugin, less=lambda self, a, b: a.name < b.name)
    fw = framework(prof(queue_sort=("ByName",)), by_name)
    assert [p.name for p in fw.sort_pods([pod("c"), pod("a", priority=10), pod("b")])] == ["a", "b", "c"]


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.sampled_from(["", "a.large", "a.*"])), max_size=12))
def test_priority_sort_key_orders_as_its_less(specs):
    pods = [pod(f"p{i}", priority=prio, created=float(created), itype=itype) for i, (prio, created, itype) in enumerate(specs)]
    plugin = Framework()._queue_sort
    by_key = sorted(pods, key=plugin.sort_key)
    assert all(not plugin.less(b, a) for a, b in itertools.pairwise(by_key))


def score_of(plugin: str, p, node) -> int:
    fw = Framework(prof(score=((plugin, 1),)))
    return fw.plugins[plugin].score(CycleState(), p, node)[0]


def test_allocation_scores_integer_formulas():
    node = info("n", cpu=4000, memory=10 * 2**30)
    node.add_pod(pod("a", cpu="1", memory="2Gi"))
    p = pod("p", cpu="1", memory="3Gi")
    # requested cpu 2000/4000, memory 5Gi/10Gi
    assert score_of("LeastAllocated", p, node) == (50 + 50) // 2
    assert score_of("MostAllocated", p, node) == (50 + 50) // 2
    assert score_of("BalancedAllocation", p, node) == 100
    skewed = pod("q", cpu="2", memory="1Gi")  # cpu 3000/4000 = 75%, memory 3Gi/10Gi = 30%
    assert score_of("LeastAllocated", skewed, node) == (25 + 70) // 2
    assert score_of("MostAllocated", skewed, node) == (75 + 30) // 2
    assert score_of("BalancedAllocation", skewed, node) == int((1 - abs(0.75 - 0.3) / 2) * 100)  # kube's std of two fractions


def test_scores_use_nonzero_defaults_and_zero_when_over():
    node = info("n", cpu=1000, memory=1000 * 2**20)
    assert score_of("MostAllocated", pod("p", cpu="0", memory="0"), node) == (10 + 20) // 2  # 100m and 200Mi
    assert score_of("LeastAllocated", pod("p", cpu="2", memory="0"), node) == (0 + 80) // 2
    # BalancedAllocation reads the actual requests (memory 0) and caps cpu's fraction at 1
    assert score_of("BalancedAllocation", pod("p", cpu="2", memory="0"), node) == int((1 - (1 - 0) / 2) * 100)


def test_taint_toleration_score_is_reverse_normalized():
    fw = Framework(prof(score=(("TaintToleration", 1),)))
    soft = Taint("soft", TaintEffect.PREFER_NO_SCHEDULE)
    nodes = [info("clean"), info("one", taints=(soft,)), info("two", taints=(soft, Taint("s2", TaintEffect.PREFER_NO_SCHEDULE)))]
    scores, _ = fw.run_score_plugins(CycleState(), P, nodes)
    assert scores["TaintToleration"] == {"clean": 100, "one": 50, "two": 0}


def _prefers(*weighted: tuple[int, dict[str, str]]) -> Pod:
    terms = tuple((w, SelectorTerm(tuple(Requirement(k, Operator.IN, (v,)) for k, v in labels.items()))) for w, labels in weighted)
    return dataclasses.replace(P, preferred_affinity=terms)


_LABEL1, _LABEL2, _LABEL3 = {"foo": "bar"}, {"key": "value"}, {"az": "az1"}
_LABEL4, _LABEL5 = {"abc": "az11", "def": "az22"}, {"foo": "bar", "key": "value", "az": "az1"}
_AFFINITY1 = _prefers((2, {"foo": "bar"}))
_AFFINITY2 = _prefers((2, {"foo": "bar"}), (4, {"key": "value"}), (5, {"foo": "bar", "key": "value", "az": "az1"}))


@pytest.mark.parametrize(
    ("pod_", "nodes", "expected"),
    [
        pytest.param(_AFFINITY1, {"node1": _LABEL4, "node2": _LABEL2, "node3": _LABEL3}, {"node1": 0, "node2": 0, "node3": 0}, id="no-node-matches"),
        pytest.param(_AFFINITY1, {"node1": _LABEL1, "node2": _LABEL2, "node3": _LABEL3}, {"node1": 100, "node2": 0, "node3": 0}, id="only-node1-matches"),
        pytest.param(_AFFINITY2, {"node1": _LABEL1, "node5": _LABEL5, "node2": _LABEL2}, {"node1": 18, "node5": 100, "node2": 36}, id="different-priorities"),
    ],
)
def test_preferred_node_affinity_scores_as_kubes_node_affinity_priority(pod_: Pod, nodes: dict[str, dict[str, str]], expected: dict[str, int]) -> None:
    """kube's TestNodeAffinityPriority (plugins/nodeaffinity): a node scores the weights of
    the preferred terms it matches, normalized to the highest (2, 11 and 4 give 18, 100, 36)."""
    fw = Framework(prof(score=(("NodeAffinity", 2),)))
    infos = [
        NodeInfo(name, "pool", "m.large", CapacityType.ON_DEMAND, "z", Resources({"cpu": 4000, "memory": 2**33, "pods": 10}), labels)
        for name, labels in nodes.items()
    ]
    scores, status = fw.run_score_plugins(CycleState(), pod_, infos)
    assert status.is_success()
    assert scores["NodeAffinity"] == {name: 2 * value for name, value in expected.items()}


def test_a_pod_without_preferred_node_affinity_is_not_scored_by_it() -> None:
    """kube's PreScore returns Skip when the pod has no preferred node affinity."""
    fw = Framework(prof(score=(("NodeAffinity", 2),)))
    scores, status = fw.run_score_plugins(CycleState(), P, [info("n1"), info("n2")])
    assert status.is_success()
    assert "NodeAffinity" not in scores


def test_node_resources_fit_messages():
    fw = Framework()
    node = info("n", cpu=1000, memory=2**30)
    state = CycleState()
    big = pod("big", cpu="2", memory="2Gi")
    fw.run_pre_filter_plugins(state, big)
    status = fw.run_filter_plugins(state, big, node)
    assert status.code is Code.UNSCHEDULABLE
    assert status.message == "Insufficient cpu, Insufficient memory"
    full = info("f", cpu=1000)
    full.set_allocatable(Resources({"cpu": 1000, "memory": 2**30, "pods": 0}))
    assert fw.run_filter_plugins(state, pod("x"), full).message == "Too many pods"


def test_pod_group_allows_the_waiting_members_when_quorum_is_reached():
    fw = Framework()
    gang = [pod(f"g{i}", group="g", min_member=3) for i in range(3)]
    statuses = [fw.run_reserve_and_permit(CycleState(), p, "n1").code for p in gang]
    assert statuses == [Code.WAIT, Code.WAIT, Code.SUCCESS]
    resolved = fw.take_resolved()
    assert sorted(w.pod.name for w, s in resolved if s.is_success()) == ["g0", "g1"]


def test_a_fresh_framework_keeps_the_profile_and_nothing_of_a_run():
    """A scaler runs a fresh copy of its framework per decision: the same plugins and
    arguments, new instances and handle (a plugin that keeps nothing is shared), no member of
    a gang still counted or waiting."""
    fw = Framework(Profile(plugin_args={"PodGroup": {"scheduleTimeout": "60s"}}), seed=7)
    fw.handle.now = 5.0
    assert fw.run_reserve_and_permit(CycleState(), pod("g0", group="g", min_member=2), "n1").code is Code.WAIT
    fresh = fw.fresh()
    assert (fresh.profile, fresh.seed, list(fresh.plugins)) == (fw.profile, 7, list(fw.plugins))
    shared = {n for n, p in fw.plugins.items() if fresh.plugins[n] is p}
    assert shared == {n for n, p in fw.plugins.items() if p.keeps_nothing} >= {"NodeResourcesFit", "TaintToleration", "MostAllocated"}
    assert all(fresh.plugins[n].handle is fresh.handle for n in fw.plugins if n not in shared)
    assert fresh.plugins["PodGroup"].timeout == 60.0
    assert (fresh.handle.now, list(fresh.handle.iterate_over_waiting_pods())) == (0.0, [])
    assert fresh.run_reserve_and_permit(CycleState(), pod("g1", group="g", min_member=2), "n1").code is Code.WAIT  # g0 is not counted
    assert fw.run_reserve_and_permit(CycleState(), pod("g1", group="g", min_member=2), "n1").code is Code.SUCCESS  # the first still counts it


def test_pod_group_times_out_without_quorum():
    fw = Framework(Profile(plugin_args={"PodGroup": {"scheduleTimeout": "60s"}}))
    fw.handle.now = 0
    assert fw.run_reserve_and_permit(CycleState(), pod("g0", group="g", min_member=2), "n1").code is Code.WAIT
    fw.expire_waiting(60.0)
    [(_, outcome)] = fw.take_resolved()
    assert "timeout after waiting 60s at plugin PodGroup" in outcome.message
    # its reservation was given back: a new member alone does not reach the quorum
    assert fw.run_reserve_and_permit(CycleState(), pod("g1", group="g", min_member=2), "n1").code is Code.WAIT


def test_a_plugin_said_to_keep_nothing_never_reads_the_handle_nor_sets_its_own_state():
    """Plugins declared ``keeps_nothing`` are shared by every framework of a profile: their
    module never reads a handle, and they set no attribute of their own outside __init__
    (read from their source, so a later change that breaks the promise fails here)."""
    import ast
    import inspect
    import sys

    declared = {type(p) for p in Framework().plugins.values() if p.keeps_nothing}
    assert len(declared) >= 10
    for cls in declared:
        module = ast.parse(inspect.getsource(sys.modules[cls.__module__]))
        assert not [n for n in ast.walk(module) if isinstance(n, ast.Attribute) and n.attr == "handle"], cls
        for klass in inspect.getmro(cls):
            if klass.__module__.startswith("nodemanager.scheduling.plugins"):
                tree = ast.parse(inspect.getsource(klass))
                for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name != "__init__"):
                    assigned = [
                        n.targets if isinstance(n, ast.Assign) else [n.target]
                        for n in ast.walk(fn)
                        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                    ]
                    for target in (t for targets in assigned for t in targets):
                        inner = target
                        while isinstance(inner, (ast.Attribute, ast.Subscript)):
                            assert not (isinstance(inner.value, ast.Name) and inner.value.id == "self"), (cls, fn.name)
                            inner = inner.value
