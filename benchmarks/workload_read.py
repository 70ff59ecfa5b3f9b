"""Reading workload files: how fast, in how much memory, and whether what was read is what
the file holds.

    python benchmarks/workload_read.py [--runs 3] [--against OTHER_CHECKOUT] [--json]

Files (generated, seeded):

* ``trace.yaml``: a GPU cluster trace's shape, one entry per pod (its own name, arrival,
  run time, labels, requests and limits, a toleration), about 2.4 MB of YAML;
* the same pods as ``trace.json`` and ``trace.jsonl`` (one entry per line);
* ``three-million.yaml``: 3,000,000 pods in 30,000 entries of 100 (about 12 MB), read with
  the default ``--max-pods`` (refused) and, in the child that reads it, with 4,000,000.

Each read runs ``load_workload_file`` in a fresh process (``--against`` runs an older
checkout's too, interleaved) and reports CPU seconds and peak memory. The verifier does not
use nodemanager's parser: the generator's own count of pods and sums of CPU and memory must
be what was read, and a refusal must name ``--max-pods``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GIB = 2**30
CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from nodemanager.cluster.workload import WorkloadError, load_workload_file
started = time.process_time()
try:
    arrivals = load_workload_file(sys.argv[2], int(sys.argv[3])).arrivals
    cpu = sum(a.pod.requests.cpu_memory()[0] for a in arrivals)
    memory = sum(a.pod.requests.cpu_memory()[1] for a in arrivals)
    out = {"pods": len(arrivals), "cpu_milli": cpu, "memory_bytes": memory}
except WorkloadError as exc:
    out = {"refused": str(exc)}
out["cpu_seconds"] = round(time.process_time() - started, 2)
# VmHWM, not ru_maxrss: Linux keeps the latter across exec (the parent's memory would count)
out["peak_mb"] = round(int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) / 1024)
print(json.dumps(out))
"""


def trace(entries: int, seed: int) -> tuple[list[dict], dict[str, int]]:
    """A GPU trace's pods, one entry each, and what they ask for in all."""
    rng = random.Random(seed)
    pods, cpu, memory = [], 0, 0
    for i in range(entries):
        cores, gib, gpus = rng.choice([1, 2, 4, 8]), rng.choice([2, 4, 8, 16, 32]), rng.choice([0, 1, 1, 2, 4, 8])
        requests = {"cpu": str(cores), "memory": f"{gib}Gi", **({"nvidia.com/gpu": gpus} if gpus else {})}
        container = {"name": "main", "image": "registry.example/train:v1", "resources": {"requests": requests, "limits": dict(requests)}}
        spec = {"containers": [container], "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
        at = rng.uniform(0, 115 * 86400) if i < entries // 200 else rng.uniform(115 * 86400, 149 * 86400)
        pod = {"metadata": {"labels": {"app": f"user-{i % 97}"}}, "spec": spec}
        pods.append({"name": f"job-{i}", "at": round(at), "duration": round(rng.lognormvariate(7, 1.2)) + 60, "pod": pod})
        cpu, memory = cpu + cores * 1000, memory + gib * GIB
    return pods, {"pods": entries, "cpu_milli": cpu, "memory_bytes": memory}


def many(pods: int, per_entry: int) -> tuple[list[dict], dict[str, int]]:
    """``pods`` pods in entries of ``per_entry`` (each entry's shape its own)."""
    entries, cpu, memory = [], 0, 0
    for i in range(pods // per_entry):
        milli, mib = 100 + 50 * (i % 20), 128 * (1 + i % 16)
        requests = {"cpu": f"{milli}m", "memory": f"{mib}Mi"}
        pod = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
        entries.append({"name": f"task-{i}", "count": per_entry, "at": i % 86400, "duration": 600, "pod": pod})
        cpu, memory = cpu + per_entry * milli, memory + per_entry * mib * 2**20
    return entries, {"pods": pods // per_entry * per_entry, "cpu_milli": cpu, "memory_bytes": memory}


def write(directory: Path) -> dict[str, tuple[Path, int, dict[str, int]]]:
    """Each case: its file, the --max-pods it is read with, and what it holds."""
    import yaml  # (the generator's own writer: the files are ordinary YAML)

    pods, expected = trace(4700, seed=1)
    files = {
        "trace.yaml": yaml.safe_dump({"pods": pods}, sort_keys=False),
        "trace.json": json.dumps({"pods": pods}),
        "trace.jsonl": "".join(json.dumps(p) + "\n" for p in pods),
    }
    big, big_expected = many(3_000_000, 100)
    files["three-million.yaml"] = yaml.safe_dump({"pods": big}, sort_keys=False, width=200)
    cases = {}
    for name, text in files.items():
        (directory / name).write_text(text)
    for name in ("trace.yaml", "trace.json", "trace.jsonl"):
        cases[name] = (directory / name, 1_000_000, expected)
    cases["three-million.yaml refused"] = (directory / "three-million.yaml", 1_000_000, {"refused": 1})
    cases["three-million.yaml read"] = (directory / "three-million.yaml", 4_000_000, big_expected)
    return cases


def read(tree: Path, path: Path, max_pods: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(path), str(max_pods)], capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout)


def verify(result: dict, expected: dict[str, int]) -> list[str]:
    """What was read against what the generator wrote (no nodemanager code involved)."""
    if "error" in result:
        return [f"crashed: {result['error']}"]
    if "refused" in expected:
        return [] if "--max-pods" in result.get("refused", "") else [f"not refused naming --max-pods: {result}"]
    return [f"{key}: read {result.get(key)}, the file holds {value}" for key, value in expected.items() if result.get(key) != value]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another checkout of nodemanager to read the same files with, interleaved")
    parser.add_argument("--cases", nargs="*", help="only these cases")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    trees = {"this": REPO, **({"against": args.against.resolve()} if args.against else {})}
    rows, problems = [], []
    with tempfile.TemporaryDirectory() as tmp:
        cases = write(Path(tmp))
        sizes = {name: os.path.getsize(path) for name, (path, _, _) in cases.items()}
        for name, (path, max_pods, expected) in cases.items():
            if args.cases and name not in args.cases:
                continue
            runs: dict[str, list[dict]] = {tree: [] for tree in trees}
            for _ in range(args.runs):
                for tree, root in trees.items():
                    result = read(root, path, max_pods)
                    runs[tree].append(result)
                    problems += [f"{name} ({tree}): {p}" for p in verify(result, expected)]
            row = {"case": name, "bytes": sizes[name], "max_pods": max_pods}
            for tree, results in runs.items():
                row[f"{tree}_cpu_seconds_min"] = min(r.get("cpu_seconds", float("inf")) for r in results)
                row[f"{tree}_peak_mb_max"] = max(r.get("peak_mb", 0) for r in results)
            if "against" in trees:
                row["speedup"] = round(row["against_cpu_seconds_min"] / max(row["this_cpu_seconds_min"], 0.01), 1)
            rows.append(row)
            print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    print(json.dumps({"problems": problems}) if args.json else "\n".join(problems) or "verified: every read holds what its file holds")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
