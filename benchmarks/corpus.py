"""The workload corpus: seeded workloads of six classes played by ``simulate``, one JSON line each
and a summary.

    python benchmarks/corpus.py [--seeds 3] [--classes batch web ...] [--jobs 2]
        [--engine {processes,ray}] [--ray-address ADDRESS]

Each workload is played in its own process, ``--jobs`` at once; ``--engine ray`` plays them as
Ray tasks instead (``pip install 'nodemanager[sweep]'``), for sweeps larger than one machine:
on the cluster ``--ray-address`` names, or on a local Ray instance.

Classes (shapes from published descriptions, not from what the scaler does well):

* ``batch``: the cost issue's bursty batch: 60 groups of 1-40 identical Job pods arriving
  over two hours, requests from 250m/512Mi to 4 CPU/8Gi (1 CPU/8Gi among them), each group
  running 5-90 minutes.
* ``jobs``: batch with the heavy tail production traces show (the Alibaba 2018 and Google
  2019 cluster traces: most tasks last minutes, a few hours): log-normal durations,
  median 8 minutes, capped at 6 hours, over four hours.
* ``ratios``: Jobs whose memory per CPU ranges from 1 to 8 GiB, over three hours.
* ``web``: twenty Deployments over a day, their replicas following a diurnal curve
  (ReplicaSet pods that the HPA removes, not Jobs), spread over zones, each with a
  PodDisruptionBudget; a fifth do-not-disrupt.
* ``base``: a long-lived base of services (some with zone anti-affinity) and spikes of
  batch on top, every 40 minutes for six hours.
* ``gpu``: GPU jobs (1, 4 or 8 GPUs, 30 minutes to 4 hours) beside CPU pods, with a GPU pool.

Every class runs a DaemonSet (a node agent, 100m/128Mi) on every node. Each workload is
checked independently of the scaler, from the simulated cluster itself: every pod bound
or reported unschedulable, no node holding more than its allocatable, the cost at least the
bound, and the cost's parts (``cost_breakdown``) adding up to it to the cent, none below
zero. Beside the bound, each row has the clairvoyant packer's cost (a real fleet
that knew the workload in advance) and the two ratios it separates: cost ÷ clairvoyant (what
being online costs) and clairvoyant ÷ bound (how loose the bound is). The summary: the
geometric mean and the largest cost ÷ bound, the largest cost ÷ clairvoyant, the geometric
mean of clairvoyant ÷ bound, the most evictions of one pod, work redone as a share of the work asked, each part's share of the whole corpus's
cost, and wall time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulate import verify as cluster_checks  # the simulation benchmark's independent checks

from nodemanager.cluster.workload import parse_workload
from nodemanager.config import parse_config
from nodemanager.simulator import Simulation

GENERAL = """
controllerId: corpus
cloud: {provider: simulated, simulated: {bootDelay: 40s, seed: 1}}
cluster: {source: simulated, simulated: {registerDelay: 20s}}
nodes: {maxBootsPerLoop: 20}
pools:
  - name: general
    instanceTypes: ["m5.*", "c5.*", "r5.*", "m6i.*", "c6i.*", "r6i.*"]
    capacityTypes: [on-demand, spot]
"""

GPU_POOL = """
  - name: gpu
    instanceTypes: ["g5.*", "g6.*"]
    capacityTypes: [on-demand]
    taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
"""

AGENT = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "node-agent", "namespace": "kube-system"},
    "spec": {
        "selector": {"matchLabels": {"app": "node-agent"}},
        "template": {
            "metadata": {"labels": {"app": "node-agent"}},
            "spec": {"tolerations": [{"operator": "Exists"}], "containers": [{"name": "agent", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
        },
    },
}

BATCH_SHAPES = [("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("1", "8Gi"), ("2", "4Gi"), ("2", "8Gi"), ("4", "8Gi"), ("500m", "2Gi")]


def _spec(cpu: str, memory: str, **extra: object) -> dict:
    return {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **extra}


def _group(name: str, count: int, at: float, pod: dict, duration: float | None = None) -> dict:
    entry = {"name": name, "count": count, "at": f"{at:.0f}s", "pod": pod}
    if duration is not None:
        entry["duration"] = f"{duration:.0f}s"
    return entry


def _lognormal(rng: random.Random, median: float, sigma: float, low: float, high: float) -> float:
    return min(max(median * math.exp(rng.gauss(0.0, sigma)), low), high)


def batch(rng: random.Random) -> tuple[dict, str]:
    groups = []
    for g in range(60):
        cpu, memory = rng.choice(BATCH_SHAPES)
        groups.append(_group(f"batch-{g}", rng.randint(1, 40), rng.uniform(0, 7200), {"spec": _spec(cpu, memory)}, rng.uniform(300, 5400)))
    return {"pods": groups}, GENERAL


def jobs(rng: random.Random) -> tuple[dict, str]:
    groups = []
    for g in range(120):
        cpu, memory = rng.choice(BATCH_SHAPES)
        groups.append(_group(f"job-{g}", rng.randint(1, 20), rng.uniform(0, 4 * 3600), {"spec": _spec(cpu, memory)}, _lognormal(rng, 480, 1.3, 60, 6 * 3600)))
    return {"pods": groups}, GENERAL


def ratios(rng: random.Random) -> tuple[dict, str]:
    groups = []
    for g in range(80):
        cpu = rng.choice([0.5, 1, 2, 4])
        per_cpu = rng.choice([1, 2, 4, 8])
        pod = {"spec": _spec(f"{int(cpu * 1000)}m", f"{int(cpu * per_cpu * 1024)}Mi")}
        groups.append(_group(f"ratio-{g}", rng.randint(1, 25), rng.uniform(0, 3 * 3600), pod, rng.uniform(600, 3600)))
    return {"pods": groups}, GENERAL


def _replica_set(name: str) -> dict:
    return {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "controller": True}]}


def web(rng: random.Random) -> tuple[dict, str]:
    """Each Deployment keeps a floor of replicas all day; more come with the day's load
    (a sine over 24 hours), each removed when its hour of load ends."""
    groups, budgets = [], []
    for d in range(20):
        name = f"web-{d}"
        cpu, memory = rng.choice([("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("2", "4Gi")])
        labels = {"app": name}
        spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": labels}}]
        meta = {"labels": labels, **_replica_set(name)}
        if d % 5 == 0:
            meta["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
        floor = rng.randint(2, 6)
        groups.append(_group(f"{name}-base", floor, 0, {"metadata": meta, "spec": _spec(cpu, memory, topologySpreadConstraints=spread)}))
        peak = rng.randint(4, 24)
        for hour in range(24):
            extra = round(peak * max(math.sin(math.pi * hour / 24), 0.0) ** 2)
            if extra:
                pod = {"metadata": meta, "spec": _spec(cpu, memory, topologySpreadConstraints=spread)}
                groups.append(_group(f"{name}-h{hour}", extra, hour * 3600 + rng.uniform(0, 600), pod, 3600))
        budgets.append({"metadata": {"name": name, "namespace": "default"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}}})
    return {"pods": groups, "podDisruptionBudgets": budgets}, GENERAL


def base(rng: random.Random) -> tuple[dict, str]:
    groups = []
    for s in range(12):
        name = f"svc-{s}"
        cpu, memory = rng.choice([("500m", "1Gi"), ("1", "2Gi"), ("1", "4Gi"), ("2", "8Gi")])
        labels = {"app": name}
        extra: dict = {}
        if s % 3 == 0:
            term = {"labelSelector": {"matchLabels": labels}, "topologyKey": "topology.kubernetes.io/zone"}
            extra["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        count = 3 if extra else rng.randint(2, 8)
        groups.append(_group(name, count, 0, {"metadata": {"labels": labels, **_replica_set(name)}, "spec": _spec(cpu, memory, **extra)}))
    for spike in range(9):
        at = spike * 2400 + rng.uniform(0, 300)
        for g in range(rng.randint(2, 6)):
            cpu, memory = rng.choice(BATCH_SHAPES)
            duration = _lognormal(rng, 900, 0.8, 120, 5400)
            groups.append(_group(f"spike-{spike}-{g}", rng.randint(5, 40), at + rng.uniform(0, 120), {"spec": _spec(cpu, memory)}, duration))
    return {"pods": groups}, GENERAL


def gpu(rng: random.Random) -> tuple[dict, str]:
    groups = []
    toleration = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    for g in range(40):
        gpus = rng.choice([1, 1, 1, 4, 8])
        cpu, memory = {1: ("4", "16Gi"), 4: ("16", "96Gi"), 8: ("32", "200Gi")}[gpus]
        resources = {"requests": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}
        container = {"name": "c", "resources": resources}
        pod = {"spec": {"containers": [container], "tolerations": toleration}}
        groups.append(_group(f"train-{g}", rng.randint(1, 4), rng.uniform(0, 3 * 3600), pod, _lognormal(rng, 3600, 0.6, 1800, 4 * 3600)))
    for g in range(40):
        cpu, memory = rng.choice(BATCH_SHAPES)
        groups.append(_group(f"cpu-{g}", rng.randint(1, 20), rng.uniform(0, 3 * 3600), {"spec": _spec(cpu, memory)}, rng.uniform(300, 3600)))
    return {"pods": groups}, GENERAL + GPU_POOL


CLASSES: dict[str, Callable[[random.Random], tuple[dict, str]]] = {"batch": batch, "jobs": jobs, "ratios": ratios, "web": web, "base": base, "gpu": gpu}


def workload(name: str, seed: int) -> tuple[dict, str]:
    """Class ``name``'s workload for ``seed`` (with the node agent), and its provider.yaml."""
    doc, config = CLASSES[name](random.Random(f"{name}-{seed}"))
    return {**doc, "daemonSets": [AGENT]}, config


def verify(sim: Simulation, report: dict) -> list[str]:
    """What is wrong with a played workload, from the simulated cluster itself."""
    problems = []
    if over := cluster_checks(sim)["overfull_nodes"]:
        problems.append(f"{over} node(s) over allocatable")
    pods = report["pods"]
    if pods["bound"] + pods["unschedulable"] < pods["total"]:
        problems.append(f"{pods['total'] - pods['bound'] - pods['unschedulable']} pod(s) neither bound nor reported")
    cost = report["cost"]
    if cost["usd"] < cost["lower_bound_usd"]:
        problems.append("cost below its bound")
    if cost["clairvoyant_usd"] < cost["lower_bound_usd"]:
        problems.append("the clairvoyant fleet's cost below the bound")
    if abs(math.fsum(cost["breakdown"].values()) - cost["usd"]) >= 0.005:
        problems.append(f"the cost's parts add up to {math.fsum(cost['breakdown'].values()):.4f}, not {cost['usd']:.4f}")
    if below := [part for part, usd in cost["breakdown"].items() if usd < -0.005 and part != "refunded"]:
        problems.append(f"cost parts below zero: {', '.join(below)}")
    return problems


def play(name: str, seed: int) -> dict:
    doc, text = workload(name, seed)
    config, catalog = parse_config(text, "corpus", Path("."))
    sim = Simulation(config, catalog, parse_workload(json.dumps(doc), f"{name}-{seed}"))
    started = time.perf_counter()
    report = sim.run()
    wall = time.perf_counter() - started
    evicted, cost = report["pods"]["evicted"], report["cost"]
    return {
        "class": name,
        "seed": seed,
        "pods": report["pods"]["total"],
        "ended": report["ended"],
        "simulated_hours": round(report["simulated_seconds"] / 3600, 2),
        "cost_usd": cost["usd"],
        "bound_usd": cost["lower_bound_usd"],
        "ratio": round(cost["usd"] / cost["lower_bound_usd"], 4) if cost["lower_bound_usd"] else None,
        "clairvoyant_usd": cost["clairvoyant_usd"],
        "vs_clairvoyant": round(cost["usd"] / cost["clairvoyant_usd"], 4) if cost["clairvoyant_usd"] else None,
        "clairvoyant_vs_bound": round(cost["clairvoyant_usd"] / cost["lower_bound_usd"], 4) if cost["lower_bound_usd"] else None,
        "cost_breakdown": cost["breakdown"],
        "p95_wait_s": report["pods"]["pending_seconds"]["p95"],
        "evictions": evicted["count"],
        "max_evictions_per_pod": evicted["max_per_pod"],
        "work_redone_hours": evicted["work_redone_hours"],
        "work_asked_hours": round(_asked(doc), 3),
        "nodes_booted": report["nodes"]["booted"],
        "consolidation_rejected": report["consolidation_rejected"],
        "problems": verify(sim, report),
        "wall_s": round(wall, 2),
    }


def _asked(doc: dict) -> float:
    """Pod-hours of work the workload's Job pods ask for (those that run to completion)."""
    jobs = [g for g in doc["pods"] if "duration" in g and "ownerReferences" not in g["pod"].get("metadata", {})]
    return sum(g["count"] * float(g["duration"].rstrip("s")) for g in jobs) / 3600


def _geomean(values: list[float]) -> float | None:
    return round(math.exp(sum(map(math.log, values)) / len(values)), 4) if values else None


def _shares(rows: list[dict]) -> dict[str, float]:
    """Each part's share of the whole corpus's cost."""
    total = sum(r["cost_usd"] for r in rows)
    parts = {part for r in rows for part in r["cost_breakdown"]}
    return {part: round(sum(r["cost_breakdown"].get(part, 0.0) for r in rows) / total, 4) for part in sorted(parts)} if total else {}


def summary(rows: list[dict]) -> dict:
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    asked = sum(r["work_asked_hours"] for r in rows)
    return {
        "workloads": len(rows),
        "geomean_ratio": _geomean(ratios),
        "max_ratio": max(ratios, default=None),
        "max_vs_clairvoyant": max((r["vs_clairvoyant"] for r in rows if r["vs_clairvoyant"]), default=None),
        "geomean_clairvoyant_vs_bound": _geomean([r["clairvoyant_vs_bound"] for r in rows if r["clairvoyant_vs_bound"]]),
        "max_evictions_per_pod": max((r["max_evictions_per_pod"] for r in rows), default=0),
        "work_redone_share": round(sum(r["work_redone_hours"] for r in rows) / asked, 4) if asked else 0.0,
        "longest_simulated_hours": max((r["simulated_hours"] for r in rows), default=0.0),
        "cost_shares": _shares(rows),
        "problems": sum(len(r["problems"]) for r in rows),
        "wall_s": round(sum(r["wall_s"] for r in rows), 1),
    }


def play_all(cases: list[tuple[str, int]], jobs: int, engine: str = "processes", address: str | None = None) -> list[dict]:
    """``play`` for every (class, seed), in ``cases``' order: ``jobs`` at once in processes of
    this machine, or as Ray tasks (``engine="ray"``, the ``sweep`` extra) on the Ray cluster at
    ``address``, or without one on a local Ray instance of ``jobs`` CPUs that talks over
    127.0.0.1 only. A cluster's workers need this Python's packages (nodemanager among them);
    the corpus's own code (this file and ``simulate.py``) travels with the tasks."""
    if engine == "processes":
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(play, *zip(*cases, strict=True)))
    if address is None:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray's switch to the loopback address for its own nodes
    import ray  # (the optional `sweep` extra; read after the switch above)

    for module in {sys.modules[play.__module__], sys.modules[cluster_checks.__module__]}:
        if module.__name__ != "__main__":  # (the script's own functions travel by value already)
            ray.cloudpickle.register_pickle_by_value(module)
    ray.init(address=address, num_cpus=None if address else jobs, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        task = ray.remote(num_cpus=1)(play)
        return ray.get([task.remote(name, seed) for name, seed in cases])
    finally:
        ray.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--classes", nargs="+", choices=sorted(CLASSES), default=list(CLASSES))
    parser.add_argument("--jobs", type=int, default=2, help="workloads played at once, each in its own process (a local Ray instance's CPUs)")
    parser.add_argument("--engine", choices=["processes", "ray"], default="processes", help="ray: as Ray tasks (pip install 'nodemanager[sweep]')")
    parser.add_argument("--ray-address", help="the Ray cluster to play on (ray.init's address, e.g. auto); none: a local instance")
    args = parser.parse_args()
    if args.ray_address and args.engine != "ray":
        parser.error("--ray-address needs --engine ray")
    started = time.perf_counter()
    cases = [(name, seed) for name in args.classes for seed in range(1, args.seeds + 1)]
    rows = play_all(cases, args.jobs, args.engine, args.ray_address)
    for row in rows:
        print(json.dumps(row))
    print(json.dumps({"summary": {**summary(rows), "elapsed_s": round(time.perf_counter() - started, 1)}}))
    return 1 if any(r["problems"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
