"""Scaler benchmark: N pending pods on an empty cluster, one compute().

    python benchmarks/scaler.py --workload {karpenter,karpenter-mix,mixed,distinct} --pods N
        [--types {all,families10,newer10,small11}] [--daemonsets eks] [--warm] [--json] [--seed S]

* karpenter: 400 synthetic instance types (type i: i+1 vCPU, 2(i+1) GiB, 10(i+1) pods,
  price proportional to size, offered in three zones), pods of Karpenter's benchmark sizes.
* karpenter-mix: the same types and Karpenter's five-way mix of generic pods, zonal and
  hostname topology spread, zonal self-affinity and hostname anti-affinity
  (``karpenter_mix.py``); ``violations`` counts pods bound where kube-scheduler would not
  admit them, from a verifier that replays the bindings against its own copy of the
  constraints, and the LP bound also needs a node for every hostname-anti-affine pod.
* mixed: the bundled us-east-1 catalog (x86_64, on-demand, every type allowed); pods 50%
  web (100-500m, 128Mi-1Gi), 25% app (1-2 CPU, 2-4Gi), 15% memory-heavy (0.5-1 CPU,
  6-12Gi), 10% CPU-heavy (3-6 CPU, 4-8Gi), in discrete steps as real requests are.

* distinct: the same catalog and pool as mixed, every pod of its own size (CPU 50m to 4,
  memory 64Mi to 16Gi, uniformly at random), as a snapshot of hand-sized pods is.

* --types families10: mixed and distinct on every size of ten m/c/r families (m5, m6i, m6a,
  c5, c6i, c6a, r5, r6i, r6a, m7i: 101 types, metal included) instead of the whole catalog;
  ``newer10``: another ten (m5, c5, r5, m6i, c6i, r6i, m7i, c7i, r7i, m6a: 101 types);
  ``small11``: eleven small sizes (m5 and c5 large to 4xlarge, r5 large to 2xlarge).

* --warm: the timed decision is the scaler's second: it decided for other pods of the same
  workload (the next seed) first, as a service's scaler has (what it keeps between decisions
  while catalog and prices hold: offerings each kind of pod accepts, the packer's tables).

* --daemonsets eks: every node also runs EKS's usual DaemonSets (aws-node 25m CPU; kube-proxy
  100m CPU; ebs-csi-node 30m CPU, 120Mi; a log agent 100m CPU, 200Mi, tolerating every
  taint), so each node the scaler plans must hold them besides its pods.

Reported: the scaler's time, the process's peak resident memory, the fleet it boots and its cost against the LP lower bound
(scipy's linprog: the cheapest fractional mix of the allowed types covering the pods'
total CPU and memory, each type offering what its DaemonSets leave); ``unplaced`` comes
from an independent verifier that re-adds every pod's request, and every DaemonSet pod's,
to the node it was bound to, not from the scaler.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import resource
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import karpenter_mix
import numpy as np
from scipy.optimize import linprog

from cloud.catalog import Catalog
from nodemanager.config.blocks import MAX_BOOTS
from nodemanager.config.schema import NodeDefaults, Pool
from nodemanager.model import CapacityType, InstanceType, Pod, Resources
from nodemanager.model.daemonset import DaemonSet
from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, ScalerSettings

GI, MI = 2**30, 2**20
# (namespace, name, CPU millicores, memory bytes, tolerates every taint)
EKS_DAEMONSETS = [
    ("kube-system", "aws-node", 25, 0, True),
    ("kube-system", "kube-proxy", 100, 0, True),
    ("kube-system", "ebs-csi-node", 30, 120 * MI, True),
    ("logging", "log-agent", 100, 200 * MI, True),
]


def daemon_pod(namespace: str, name: str, cpu: int, memory: int, tolerate_all: bool) -> dict:
    """The pod manifest a DaemonSet of these requests runs on each node."""
    requests = {"cpu": f"{cpu}m", **({"memory": str(memory)} if memory else {})}
    spec: dict = {"containers": [{"name": name, "image": f"{name}:1", "resources": {"requests": requests}}]}
    if tolerate_all:
        spec["tolerations"] = [{"operator": "Exists"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "uid": f"ds-{name}"}, "spec": spec}


def daemon_set_of(pod: dict) -> DaemonSet:
    """The DaemonSet whose pod template is ``pod``."""
    meta = {"name": pod["metadata"]["name"], "namespace": pod["metadata"]["namespace"]}
    return DaemonSet.from_manifest({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "spec": {"template": {"spec": pod["spec"]}}})


def daemon_set(namespace: str, name: str, cpu: int, memory: int, tolerate_all: bool) -> DaemonSet:
    return daemon_set_of(daemon_pod(namespace, name, cpu, memory, tolerate_all))


KARPENTER_ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")  # Karpenter's fake offerings


def karpenter_catalog() -> Catalog:
    types = [
        InstanceType(f"fake-it-{i}", vcpu=i + 1, memory_mib=2 * (i + 1) * 1024, on_demand_price=0.05 * (i + 1), zones=KARPENTER_ZONES, max_pods=10 * (i + 1))
        for i in range(400)
    ]
    return Catalog(types, region="fake")


def karpenter_pods(n: int, rng: random.Random) -> list[tuple[int, int]]:
    cpus = [100, 250, 500, 1000, 1500]
    mems = [100 * MI, 256 * MI, 512 * MI, 1 * GI, 2 * GI, 4 * GI]
    return [(rng.choice(cpus), rng.choice(mems)) for _ in range(n)]


def mixed_pods(n: int, rng: random.Random) -> list[tuple[int, int]]:
    def pick(lo: int, hi: int, step: int) -> int:
        return lo + step * rng.randrange((hi - lo) // step + 1)

    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.50:
            out.append((pick(100, 500, 100), pick(128 * MI, 1 * GI, 128 * MI)))
        elif r < 0.75:
            out.append((pick(1000, 2000, 250), pick(2 * GI, 4 * GI, 512 * MI)))
        elif r < 0.90:
            out.append((pick(500, 1000, 250), pick(6 * GI, 12 * GI, 1 * GI)))
        else:
            out.append((pick(3000, 6000, 500), pick(4 * GI, 8 * GI, 1 * GI)))
    return out


def distinct_pods(n: int, rng: random.Random) -> list[tuple[int, int]]:
    return [(rng.randint(50, 4000), rng.randint(64 * MI, 16 * GI)) for _ in range(n)]


def lp_lower_bound(types: list[InstanceType], cpu: int, memory: int, overhead: tuple[int, int] = (0, 0), min_nodes: int = 0) -> float:
    """Every node pays its DaemonSets' ``overhead`` (CPU, memory) before any pod; there are
    at least ``min_nodes`` nodes (fractionally)."""
    types = [t for t in types if t.allocatable.cpu > overhead[0] and t.allocatable.memory > overhead[1]]
    columns = [(t.allocatable.cpu - overhead[0], t.allocatable.memory - overhead[1], 1) for t in types]
    return cheapest_cover([t.on_demand_price for t in types], columns, (cpu, memory, min_nodes))


def cheapest_cover(prices: list[float], columns: list[tuple[int, ...]], demand: tuple[int, ...]) -> float:
    """The cheapest fractional count of each column (a node type's price and what it offers:
    CPU, memory bytes, and any further amounts) whose sum covers ``demand``; scipy's HiGHS."""
    scale = [GI if i == 1 else 1 for i in range(len(demand))]  # memory in GiB keeps the LP well conditioned
    a_ub = -np.array([[c[i] / scale[i] for c in columns] for i in range(len(demand))], dtype=float)
    result = linprog(prices, A_ub=a_ub, b_ub=[-d / s for d, s in zip(demand, scale, strict=True)], bounds=(0, None), method="highs")
    if not result.success:
        raise RuntimeError(f"LP failed: {result.message}")
    return float(result.fun)


def verify(pods: list[Pod], decision, catalog: Catalog, daemons: list[tuple[str, str, int, int, bool]]) -> int:
    """Pods not bound, bound twice, or bound to a node they overfill once the DaemonSet pods
    that run there have their room. The benchmark's DaemonSets select every node and its
    pool has no taints, so every one of them runs on every node (checked, not assumed)."""
    by_key = {p.key: p for p in pods}
    load: dict[str, Resources] = defaultdict(Resources)
    count: dict[str, int] = defaultdict(int)
    nodes = {spec.name: spec for spec in decision.start}
    assert all(not spec.taints for spec in nodes.values()), "the verifier assumes untainted nodes"
    daemon = Resources({"cpu": sum(d[2] for d in daemons), "memory": sum(d[3] for d in daemons)})
    bad = 0
    for key, target in decision.bindings.items():
        if target not in nodes:
            bad += 1
            continue
        load[target] = load[target] + by_key[key].requests
        count[target] += 1
    for name, spec in nodes.items():
        itype = catalog[spec.instance_type]
        if not (load[name] + daemon).fits(itype.allocatable) or count[name] + len(daemons) > itype.max_pods:
            bad += count[name]
    return bad + (len(pods) - len(decision.bindings))


FAMILIES10 = ("m5", "m6i", "m6a", "m7i", "c5", "c6i", "c6a", "r5", "r6i", "r6a")  # 101 types
NEWER10 = ("m5", "c5", "r5", "m6i", "c6i", "r6i", "m7i", "c7i", "r7i", "m6a")  # 101 types, three generations of each letter
SMALL11 = ("m5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge", "c5.large", "c5.xlarge", "c5.2xlarge", "c5.4xlarge", "r5.large", "r5.xlarge", "r5.2xlarge")
# --types: the patterns a pool of the mixed and distinct workloads allows
TYPE_SETS = {"all": ["*"], "families10": [f"{f}.*" for f in FAMILIES10], "newer10": [f"{f}.*" for f in NEWER10], "small11": list(SMALL11)}


def _workload(workload: str, n: int, seed: int, types: str) -> tuple[Catalog, Pool, list[karpenter_mix.Spec], list[tuple[int, int]], list[Pod]]:
    """The catalog, the pool, and the pods (with their specs and shapes) of a workload."""
    rng = random.Random(seed)
    specs: list[karpenter_mix.Spec] = []
    if workload == "karpenter-mix":
        catalog = karpenter_catalog()
        specs = karpenter_mix.diverse_pods(n, rng)
        shapes = [(s.cpu_m, s.memory_mi * MI) for s in specs]
        pool = Pool(name="bench", instance_types=["*"], capacity_types=[CapacityType.ON_DEMAND])
    elif workload == "karpenter":
        catalog = karpenter_catalog()
        shapes = karpenter_pods(n, rng)
        pool = Pool(name="bench", instance_types=["*"], capacity_types=[CapacityType.ON_DEMAND])
    else:
        catalog = Catalog.bundled()
        shapes = (distinct_pods if workload == "distinct" else mixed_pods)(n, rng)
        # Burstable types are left out: their list price holds only below the CPU credit
        # baseline, and pods with sustained requests pay the unlimited-mode surcharge.
        patterns = TYPE_SETS[types]
        pool = Pool(name="bench", instance_types=patterns, exclude_instance_types=["t*"], architectures=["x86_64"], capacity_types=[CapacityType.ON_DEMAND])
    if specs:
        pods = [dataclasses.replace(Pod.from_manifest(s.manifest), created_at=float(i)) for i, s in enumerate(specs)]
    else:
        pods = [Pod("bench", f"p{i}", f"u{i}", Resources({"cpu": c, "memory": m}), created_at=float(i)) for i, (c, m) in enumerate(shapes)]
    return catalog, pool, specs, shapes, pods


def run(workload: str, n: int, seed: int, daemonsets: str = "none", types: str = "all", *, warm: bool = False, ray: str | None = None) -> dict[str, object]:
    catalog, pool, specs, shapes, pods = _workload(workload, n, seed, types)
    settings = ScalerSettings((pool,), NodeDefaults(default_instance_type=next(iter(catalog)).name, max_boots_per_loop=MAX_BOOTS))
    scaler = BindingNodeScaler(settings, catalog)
    daemons = EKS_DAEMONSETS if daemonsets == "eks" else []
    snapshot = ClusterSnapshot(tuple(pods), (), daemon_sets=tuple(daemon_set(*d) for d in daemons))
    if warm:  # as in the service: the scaler has decided before (other pods of the same workload), same catalog and prices
        scaler.compute(dataclasses.replace(snapshot, pods=tuple(_workload(workload, n, seed + 1, types)[4])), 0.0)
    started = time.perf_counter()
    decision = scaler.compute(snapshot, 0.0)
    seconds = time.perf_counter() - started
    allowed = [t for t in catalog if t.name in catalog.matching(pool.instance_types, pool.architectures, pool.exclude_instance_types)]
    overhead = (sum(d[2] for d in daemons), sum(d[3] for d in daemons))
    min_nodes = karpenter_mix.anti_affine_count(specs)
    bound = lp_lower_bound(allowed, sum(c for c, _ in shapes), sum(m for _, m in shapes), overhead, min_nodes)
    cost = sum(spec.price for spec in decision.start)
    result: dict[str, object] = {
        "workload": workload,
        "pods": n,
        "warm": warm,
        "daemonsets": daemonsets,
        "instance_types": len(allowed),
        "seconds": round(seconds, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),  # the whole process, setup and verifier included
        "pods_per_second": round(n / seconds, 1),
        "nodes": len(decision.start),
        "cost_per_hour": round(cost, 4),
        "lower_bound_per_hour": round(bound, 4),
        "cost_ratio": round(cost / bound, 4) if bound else None,
        "unplaced": verify(pods, decision, catalog, daemons),
        "distinct_pod_shapes": len(set(shapes)),
    }
    if ray is not None:
        planned = ray_plan(ray, allowed, shapes, daemons)
        result.update(planned)
        if "ray_cost_per_hour" in planned and bound:
            result["ray_cost_ratio"] = round(planned["ray_cost_per_hour"] / bound, 4)  # type: ignore[operator]
    if specs:
        zones = {spec.name: spec.zone for spec in decision.start}
        result["violations"] = len(karpenter_mix.constraint_violations(specs, decision.bindings, zones))
        result["pods_by_zone"] = karpenter_mix.zone_counts(specs, decision.bindings, zones)
    return result


RAY_PLANNER = Path(__file__).resolve().parent / "peers" / "ray_planner.py"
RAY_TIMEOUT = 900.0  # seconds Ray's planner is given (its work grows with nodes x types x pods)


def ray_plan(python: str, allowed: list[InstanceType], shapes: list[tuple[int, int]], daemons: list[tuple[str, str, int, int, bool]]) -> dict[str, object]:
    """The same pods and types through Ray's autoscaler planner (``peers/ray_planner.py``, in a
    fresh process of ``python``, which has ray installed): each type offers what its DaemonSets
    leave of its allocatable, CPU in cores as Ray counts it, and a pod slot per pod (its max
    pods). Its plan is priced at the types' on-demand prices and checked here (``ray_overfull``):
    what Ray put on each node it added must fit that node, and those pods must be all the pods."""
    cpu_d, memory_d = sum(d[2] for d in daemons), sum(d[3] for d in daemons)
    room = {t.name: (t.allocatable.cpu - cpu_d, t.allocatable.memory - memory_d, t.max_pods - len(daemons)) for t in allowed}
    node_types = {n: {"resources": {"CPU": c / 1000, "memory": m, "pods": p}, "max_workers": len(shapes)} for n, (c, m, p) in room.items() if min(c, m, p) > 0}
    demands = [{"CPU": c / 1000, "memory": m, "pods": 1} for c, m in shapes]
    problem = json.dumps({"node_types": node_types, "demands": demands})
    try:
        done = subprocess.run([python, str(RAY_PLANNER)], input=problem, capture_output=True, text=True, check=False, timeout=RAY_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"ray_timed_out_after_seconds": RAY_TIMEOUT}
    if done.returncode != 0:
        raise SystemExit(f"scaler.py: Ray's planner failed:\n{done.stderr[-2000:]}")
    out = json.loads(done.stdout)
    price = {t.name: t.on_demand_price for t in allowed}
    placed: Counter[tuple[int, int]] = Counter()
    overfull = 0
    for name, on in out["fills"]:
        pods = [((round(d["CPU"] * 1000), d["memory"]), k) for d, k in on]
        placed.update(dict(pods))
        cpu, memory, slots = room[name]
        overfull += sum(c * k for (c, _), k in pods) > cpu or sum(m * k for (_, m), k in pods) > memory or sum(k for _, k in pods) > slots
    if sorted(Counter(n for n, _ in out["fills"]).items()) != sorted(out["nodes"].items()) or placed != Counter(shapes):
        raise SystemExit("scaler.py: Ray's nodes are not the nodes it packed, or its pods not the pods asked")
    return {
        "ray": out["ray"],
        "ray_seconds": round(out["seconds"], 3),
        "ray_nodes": len(out["fills"]),
        "ray_cost_per_hour": round(sum(price[name] for name, _ in out["fills"]), 4),
        "ray_unfulfilled": out["unfulfilled"],
        "ray_overfull": overfull,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=["karpenter", "karpenter-mix", "mixed", "distinct"], default="mixed")
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--daemonsets", choices=["none", "eks"], default="none", help="DaemonSets every node runs besides its pods")
    parser.add_argument("--types", choices=list(TYPE_SETS), default="all", help="the instance types mixed and distinct may use")
    parser.add_argument("--warm", action="store_true", help="time a second decision: the scaler has decided for other pods of the workload before")
    parser.add_argument("--ray", metavar="PYTHON", help="also plan the pods with Ray's autoscaler planner, in a fresh process of this Python (ray installed)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.ray and args.workload not in ("mixed", "distinct"):
        parser.error("--ray plans mixed and distinct only (Ray's planner knows no inter-pod constraints)")
    result = run(args.workload, args.pods, args.seed, args.daemonsets, args.types, warm=args.warm, ray=args.ray)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>22}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
