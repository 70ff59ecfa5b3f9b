"""The side-by-side benchmark's independent plan check: a sound plan passes, and a planted
violation of each kind is caught; the nodemanager side of a small case passes it above the
bound. (The Karpenter driver's own round trip runs in tests/e2e, where it is built.)"""

from __future__ import annotations

import copy

import pytest
from bench_modules import load_benchmark

check_mod = load_benchmark("plan_check")
side = load_benchmark("side_by_side")

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def pod(name: str, cpu: str = "500m", memory: str = "1Gi", labels: dict | None = None, **spec: object) -> dict:
    container = {"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels or {}}, "spec": {"containers": [container], **spec}}


def problem(pods: list[dict], **extra: object) -> dict:
    offerings = [{"zone": z, "capacityType": "on-demand", "price": 0.1, "available": True} for z in ("a", "b")]
    small = {"name": "small", "architecture": "amd64", "cpuMillis": 2000, "memoryBytes": 4 << 30, "pods": 4, "offerings": offerings}
    big = {**small, "name": "big", "cpuMillis": 8000, "memoryBytes": 16 << 30, "pods": 20, "offerings": [{**o, "price": 0.4} for o in offerings]}
    return {"instanceTypes": [small, big], "pods": pods, "daemonSetPods": [], "labels": {}, "taints": [], **extra}


def plan(nodes: dict[str, tuple[str, str]], bindings: dict[str, str], unplaced: tuple[str, ...] = ()) -> dict:
    return {
        "nodes": [{"name": n, "instanceType": t, "zone": z, "capacityType": "on-demand"} for n, (t, z) in nodes.items()],
        "bindings": {f"ns/{p}": n for p, n in bindings.items()},
        "unplaced": {f"ns/{p}": "no room" for p in unplaced},
    }


def faults(prob: dict, the_plan: dict) -> dict[str, list[str]]:
    return {k: v for k, v in check_mod.check(prob, the_plan).violations.items() if v}


@pytest.mark.parametrize(
    ("value", "milli", "expected"),
    [
        ("100m", True, 100),
        ("1.5", True, 1500),
        ("2", True, 2000),
        ("512Mi", False, 512 << 20),
        ("1G", False, 10**9),
        (1073741824, False, 1 << 30),
        ("0.5Gi", False, 1 << 29),
    ],
)
def test_quantities_read_as_kube_writes_them(value: object, milli: bool, expected: int) -> None:
    assert check_mod.quantity(value, milli=milli) == expected


def test_a_sound_plan_passes_and_is_priced_from_the_problem() -> None:
    prob = problem([pod("p0"), pod("p1"), pod("p2", nodeSelector={ZONE: "b"})])
    report = check_mod.check(prob, plan({"n1": ("small", "a"), "n2": ("big", "b")}, {"p0": "n1", "p1": "n1", "p2": "n2"}))
    assert report.total_violations == 0
    assert (report.placed, report.unplaced, report.unaccounted, report.nodes) == (3, 0, 0, 2)
    assert report.cost_per_hour == pytest.approx(0.5)


def test_a_pod_neither_placed_nor_reported_and_a_pod_on_an_unknown_node_are_unaccounted() -> None:
    prob = problem([pod("p0"), pod("p1"), pod("p2")])
    report = check_mod.check(prob, plan({"n1": ("small", "a")}, {"p0": "n1", "p1": "ghost"}, unplaced=()))
    assert report.unaccounted == 2
    report = check_mod.check(prob, plan({"n1": ("small", "a")}, {"p0": "n1"}, unplaced=("p1", "p2")))
    assert (report.unaccounted, report.unplaced) == (0, 2)


def test_an_offering_that_does_not_exist_is_caught() -> None:
    prob = problem([pod("p0")])
    assert faults(prob, plan({"n1": ("small", "z")}, {"p0": "n1"}))["offering"] == ["n1"]
    prob["instanceTypes"][0]["offerings"][0]["available"] = False
    assert faults(prob, plan({"n1": ("small", "a")}, {"p0": "n1"}))["offering"] == ["n1"]


def test_a_node_over_its_cpu_memory_or_pod_count_is_caught_daemonset_pods_included() -> None:
    four = [pod(f"p{i}", cpu="400m", memory="512Mi") for i in range(4)]
    prob = problem(four)
    four_on_one = plan({"n1": ("small", "a")}, {f"p{i}": "n1" for i in range(4)})
    assert faults(prob, four_on_one) == {}
    prob["daemonSetPods"] = [pod("ds", cpu="10m", memory="1Mi", tolerations=[{"operator": "Exists"}])]
    assert faults(prob, four_on_one)["overfull"] == ["n1"]  # 5 pods on a 4-pod node
    prob = problem([pod("p0", cpu="1500m"), pod("p1", cpu="600m")])
    assert faults(prob, plan({"n1": ("small", "a")}, {"p0": "n1", "p1": "n1"}))["overfull"] == ["n1"]


def test_a_daemonset_pod_that_does_not_tolerate_the_pools_taint_does_not_count() -> None:
    prob = problem([pod(f"p{i}", cpu="100m", memory="1Mi", tolerations=[{"key": "gpu", "operator": "Exists"}]) for i in range(4)])
    prob["taints"] = [{"key": "gpu", "effect": "NoSchedule"}]
    prob["daemonSetPods"] = [pod("ds", cpu="10m", memory="1Mi")]
    assert faults(prob, plan({"n1": ("small", "a")}, {f"p{i}": "n1" for i in range(4)})) == {}


def test_selector_node_affinity_and_taint_violations_are_caught() -> None:
    required = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["big"]}]}]
            }
        }
    }
    prob = problem([pod("p0", nodeSelector={ZONE: "b"}), pod("p1", affinity=required)])
    found = faults(prob, plan({"n1": ("small", "a")}, {"p0": "n1", "p1": "n1"}))
    assert found == {"selector": ["ns/p0"], "node-affinity": ["ns/p1"]}
    tainted = problem(
        [pod("p0"), pod("p1", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}])],
        taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}],
    )
    assert faults(tainted, plan({"n1": ("small", "a")}, {"p0": "n1", "p1": "n1"})) == {"taint": ["ns/p0"]}


def _spread(name: str, labels: dict) -> dict:
    constraint = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}
    return pod(name, cpu="100m", memory="1Mi", labels=labels, topologySpreadConstraints=[constraint])


def test_spread_holds_when_some_admission_order_exists_and_is_caught_when_none_does() -> None:
    # Three web pods under the constraint and two that merely match it. Two constrained in a,
    # one in b (the merely matching anywhere) is reached by alternating; all three
    # constrained in a and only one pod in b by no order: the third comes when a has two and
    # b at most one.
    pods = [_spread(f"s{i}", {"app": "web"}) for i in range(3)] + [pod(f"g{i}", cpu="100m", memory="1Mi", labels={"app": "web"}) for i in range(2)]
    prob = problem(pods)
    nodes = {"na": ("big", "a"), "nb": ("big", "b")}
    assert faults(prob, plan(nodes, {"s0": "na", "s1": "na", "s2": "nb", "g0": "na", "g1": "nb"})) == {}
    assert faults(prob, plan(nodes, {"s0": "na", "s1": "na", "s2": "nb", "g0": "na", "g1": "na"})) == {}
    assert len(faults(prob, plan(nodes, {"s0": "na", "s1": "na", "s2": "na", "g0": "nb", "g1": "na"}))["spread"]) == 1
    # unconstrained matching pods piled in one zone after the constrained ones came: no fault
    piled = problem([_spread("s0", {"app": "web"})] + [pod(f"g{i}", cpu="100m", memory="1Mi", labels={"app": "web"}) for i in range(5)])
    assert faults(piled, plan(nodes, {"s0": "na", **{f"g{i}": "na" for i in range(5)}})) == {}


def test_a_spread_pod_not_matching_its_own_selector_may_always_have_come_first() -> None:
    prob = problem([_spread("s0", {"app": "other"})] + [pod(f"g{i}", cpu="100m", memory="1Mi", labels={"app": "web"}) for i in range(3)])
    assert faults(prob, plan({"na": ("big", "a"), "nb": ("big", "b")}, {"s0": "na", "g0": "na", "g1": "na", "g2": "na"})) == {}


def _affine(name: str) -> dict:
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}
    return pod(name, cpu="100m", memory="1Mi", labels={"app": "db"}, affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})


def test_pod_affinity_allows_one_first_domain_and_catches_a_second() -> None:
    prob = problem([_affine(f"d{i}") for i in range(3)])
    nodes = {"na": ("big", "a"), "nb": ("big", "b")}
    assert faults(prob, plan(nodes, {"d0": "na", "d1": "na", "d2": "na"})) == {}
    assert faults(prob, plan(nodes, {"d0": "na", "d1": "na", "d2": "nb"})) == {"pod-affinity": ["ns/d2"]}
    # a plain db pod in zone b lets a member in there too
    prob = problem([_affine(f"d{i}") for i in range(3)] + [pod("db", cpu="100m", memory="1Mi", labels={"app": "db"})])
    assert faults(prob, plan(nodes, {"d0": "na", "d1": "na", "d2": "nb", "db": "nb"})) == {}


def test_pod_anti_affinity_is_caught_in_both_directions() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "nginx"}}, "topologyKey": HOST}
    anti = pod("a0", cpu="100m", memory="1Mi", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
    plain = pod("n0", cpu="100m", memory="1Mi", labels={"app": "nginx"})
    prob = problem([anti, plain])
    nodes = {"n1": ("big", "a"), "n2": ("big", "a")}
    assert faults(prob, plan(nodes, {"a0": "n1", "n0": "n2"})) == {}
    assert faults(prob, plan(nodes, {"a0": "n1", "n0": "n1"})) == {"pod-anti-affinity": ["ns/a0"]}


def test_the_bound_counts_cpu_memory_pods_and_self_repelling_pods() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "nginx"}}, "topologyKey": HOST}
    repel = [
        pod(f"r{i}", cpu="10m", memory="1Mi", labels={"app": "nginx"}, affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
        for i in range(5)
    ]
    assert side.lower_bound(problem(repel)) == pytest.approx(0.5)  # five nodes, however small the pods
    assert side.lower_bound(problem([pod(f"p{i}", cpu="10m", memory="1Mi") for i in range(8)])) == pytest.approx(0.16)  # pod count: 8 of the big type's 20
    heavy = problem([pod(f"p{i}", cpu="2000m", memory="1Mi") for i in range(4)])
    assert side.lower_bound(heavy) == pytest.approx(0.4)  # 8 CPUs: four small or one big


def test_nodemanagers_plan_for_a_small_case_passes_the_check_above_the_bound() -> None:
    case = side.Case("karpenter-mix", 300, "11", daemonsets=True)
    prob = side.problem(case)
    the_plan = side.solve_nodemanager(copy.deepcopy(prob))
    report = check_mod.check(prob, the_plan)
    assert (report.total_violations, report.unaccounted, report.unplaced) == (0, 0, 0)
    assert report.cost_per_hour >= side.lower_bound(prob) > 0


def test_the_karpenter_plan_reading_puts_each_claim_on_a_node_and_reports_what_it_could_not_launch() -> None:
    out = {
        "solveSeconds": 0.5,
        "setupSeconds": 0.1,
        "nodeClaims": [
            {"launch": {"instanceType": "small", "zone": "a", "capacityType": "on-demand", "price": 0.1}, "pods": ["ns/p0", "ns/p1"]},
            {"launch": None, "pods": ["ns/p2"]},
        ],
        "existingNodes": {"old": ["ns/p4"]},
        "podErrors": {"ns/p3": "incompatible"},
    }
    the_plan = side.karpenter_plan(out)
    assert the_plan["bindings"] == {"ns/p4": "old", "ns/p0": "claim-0", "ns/p1": "claim-0"}
    assert set(the_plan["unplaced"]) == {"ns/p2", "ns/p3"}
    prob = problem(
        [pod(f"p{i}", cpu="100m", memory="1Mi") for i in range(5)],
        existingNodes=[{"name": "old", "instanceType": "small", "zone": "b", "capacityType": "on-demand"}],
    )
    report = check_mod.check(prob, the_plan)
    assert (report.placed, report.unplaced, report.unaccounted, report.total_violations) == (3, 2, 0, 0)


def test_pods_already_running_on_an_existing_node_count_against_its_room() -> None:
    running = {**pod("r0", cpu="1800m"), "status": {"phase": "Running"}}
    running["spec"]["nodeName"] = "old"
    prob = problem(
        [pod("p0", cpu="500m")], existingNodes=[{"name": "old", "instanceType": "small", "zone": "a", "capacityType": "on-demand"}], runningPods=[running]
    )
    report = check_mod.check(prob, plan({}, {"p0": "old"}))
    assert report.violations["overfull"] == ["old"]
    assert (report.placed, report.cost_per_hour) == (1, 0)  # the existing node costs the plan nothing
    assert faults(prob, plan({"n1": ("small", "a")}, {"p0": "n1"})) == {}


def test_the_bound_takes_the_room_left_on_existing_nodes_as_free(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(side, "BUSY_NODES", 12)
    case = side.Case("karpenter-mix", 300, "101", busy=True)
    prob = side.problem(case)
    assert len(prob["existingNodes"]) == 12
    assert len(prob["runningPods"]) > 12 * 10
    empty = side.lower_bound({**prob, "existingNodes": [], "runningPods": []})
    assert 0 < side.lower_bound(prob) < empty
    the_plan = side.solve_nodemanager(copy.deepcopy(prob))
    report = check_mod.check(prob, the_plan)
    assert (report.total_violations, report.unaccounted, report.unplaced) == (0, 0, 0)
    assert any(node.startswith("existing-") for node in the_plan["bindings"].values())
    assert report.cost_per_hour >= side.lower_bound(prob)


def test_the_quick_cases_are_cases() -> None:
    assert set(side.QUICK) <= {c.name for c in side.CASES}


def test_a_dedicated_pools_bound_counts_only_what_its_nodes_can_run() -> None:
    """The tainted case: pods that do not tolerate the pool's taint and the DaemonSet that
    does not are left out of the bound; nodemanager leaves exactly those pods unplaced."""
    prob = side.problem(side.Case("mixed", 200, "11", daemonsets=True, tainted=True))
    assert prob["taints"] == [side.TAINT]
    assert prob["labels"] == side.LABELS
    assert sum(1 for p in prob["pods"] if p["spec"].get("nodeSelector") == side.LABELS) == 50
    untolerating = {f"bench/{p['metadata']['name']}" for p in prob["pods"] if not p["spec"].get("tolerations")}
    assert len(untolerating) == 20
    tolerating = [p for p in prob["pods"] if p["spec"].get("tolerations")]
    running = [d for d in prob["daemonSetPods"] if d["metadata"]["name"] != "node-exporter"]
    assert side.lower_bound(prob) == side.lower_bound({**prob, "taints": [], "pods": tolerating, "daemonSetPods": running})
    the_plan = side.solve_nodemanager(copy.deepcopy(prob))
    assert set(the_plan["unplaced"]) == untolerating
    report = check_mod.check(prob, the_plan)
    assert (report.placed, report.total_violations, report.unaccounted) == (180, 0, 0)
