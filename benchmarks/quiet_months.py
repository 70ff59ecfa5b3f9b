"""A long, mostly quiet trace played by ``simulate``: the shape of a public GPU cluster's 149
days (a few pods over the first 115 days, then thousands over the last 34).

    python benchmarks/quiet_months.py [--days 150] [--quiet-days 115] [--pods 8000] [--compare] [--json]

Pods: 1-, 2- and 8-GPU training jobs and CPU jobs, log-normal run times (median 20 minutes,
up to two days); the first ``--quiet-days`` hold one pod in 200, spread evenly, each running
for one to ten days (a few pods and nodes alive all along). Reports CPU
seconds, simulated days and the simulated time skipped as quiet. ``--compare`` plays the
same workload again without skipping (slow: every loop at its period through the quiet
days) and checks the two reports are the same, but for the scaler's own timings. Checked
independently, from the simulated cluster: every pod bound, no node over its allocatable.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulate import verify  # the simulation benchmark's independent checks

from nodemanager.cluster.workload import parse_workload
from nodemanager.config import parse_config
from nodemanager.simulator import Simulation

CONFIG = """
controllerId: quiet-months
cloud: {provider: simulated, simulated: {bootDelay: 40s, seed: 1}}
cluster: {source: simulated, simulated: {registerDelay: 20s}}
nodes: {maxBootsPerLoop: 20}
pools:
  - name: general
    instanceTypes: ["m5.*", "c5.*", "r5.*"]
    capacityTypes: [on-demand]
  - name: gpu
    instanceTypes: ["g5.*", "g6.*"]
    capacityTypes: [on-demand]
    taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
"""
DAY = 86400


def workload(pods: int, days: float, quiet_days: float, seed: int) -> dict:
    rng = random.Random(seed)
    quiet = max(1, pods // 200)
    entries = []
    for i in range(pods):
        at = quiet_days * DAY * i / quiet if i < quiet else rng.uniform(quiet_days * DAY, days * DAY - DAY)
        gpus = rng.choice([0, 0, 1, 1, 2, 8])
        requests = {"cpu": str(4 * max(gpus, 1)), "memory": f"{16 * max(gpus, 1)}Gi", **({"nvidia.com/gpu": gpus} if gpus else {})}
        spec: dict = {"containers": [{"name": "main", "resources": {"requests": requests}}]}
        if gpus:
            spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        duration = round(rng.uniform(1, 10) * DAY) if i < quiet else min(round(rng.lognormvariate(7.1, 1.3)), 2 * DAY)
        entries.append({"name": f"job-{i}", "at": round(at), "duration": max(duration, 60), "pod": spec})
    return {"pods": entries}


def play(text: str, skip: bool) -> tuple[dict, float, Simulation]:
    config, catalog = parse_config(CONFIG, "quiet-months", Path("."))
    sim = Simulation(config, catalog, parse_workload(text, "quiet-months"), clairvoyant=False, skip_quiet=skip)
    started = time.process_time()
    report = sim.run()
    return report, time.process_time() - started, sim


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=float, default=150)
    parser.add_argument("--quiet-days", type=float, default=115)
    parser.add_argument("--pods", type=int, default=8000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compare", action="store_true", help="play it again without skipping and compare the reports")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    text = json.dumps(workload(args.pods, args.days, args.quiet_days, args.seed))
    report, seconds, sim = play(text, skip=True)
    assert sim.quiet is not None
    result: dict = {
        "pods": args.pods,
        "simulated_days": round(report["simulated_seconds"] / DAY, 2),
        "skipped_days": round(sim.quiet.skipped / DAY, 2),
        "cpu_seconds": round(seconds, 1),
        "cost_usd": report["cost"]["usd"],
        "bound_usd": report["cost"]["lower_bound_usd"],
        "ended": report["ended"],
        **verify(sim),
    }
    problems = [f"{k}: {result[k]}" for k in ("unbound", "overfull_nodes") if result[k]]
    if args.compare:
        again, slow, _ = play(text, skip=False)
        result["cpu_seconds_without_skipping"] = round(slow, 1)
        differ = sorted(k for k in report if k != "decisions" and report[k] != again[k])
        result["reports_differ_in"] = differ
        problems += [f"the report without skipping differs in {k}" for k in differ]
    result["problems"] = problems
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
