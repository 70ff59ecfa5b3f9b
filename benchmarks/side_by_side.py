"""nodemanager's scaler and Karpenter's scheduler side by side, on identical inputs, in one run.

    python benchmarks/side_by_side.py [--runs 3] [--cases all|quick|NAME...] [--json FILE]

Each case is one problem, written once as JSON: pods (Kubernetes manifests), the instance
types a pool may use (from nodemanager's bundled us-east-1 catalog: each type's allocatable,
max pods and on-demand offering in every zone it is sold in) and the DaemonSet pods every node
runs. Every run reads it in a fresh process, the two schedulers interleaved:

* nodemanager: ``BindingNodeScaler.compute`` on the pods with no nodes, timed whole;
* Karpenter: its provisioning scheduler through ``benchmarks/peers/karpenter`` (Karpenter
  v1.14.0, built by ``make controlplane``), driven as its own scheduling benchmark drives it,
  ``Solve`` timed as that benchmark times it (building its topology is reported apart).
  Each NodeClaim is launched at the cheapest available offering of its instance type options
  that meets its requirements, as EC2 Fleet's lowest-price strategy picks for on-demand.

Both see the same allocatable: Karpenter's AWS provider models a node's overhead as
nodemanager does (kube-reserved CPU tiers, 11 MiB per pod + 255 MiB, a 100 MiB eviction
threshold, 7.5% of memory for the VM), and the driver's fake provider is given each type's
allocatable as its capacity with no overhead of its own.

Every plan goes through ``plan_check`` (neither scheduler's code): every pod placed or reported,
no node over allocatable or max pods, every offering real, every selector, node affinity,
taint, topology spread and pod (anti-)affinity held. The bound is the cheapest fractional mix of
the allowed types that covers the pods' CPU, memory and count with every node's DaemonSet pods
paid first, and at least one node per pod of the largest group that repels itself by hostname;
the room left on nodes already running is free and comes off first.

Cases: ``mixed`` (the scaler benchmark's web/app/memory/CPU shapes) and ``karpenter-mix``
(Karpenter's own benchmark pods: generic, zonal and hostname spread, zonal affinity, hostname
anti-affinity) at 1k, 5k and 20k pods with 11 types, 101 types (ten m/c/r families) and every
x86 type that is not burstable (919); the 5k/101 cases with EKS's usual DaemonSets; and
``karpenter-mix-5k-101-busy``, whose pods come to 300 running m6i.2xlarge nodes two thirds full;
and ``mixed-5k-101-ds-tainted``, a dedicated pool: its nodes carry the taint
``dedicated=bench:NoSchedule`` and the label ``team=bench``, nine pods in ten tolerate the taint
(a quarter of all select the label), the tenth cannot go anywhere (both must say so), and a
fifth DaemonSet that does not tolerate the taint runs on none of the pool's nodes (neither may
count it). The problem's ``labels`` and ``taints`` are the pool's: both schedulers put them on
every new node, and the check reads them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))  # controlplane: the cache of built binaries

import karpenter_mix
import plan_check
from controlplane import binaries
from scaler import EKS_DAEMONSETS, FAMILIES10, MI, SMALL11, cheapest_cover, daemon_pod, daemon_set_of, mixed_pods

from cloud.catalog import Catalog
from nodemanager.config.blocks import MAX_BOOTS
from nodemanager.config.schema import NodeDefaults, Pool
from nodemanager.model import CapacityType, Node, NodeName, NodeState, Pod
from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, ScalerSettings

HOSTNAME, ZONE, INSTANCE_TYPE = "kubernetes.io/hostname", "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type"
TYPES = {"11": (list(SMALL11), []), "101": ([f"{f}.*" for f in FAMILIES10], []), "all": (["*"], ["t*"])}


@dataclasses.dataclass(frozen=True)
class Case:
    workload: str  # mixed or karpenter-mix
    pods: int
    types: str  # a key of TYPES
    daemonsets: bool = False
    busy: bool = False  # the pods come to a cluster already running BUSY_NODES nodes, two thirds full
    tainted: bool = False  # the pool is dedicated: TAINT and LABELS on its nodes (see ``dedicated``)

    @property
    def name(self) -> str:
        flags = ("-ds" if self.daemonsets else "") + ("-busy" if self.busy else "") + ("-tainted" if self.tainted else "")
        return f"{self.workload}-{self.pods // 1000}k-{self.types}{flags}"


CASES = [Case(w, n, t) for w in ("mixed", "karpenter-mix") for n in (1000, 5000, 20_000) for t in TYPES] + [
    Case("mixed", 5000, "101", daemonsets=True),
    Case("karpenter-mix", 5000, "101", daemonsets=True),
    Case("karpenter-mix", 5000, "101", busy=True),
    Case("mixed", 5000, "101", daemonsets=True, tainted=True),
]
QUICK = ("mixed-1k-11", "karpenter-mix-1k-101", "mixed-5k-101-ds")
BUSY_NODES, BUSY_TYPE, BUSY_CPU = 300, "m6i.2xlarge", 5000  # nodes already running, their type, the milli-CPU their pods ask on each
RUNNING = [(200, 512), (300, 1024), (100, 256)]  # the running pods' shapes (milli-CPU, MiB), in turn
TAINT, LABELS = {"key": "dedicated", "value": "bench", "effect": "NoSchedule"}, {"team": "bench"}  # a dedicated pool's
UNTOLERATING_DAEMONSET = ("monitoring", "node-exporter", 100, 180 * MI, False)  # runs only where nothing is tainted


def problem(case: Case, seed: int = 42) -> dict:
    """The case as the JSON both schedulers read (the driver ignores ``pool``, which says how
    nodemanager's pool selects the same types)."""
    catalog = Catalog.bundled()
    patterns, exclude = TYPES[case.types]
    names = sorted(catalog.matching(patterns, ["x86_64"], exclude))  # Kubernetes calls x86_64 amd64
    types = []
    for name in names:
        t = catalog[name]
        offerings = [
            {"zone": o.zone, "capacityType": "on-demand", "price": o.price, "available": True} for o in t.offerings if o.capacity_type is CapacityType.ON_DEMAND
        ]
        a = t.allocatable
        types.append({"name": name, "architecture": "amd64", "cpuMillis": a.cpu, "memoryBytes": a.memory, "pods": a.get("pods"), "offerings": offerings})
    rng = random.Random(seed)
    if case.workload == "karpenter-mix":
        pods = [s.manifest for s in karpenter_mix.diverse_pods(case.pods, rng)]
    else:
        pods = [karpenter_mix.manifest(f"p{i}", {}, c, m // MI, {}) for i, (c, m) in enumerate(mixed_pods(case.pods, rng))]
    existing, running = busy_cluster(catalog) if case.busy else ([], [])
    daemons = [*EKS_DAEMONSETS, *([UNTOLERATING_DAEMONSET] if case.tainted else [])] if case.daemonsets else []
    if case.tainted:
        dedicated(pods)
    return {
        "case": case.name,
        "nodePool": "bench",
        "existingNodes": existing,
        "runningPods": running,
        "pool": {"instanceTypes": patterns, "exclude": exclude, "architectures": ["x86_64"]},
        "instanceTypes": types,
        "pods": pods,
        "daemonSetPods": [daemon_pod(*d) for d in daemons],
        "labels": dict(LABELS) if case.tainted else {},
        "taints": [dict(TAINT)] if case.tainted else [],
    }


def dedicated(pods: list[dict]) -> None:
    """The pods of a dedicated pool's case, in place: nine in ten tolerate TAINT, every fourth
    selects LABELS, every tenth tolerates nothing (no node of the pool can take it)."""
    for i, pod in enumerate(pods):
        spec = pod["spec"]
        if i % 10 != 9:
            spec["tolerations"] = [{"key": TAINT["key"], "operator": "Equal", "value": TAINT["value"], "effect": TAINT["effect"]}]
        if i % 4 == 0:
            spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **LABELS}


def busy_cluster(catalog: Catalog) -> tuple[list[dict], list[dict]]:
    """BUSY_NODES Ready nodes of BUSY_TYPE, zone by zone in turn, each running pods of the
    RUNNING shapes up to BUSY_CPU."""
    zones = sorted(catalog[BUSY_TYPE].zones)
    nodes, pods = [], []
    for i in range(BUSY_NODES):
        name = f"existing-{i:03d}"
        nodes.append({"name": name, "instanceType": BUSY_TYPE, "zone": zones[i % len(zones)], "capacityType": "on-demand"})
        used = 0
        while used < BUSY_CPU:
            cpu, memory_mi = RUNNING[len(pods) % len(RUNNING)]
            running = karpenter_mix.manifest(f"running-{len(pods)}", {"app": "running"}, cpu, memory_mi, {"nodeName": name})
            pods.append({**running, "status": {"phase": "Running"}})
            used += cpu
    return nodes, pods


# -- nodemanager, in a process of its own -----------------------------------------------------
def solve_nodemanager(prob: dict) -> dict:
    catalog = Catalog.bundled()
    p = prob["pool"]
    pool = Pool(
        name=prob["nodePool"],
        instance_types=p["instanceTypes"],
        exclude_instance_types=p["exclude"],
        architectures=p["architectures"],
        capacity_types=[CapacityType.ON_DEMAND],
        labels=prob["labels"],
        taints=prob["taints"],
    )
    given = {t["name"]: t for t in prob["instanceTypes"]}
    if set(catalog.matching(pool.instance_types, pool.architectures, pool.exclude_instance_types)) != set(given):
        raise SystemExit("side_by_side: the pool's types are not the problem's")
    for name, t in given.items():
        a = catalog[name].allocatable
        if (a.cpu, a.memory, a.get("pods")) != (t["cpuMillis"], t["memoryBytes"], t["pods"]):
            raise SystemExit(f"side_by_side: {name}'s allocatable differs from the problem's")
    pods = [dataclasses.replace(Pod.from_manifest(m), created_at=float(i)) for i, m in enumerate(prob["runningPods"] + prob["pods"])]
    nodes = tuple(
        Node(
            NodeName(n["name"]),
            "existing",
            n["instanceType"],
            CapacityType(n["capacityType"]),
            n["zone"],
            allocatable=catalog[n["instanceType"]].allocatable,
            state=NodeState.AVAILABLE,
            labels={HOSTNAME: n["name"], ZONE: n["zone"], INSTANCE_TYPE: n["instanceType"], "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"},
        )
        for n in prob["existingNodes"]
    )
    daemons = tuple(daemon_set_of(d) for d in prob["daemonSetPods"])
    scaler = BindingNodeScaler(ScalerSettings((pool,), NodeDefaults(default_instance_type=next(iter(given)), max_boots_per_loop=MAX_BOOTS)), catalog)
    snapshot = ClusterSnapshot(tuple(pods), nodes, daemon_sets=daemons)
    started = time.perf_counter()
    decision = scaler.compute(snapshot, 0.0)
    seconds = time.perf_counter() - started
    started_nodes = [{"name": s.name, "instanceType": s.instance_type, "zone": s.zone, "capacityType": s.capacity_type.value} for s in decision.start]
    return {"seconds": seconds, "nodes": started_nodes, "bindings": dict(decision.bindings), "unplaced": {**decision.unschedulable, **decision.waiting}}


# -- Karpenter, through its driver ------------------------------------------------------------
def driver() -> Path:
    """The driver ``make controlplane`` builds (built now if it is not in the cache yet)."""
    return binaries()["karpenter"]


def karpenter_plan(out: dict) -> dict:
    """The driver's NodeClaims as a plan: one node per claim (``claim-N``), at its launch offering."""
    nodes, unplaced = [], dict(out["podErrors"])
    bindings = {pod: node for node, pods in out["existingNodes"].items() for pod in pods}
    for i, claim in enumerate(out["nodeClaims"]):
        launch = claim["launch"]
        if launch is None:
            unplaced.update(dict.fromkeys(claim["pods"], "no available offering"))
            continue
        name = f"claim-{i}"
        nodes.append({"name": name, "instanceType": launch["instanceType"], "zone": launch["zone"], "capacityType": launch["capacityType"]})
        bindings.update(dict.fromkeys(claim["pods"], name))
    return {"seconds": out["solveSeconds"], "setup_seconds": out["setupSeconds"], "nodes": nodes, "bindings": bindings, "unplaced": unplaced}


def run_one(scheduler: str, path: Path, karpenter: Path) -> dict:
    if scheduler == "nodemanager":
        done = subprocess.run([sys.executable, __file__, "--solve", str(path)], capture_output=True, text=True, check=False)
    else:
        with path.open() as stdin:
            done = subprocess.run([str(karpenter)], stdin=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{scheduler} failed on {path.name}:\n{done.stderr[-3000:]}")
    plan = json.loads(done.stdout)
    return plan if scheduler == "nodemanager" else karpenter_plan(plan)


# -- the bound --------------------------------------------------------------------------------
def lower_bound(prob: dict) -> float:
    """What no plan can undercut (see the module's docstring), in $/h of new nodes: of the pods
    a new node can take (tolerating the pool's taints), with the DaemonSets that run there."""
    taints = prob.get("taints") or []
    ds = [plan_check.requests(d) for d in prob["daemonSetPods"] if plan_check.tolerates(d["spec"], taints)]
    ds_cpu, ds_memory, ds_pods = sum(c for c, _ in ds), sum(m for _, m in ds), len(ds)
    prices, columns = [], []
    for t in prob["instanceTypes"]:
        if t["cpuMillis"] > ds_cpu and t["memoryBytes"] > ds_memory and t["pods"] > ds_pods:
            prices.append(min(o["price"] for o in t["offerings"] if o["available"]))
            columns.append((t["cpuMillis"] - ds_cpu, t["memoryBytes"] - ds_memory, t["pods"] - ds_pods, 1))
    placeable = [m for m in prob["pods"] if plan_check.tolerates(m["spec"], taints)]
    asks = [plan_check.requests(m) for m in placeable]
    repelling: Counter[str] = Counter()
    for m in placeable:
        own = m["metadata"].get("labels") or {}
        for term in ((m["spec"].get("affinity") or {}).get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
            if term["topologyKey"] == plan_check.HOSTNAME and plan_check.selects(term.get("labelSelector"), own):
                repelling[json.dumps(term["labelSelector"], sort_keys=True)] += 1
    # the room left on nodes already running is free: it comes off what new nodes must hold
    types = {t["name"]: t for t in prob["instanceTypes"]}
    on_node: dict[str, list[tuple[int, int]]] = {}
    for m in prob.get("runningPods") or []:
        on_node.setdefault(m["spec"]["nodeName"], []).append(plan_check.requests(m))
    free = [0, 0, 0]
    for node in prob.get("existingNodes") or []:
        t = types[node["instanceType"]]
        on = on_node.get(node["name"], [])
        free[0] += max(0, t["cpuMillis"] - ds_cpu - sum(c for c, _ in on))
        free[1] += max(0, t["memoryBytes"] - ds_memory - sum(m for _, m in on))
        free[2] += max(0, t["pods"] - ds_pods - len(on))
    wanted = (sum(c for c, _ in asks), sum(m for _, m in asks), len(asks))
    demand = (*(max(0, w - f) for w, f in zip(wanted, free, strict=True)), max(0, max(repelling.values(), default=0) - len(prob.get("existingNodes") or [])))
    return cheapest_cover(prices, columns, demand)


# -- the comparison ---------------------------------------------------------------------------
def compare(case: Case, runs: int, workdir: Path, karpenter: Path) -> dict:
    prob = problem(case)
    path = workdir / f"{case.name}.json"
    path.write_text(json.dumps(prob))
    bound = lower_bound(prob)
    result: dict = {"case": case.name, "pods": case.pods, "instance_types": len(prob["instanceTypes"]), "lower_bound_per_hour": round(bound, 4)}
    plans: dict[str, list[dict]] = {"nodemanager": [], "karpenter": []}
    for _ in range(runs):
        for scheduler, done in plans.items():
            done.append(run_one(scheduler, path, karpenter))
    for scheduler, done in plans.items():
        reports = [plan_check.check(prob, plan) for plan in done]
        seconds = [plan["seconds"] for plan in done]
        costs = [r.cost_per_hour for r in reports]
        worst = max(reports, key=lambda r: (r.total_violations + r.unaccounted, r.unplaced))
        result[scheduler] = {
            "seconds_min": round(min(seconds), 3),
            "seconds_median": round(statistics.median(seconds), 3),
            "pods_per_second": round(case.pods / statistics.median(seconds), 1),
            "cost_per_hour": round(statistics.median(costs), 4),
            "cost_per_hour_range": [round(min(costs), 4), round(max(costs), 4)],
            "cost_ratio": round(statistics.median(costs) / bound, 4) if bound else None,
            **{k: v for k, v in worst.summary().items() if k not in ("pods", "cost_per_hour")},
        }
        if scheduler == "karpenter":
            result[scheduler]["setup_seconds_median"] = round(statistics.median(p["setup_seconds"] for p in done), 3)
    result["speedup"] = round(result["karpenter"]["seconds_median"] / result["nodemanager"]["seconds_median"], 2)
    return result


HEADER = (
    "| case | pods | types | nodemanager s (min/med) | Karpenter s (min/med) | speed × "
    "| nodemanager $/h (÷ bound) | Karpenter $/h (÷ bound) | unplaced nm/K | violations nm/K |"
)


def row(r: dict) -> str:
    nm, k = r["nodemanager"], r["karpenter"]
    violations = (sum(nm["violations"].values()) + nm["unaccounted"], sum(k["violations"].values()) + k["unaccounted"])
    return (
        f"| {r['case']} | {r['pods']:,} | {r['instance_types']} | {nm['seconds_min']:.2f} / {nm['seconds_median']:.2f}"
        f" | {k['seconds_min']:.2f} / {k['seconds_median']:.2f}"
        f" | {r['speedup']:.1f} | {nm['cost_per_hour']:.2f} ({nm['cost_ratio']:.3f}) | {k['cost_per_hour']:.2f} ({k['cost_ratio']:.3f})"
        f" | {nm['unplaced']} / {k['unplaced']} | {violations[0]} / {violations[1]} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs of each scheduler per case, interleaved")
    parser.add_argument("--cases", nargs="+", default=["all"], help="all, quick, or case names (mixed-5k-101, karpenter-mix-20k-all, mixed-5k-101-ds, ...)")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument("--solve", type=Path, help=argparse.SUPPRESS)  # a nodemanager run, in its own process
    args = parser.parse_args()
    if args.solve:
        print(json.dumps(solve_nodemanager(json.loads(args.solve.read_text()))))
        return 0
    by_name = {c.name: c for c in CASES}
    wanted = [c.name for c in CASES] if args.cases == ["all"] else list(QUICK) if args.cases == ["quick"] else args.cases
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r}; the cases are: {', '.join(by_name)}")
    karpenter = driver()
    print(f"Karpenter driver: {karpenter}\n{HEADER}\n|{'---|' * 10}", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="side-by-side-") as workdir:
        for name in wanted:
            results.append(compare(by_name[name], args.runs, Path(workdir), karpenter))
            print(row(results[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
