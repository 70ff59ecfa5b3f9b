"""The safety fuzz: random small configurations and workloads, played by the simulator, each
checked by an independent verifier of what an autoscaler must never do.

A case: one to three pools (zones, taints, labels, limits, bin-pack or cell, GPU types, capacity
reservations), pods
arriving over an hour (spread over zones or hosts, affinity, anti-affinity, node selectors,
tolerations, host ports, GPU claims, pods no controller makes again), and operators cordoning
and tainting nodes at random. The verifier watches the cloud's launches, the cluster's binds,
the claims' allocations and the marks for termination, not the controller's own books:

* boots: at most 2 for each pod that ever waited, and one more for each pod a node was booted
  for that an operator then cordoned or tainted (its pods may need another);
* no pod causes more than one boot that ends idle (a node terminated without ever holding a
  pod it was booted for or any other);
* no node an operator cordoned or tainted is disrupted voluntarily (consolidation, drift,
  expiry, idle stop);
* no pod runs outside the node its allocated claims are on;
* no pod without a controller is lost to a voluntary disruption;
* no node is still in a Capacity Block when EC2 starts reclaiming it.

    python benchmarks/fuzz_safety.py --cases 2000 --seed 1 --json

prints one JSON object: cases, seconds, the worst boots-per-pod ratio and its case, and every
violation found (none, on a sound autoscaler).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nodemanager.cluster.workload import parse_cluster_objects, parse_devices, parse_workload  # noqa: E402
from nodemanager.config import parse_config  # noqa: E402
from nodemanager.controller.labels import VOLUNTARY  # noqa: E402
from nodemanager.model.selectors import terms_match  # noqa: E402
from nodemanager.simulator import Simulation  # noqa: E402

ZONES = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"]
FAMILIES = [["m5.*"], ["c5.*", "c6i.*"], ["r5.*"], ["t3.*", "m5.*"]]
OPERATOR_TAINT = "ops.example.com/hold"
STOPPED_BY_CHOICE = VOLUNTARY | {"idle"}
GPU_CLASS = {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]}}
GPU_TEMPLATE = {"metadata": {"name": "one-gpu"}, "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu"}]}}}}


def _pod_preferences(spec: dict[str, Any], j: int, rng: random.Random) -> None:
    """Preferred pod anti-affinity to the pod's own kind and preferred affinity to an earlier
    kind now and then, which new nodes take as requirements at first and relax in Karpenter's
    order; from their own generator, as ``_node_preferences``."""
    kinds = []
    if rng.random() < 0.2:
        key = rng.choice(["kubernetes.io/hostname", "topology.kubernetes.io/zone"])
        kinds.append(("podAntiAffinity", {"labelSelector": {"matchLabels": {"app": f"a{j}"}}, "topologyKey": key}))
    if j and rng.random() < 0.1:
        kinds.append(("podAffinity", {"labelSelector": {"matchLabels": {"app": f"a{rng.randrange(j)}"}}, "topologyKey": "topology.kubernetes.io/zone"}))
    for kind, term in kinds:
        preferred = spec.setdefault("affinity", {}).setdefault(kind, {}).setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
        preferred.append({"weight": rng.randint(1, 100), "podAffinityTerm": term})


def _node_preferences(spec: dict[str, Any], rng: random.Random) -> None:
    """Preferred node affinity and ORed required terms now and then, which steer new nodes in
    Karpenter's order of relaxation; drawn from their own generator (seeded by the pod) so
    that the cases of earlier seeds stay what they were."""

    def term() -> dict[str, Any]:
        key, values = rng.choice([("topology.kubernetes.io/zone", ZONES), ("team", ["a", "b"]), ("nodemanager.io/capacity-type", ["spot", "on-demand"])])
        return {"matchExpressions": [{"key": key, "operator": rng.choice(["In", "NotIn"]), "values": [rng.choice(values)]}]}

    node: dict[str, Any] = {}
    if rng.random() < 0.25:
        node["preferredDuringSchedulingIgnoredDuringExecution"] = [{"weight": rng.randint(1, 100), "preference": term()} for _ in range(rng.randint(1, 2))]
    if rng.random() < 0.1:
        node["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term() for _ in range(2)]}
    if node:
        spec.setdefault("affinity", {})["nodeAffinity"] = node


def random_case(rng: random.Random) -> tuple[str, dict[str, Any]]:
    """A provider.yaml and a workload document."""
    pools: list[dict[str, Any]] = []
    for i in range(rng.randint(1, 3)):
        pool: dict[str, Any] = {"name": f"p{i}", "instanceTypes": rng.choice(FAMILIES), "packing": rng.choice(["binpack", "binpack", "cell"])}
        if rng.random() < 0.6:
            pool["zones"] = sorted(rng.sample(ZONES, rng.randint(1, 3)))
        if rng.random() < 0.3:
            pool["taints"] = [{"key": "dedicated", "value": f"p{i}", "effect": "NoSchedule"}]
        if rng.random() < 0.4:
            pool["labels"] = {"team": rng.choice(["a", "b"])}
        if rng.random() < 0.3:
            pool["limits"] = {"nodes": rng.randint(1, 8)}
        if rng.random() < 0.2:
            pool["disruption"] = {"expireAfter": "30m"}
        pools.append(pool)
    if rng.random() < 0.4:
        gpu_taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
        pools.append({"name": "gpu", "packing": "cell", "instanceTypes": ["g5.*", "g4dn.*"], "taints": [gpu_taint]})
    document: dict[str, Any] = {"apiVersion": "nodemanager/v1", "nodes": {"idleGrace": f"{rng.choice([60, 120, 300])}s"}, "pools": pools}
    gpu = any(p["name"] == "gpu" for p in pools)
    entries = []
    for j in range(rng.randint(1, 6)):
        labels = {"app": f"a{j}"}
        requests = {"cpu": rng.choice(["100m", "250m", "500m", "1", "2"]), "memory": rng.choice(["128Mi", "512Mi", "1Gi", "4Gi"])}
        spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
        if rng.random() < 0.3:
            spec["nodeSelector"] = {"team": rng.choice(["a", "b"])}
        if rng.random() < 0.3:
            spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
        if rng.random() < 0.35:
            key = rng.choice(["topology.kubernetes.io/zone", "kubernetes.io/hostname"])
            when = rng.choice(["DoNotSchedule", "ScheduleAnyway"])
            constraint = {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": {"matchLabels": labels}}
            if rng.random() < 0.3:
                constraint["nodeTaintsPolicy"] = "Honor"
            spec["topologySpreadConstraints"] = [constraint]
        if rng.random() < 0.2:
            term = {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        elif j and rng.random() < 0.15:
            term = {"labelSelector": {"matchLabels": {"app": f"a{rng.randrange(j)}"}}, "topologyKey": "topology.kubernetes.io/zone"}
            spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        if rng.random() < 0.1:
            spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        if gpu and rng.random() < 0.3:
            spec["tolerations"] = [*spec.get("tolerations", []), {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        _node_preferences(spec, random.Random(f"{j}/{json.dumps(spec, sort_keys=True)}"))
        _pod_preferences(spec, j, random.Random(f"pods/{j}/{json.dumps(spec, sort_keys=True)}"))
        entry: dict[str, Any] = {"name": f"w{j}", "count": rng.randint(1, 4), "at": rng.randint(0, 3000), "pod": {"metadata": {"labels": labels}, "spec": spec}}
        if rng.random() < 0.5:
            entry["duration"] = rng.randint(300, 3600)
        if rng.random() < 0.2:
            entry["bare"] = True
        entries.append(entry)
    workload: dict[str, Any] = {"pods": entries}
    events = []
    for _ in range(rng.randint(0, 3)):
        event: dict[str, Any] = {"at": rng.randint(300, 3300), "count": 1}
        if rng.random() < 0.5:
            event["cordon"] = True
        else:
            event["taint"] = {"key": OPERATOR_TAINT, "value": "x", "effect": rng.choice(["NoSchedule", "PreferNoSchedule"])}
        events.append(event)
    if events:
        workload["nodeEvents"] = events
    if gpu:
        workload["deviceClasses"] = [GPU_CLASS]
        workload["resourceClaimTemplates"] = [GPU_TEMPLATE]
    _capacity_and_launches(document, random.Random(rng.random()))  # (drawn last: the cases drawn before keep their draws)
    _reservations(document, workload, random.Random(rng.random()))
    return json.dumps(document), workload


def _capacity_and_launches(document: dict[str, Any], rng: random.Random) -> None:
    """Some offerings out of capacity or short of it, so that fleet launches fall back and
    RunInstances launches fail and are planned again; some pools launching one offering per
    call, with a wider tolerance, or asking a variety of types of their fleets."""
    if rng.random() < 0.4:
        rules = {}
        for _ in range(rng.randint(1, 3)):
            rules[f"{rng.choice(FAMILIES)[0]}/{rng.choice(['on-demand', 'spot', '*'])}/{rng.choice(ZONES)}"] = rng.choice([0, 0, 1, 2])
        document["cloud"] = {"provider": "simulated", "simulated": {"capacity": rules}}
    for pool in document["pools"]:
        if rng.random() < 0.3:
            pool["launch"] = rng.choice([{"method": "runInstances"}, {"priceTolerance": 0.5}, {"minValues": {"instanceTypes": 3, "policy": "BestEffort"}}])


RESERVED_TYPES = {"m5.*": "m5.xlarge", "c5.*": "c5.xlarge", "r5.*": "r5.large", "t3.*": "m5.large"}


def _reservations(document: dict[str, Any], workload: dict[str, Any], rng: random.Random) -> None:
    """Now and then, capacity reservations a pool launches into first: an open-ended ODCR, or
    a Capacity Block that starts and ends within the run (its nodes must be gone before EC2
    reclaims it)."""
    if rng.random() >= 0.3:
        return
    pool = rng.choice([p for p in document["pools"] if p["name"] != "gpu"])
    itype = RESERVED_TYPES[pool["instanceTypes"][0]]
    declared = []
    for k in range(rng.randint(1, 2)):
        entry: dict[str, Any] = {"id": f"cr-0{k:016x}", "instanceType": itype, "zone": rng.choice(pool.get("zones", ZONES)), "count": rng.randint(1, 4)}
        if rng.random() < 0.5:
            start = rng.randint(0, 1800)
            entry.update(type="capacity-block", start=start, end=start + rng.randint(2700, 5400))
        declared.append(entry)
    workload["reservations"] = declared
    pool["capacityTypes"] = ["reserved", "on-demand"]
    pool["capacityReservations"] = [{"id": e["id"]} for e in declared]


@dataclass
class Verdict:
    pods: int  # that ever waited
    boots: int
    idle_boots: Counter[str] = field(default_factory=Counter)  # pod -> boots for it that ended idle
    violations: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.boots / max(self.pods, 1)


def run_case(provider: str, workload: dict[str, Any], until: float = 3600.0) -> Verdict:
    """Play the case and verify it from what the cloud and the cluster saw."""
    config, catalog = parse_config(provider, "provider.yaml", REPO)
    text = json.dumps(workload)
    arrivals = parse_workload(text, "workload.json")
    simulation = Simulation(config, catalog, arrivals, parse_devices(text, "workload.json"), parse_cluster_objects(text, "workload.json"))
    controller, cluster, cloud = simulation.controller, simulation.cluster, simulation.cloud
    booted_for: dict[str, tuple[str, ...]] = {}
    held_a_pod: set[str] = set()
    allocated_on: dict[str, str] = {}
    violations: list[str] = []
    bare = {a.pod.key for a in arrivals if a.pod.owner is None}

    create, bind, allocate, mark = controller.boots.create, cluster.bind, cluster.allocate_claim, controller.state.mark_for_termination
    targets, acted_on = cluster._targets, set()

    def on_act(action):  # type: ignore[no-untyped-def]
        names = targets(action)
        acted_on.update(names)
        return names

    def on_create(spec, now):  # type: ignore[no-untyped-def]
        booted_for[spec.name] = tuple(spec.pods)
        return create(spec, now)

    def on_bind(pod, node):  # type: ignore[no-untyped-def]
        sim = cluster.pods.get(pod)
        for claim in sim.pod.claims if sim is not None else ():
            found = cluster._claims.get(claim)
            if found is not None and found.allocation is not None and claim in allocated_on and allocated_on[claim] != node:
                violations.append(f"{pod} bound to {node}, but its claim {claim} is allocated on {allocated_on[claim]}")
            elif found is not None and found.allocation is not None and found.allocation.node_selector is not None:
                labels = cluster.nodes[node].labels if node in cluster.nodes else {}
                if not terms_match(found.allocation.node_selector, labels, node):
                    violations.append(f"{pod} bound to {node}, outside its claim {claim}'s allocation")
        held_a_pod.add(node)
        return bind(pod, node)

    def on_allocate(claim, node, result):  # type: ignore[no-untyped-def]
        allocated_on[claim] = node
        return allocate(claim, node, result)

    def on_mark(name, reason, label):  # type: ignore[no-untyped-def]
        node = cluster.nodes.get(name)
        if label in STOPPED_BY_CHOICE and name in controller.state.nodes and name not in controller.state.marked and node is not None:
            if node.unschedulable or any(t.key == OPERATOR_TAINT for t in node.taints):
                violations.append(f"node {name} ({'cordoned' if node.unschedulable else 'tainted'} by an operator) marked for termination: {label}: {reason}")
            if label in VOLUNTARY:
                for key in cluster._on_node.get(name, ()):
                    if key in bare:
                        violations.append(f"node {name} disrupted ({label}) while it holds {key}, which no controller makes again")
        return mark(name, reason, label)

    controller.boots.create, cluster.bind, cluster.allocate_claim, controller.state.mark_for_termination = on_create, on_bind, on_allocate, on_mark  # type: ignore[method-assign]
    cluster._targets = on_act  # type: ignore[method-assign]
    simulation.run(until=until)
    launched = [e.node_name for e in cloud.events if e.kind == "launched"]
    ended = {e.node_name for e in cloud.events if e.kind in ("terminated", "died")}
    verdict = Verdict(pods=sum(1 for a in arrivals if a.at <= until), boots=len(launched), violations=violations)
    for name in launched:
        if name in ended and name not in held_a_pod:
            for pod in booted_for.get(name, ()):
                verdict.idle_boots[pod] += 1
    forced = sum(len(booted_for.get(name, ())) for name in acted_on)  # pods whose node an operator cordoned or tainted
    if verdict.boots > 2 * verdict.pods + forced:
        violations.append(f"{verdict.boots} boots for {verdict.pods} pod(s)" + (f" ({forced} on nodes an operator acted on)" if forced else ""))
    violations += [f"{pod} caused {n} boots that ended idle" for pod, n in sorted(verdict.idle_boots.items()) if n > 1]
    violations += [f"{key} lost (no controller makes it again)" for key in getattr(cluster, "lost", [])]
    violations += [f"node {e.node_name} still in its Capacity Block when EC2 reclaimed it" for e in cloud.events if e.kind == "capacity-block-reclaimed"]
    return verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    worst: tuple[float, int] = (0.0, -1)
    found: dict[int, list[str]] = defaultdict(list)
    for i in range(args.cases):
        seed = args.seed * 1_000_003 + i
        provider, workload = random_case(random.Random(seed))
        verdict = run_case(provider, workload)
        worst = max(worst, (verdict.ratio, seed))
        if verdict.violations:
            found[seed] = verdict.violations
    out = {
        "cases": args.cases,
        "seed": args.seed,
        "seconds": round(time.perf_counter() - began, 1),
        "worst_boots_per_pod": round(worst[0], 3),
        "worst_case_seed": worst[1],
        "cases_with_violations": len(found),
        "violations": {str(k): v[:5] for k, v in sorted(found.items())[:20]},
    }
    print(json.dumps(out, indent=None if args.json else 2))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
