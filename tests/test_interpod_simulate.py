"""Inter-pod constraints end to end: ``nodemanager simulate`` on a workload file with a spread
Deployment, an anti-affine StatefulSet, a self-affine cache and pods spread only by the
cluster's default constraints (a Service selects them), as a user would write it."""

from __future__ import annotations

import collections
import json
from pathlib import Path

from nodemanager.cli import main
from nodemanager.cluster.workload import parse_cluster_objects, parse_workload
from nodemanager.config import parse_config
from nodemanager.simulator import Simulation

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"

PROVIDER = """
controllerId: spread
cloud: {provider: simulated}
cluster: {source: simulated, simulated: {registerDelay: 10s}}
nodes: {idleGrace: 2m}
pools:
  - name: general
    instanceTypes: ["m5.*", "c5.*"]
    capacityTypes: [on-demand]
    zones: [us-east-1a, us-east-1b, us-east-1c]
scheduling:
  pluginArgs:
    PodTopologySpread:
      defaultingType: List
      defaultConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
"""

WORKLOAD = """
services:
  - metadata: {name: api, namespace: shop}
    spec: {selector: {app: api}}
pods:
  - name: web
    count: 30
    pod:
      metadata: {labels: {app: web}}
      spec:
        topologySpreadConstraints:
          - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}
        containers: [{name: c, resources: {requests: {cpu: 250m, memory: 512Mi}}}]
  - name: db
    count: 4
    pod:
      metadata: {labels: {app: db}}
      spec:
        affinity:
          podAntiAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: db}}}
        containers: [{name: c, resources: {requests: {cpu: 250m, memory: 512Mi}}}]
  - name: cache
    count: 6
    pod:
      metadata: {labels: {app: cache}}
      spec:
        affinity:
          podAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              - {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: cache}}}
        containers: [{name: c, resources: {requests: {cpu: 250m, memory: 512Mi}}}]
  - name: api
    count: 6
    pod:
      metadata: {namespace: shop, labels: {app: api}}
      spec: {containers: [{name: c, resources: {requests: {cpu: 250m, memory: 512Mi}}}]}
"""


def test_simulate_honours_spread_anti_affinity_affinity_and_cluster_defaults(tmp_path: Path, capsys: object) -> None:
    provider, workload = tmp_path / "provider.yaml", tmp_path / "workload.yaml"
    provider.write_text(PROVIDER)
    workload.write_text(WORKLOAD)
    assert main(["simulate", "--config", str(provider), "--workload", str(workload), "--json", "--until", "600"]) == 0
    report = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert report["pods"]["bound"] == report["pods"]["total"] == 46
    assert report["unschedulable"] == []

    config, catalog = parse_config(PROVIDER, "provider.yaml", tmp_path)
    sim = Simulation(config, catalog, parse_workload(WORKLOAD), None, parse_cluster_objects(WORKLOAD))
    sim.run(until=600)
    zone_of = {name: n.labels[ZONE] for name, n in sim.cluster.nodes.items()}
    placed: dict[str, list[str]] = collections.defaultdict(list)
    for s in sim.cluster.pods.values():
        placed[s.pod.labels["app"]].append(s.pod.node_name)
    web = collections.Counter(zone_of[n] for n in placed["web"])
    assert sorted(web.values()) == [10, 10, 10], web
    assert len(set(placed["db"])) == 4  # one node per replica
    assert len({zone_of[n] for n in placed["cache"]}) == 1  # kept in one zone
    api = collections.Counter(zone_of[n] for n in placed["api"])
    assert sorted(api.values()) == [2, 2, 2], api  # spread by the default constraint alone


def test_pods_that_keep_apart_get_the_cheaper_capacity_type_they_allow() -> None:
    """Three replicas that keep apart by zone, in a pool offering on-demand and spot: each new
    node is spot, the cheaper, not on-demand because its name sorts first."""
    config, catalog = parse_config(
        """
cloud: {provider: simulated}
cluster: {source: simulated, simulated: {registerDelay: 10s}}
pools: [{name: general, instanceTypes: ["m5.*"], capacityTypes: [on-demand, spot], zones: [us-east-1a, us-east-1b, us-east-1c]}]
""",
        "provider.yaml",
        Path("."),
    )
    term = {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "svc"}}}
    apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    spec = {"affinity": apart, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    doc = {"pods": [{"name": "svc", "count": 3, "pod": {"metadata": {"labels": {"app": "svc"}}, "spec": spec}}]}
    sim = Simulation(config, catalog, parse_workload(json.dumps(doc), "workload.json"), clairvoyant=False)
    sim.run(until=600)
    booted = [(i.capacity_type.value, i.zone) for i, _ in sim.cloud.all_instances()]
    assert sorted(booted) == [("spot", "us-east-1a"), ("spot", "us-east-1b"), ("spot", "us-east-1c")]
