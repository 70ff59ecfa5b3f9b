"""Device claims choosing instance types: what autoscalers in common use cannot do yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloud.catalog import Catalog
from nodemanager.cluster.workload import load_workload_file, parse_devices, parse_workload
from nodemanager.config import parse_config
from nodemanager.model import CapacityType, InstanceType, Resources
from nodemanager.simulator import Simulation

HERE = Path(__file__).parent
GI_MIB = 1024
CONFIG = """
controllerId: gpus
cloud: {provider: simulated, simulated: {bootDelay: 30s}}
cluster: {source: simulated, simulated: {registerDelay: 10s}}
nodes: {idleGrace: 1h}
pools:
  - name: gpu
    instanceTypes: ["g*", "p*"]
    capacityTypes: [on-demand]
"""


def cheapest(catalog: Catalog, requests: Resources, satisfies) -> str:
    """Brute force over the catalog's GPU data, independent of the allocator and the scaler."""
    fits = [t for t in catalog if "x86_64" in t.architectures and (t.name.startswith(("g", "p"))) and satisfies(t) and requests.fits(t.allocatable)]
    return min(fits, key=lambda t: (t.on_demand_price, t.vcpu, t.memory_mib, t.name)).name


def big_gpu(t: InstanceType) -> bool:
    return any(g.manufacturer.upper() == "NVIDIA" and g.memory_mib >= 40 * GI_MIB for g in t.gpus)


def two_same(t: InstanceType) -> bool:
    return any(g.manufacturer.upper() == "NVIDIA" and g.count >= 2 for g in t.gpus)


def any_gpu(t: InstanceType) -> bool:
    return any(g.manufacturer.upper() in ("NVIDIA", "AMD") and g.count >= 1 for g in t.gpus)


@pytest.mark.heavy
def test_each_claim_boots_the_cheapest_type_that_really_satisfies_it(catalog):
    config, _ = parse_config(CONFIG, "t", HERE)
    workload = HERE / "data" / "gpu-workload.yaml"
    loaded = load_workload_file(workload)
    sim = Simulation(config, catalog, loaded.arrivals, loaded.devices)
    report = sim.run(until=300)
    assert report["pods"]["bound"] == 3
    node_of = {k: s.pod.node_name for k, s in sim.cluster.pods.items()}
    type_of = {k: sim.controller.state.nodes[n].instance_type for k, n in node_of.items()}
    expected = {
        "default/train": cheapest(catalog, Resources.parse({"cpu": "2", "memory": "8Gi"}), big_gpu),
        "default/pair": cheapest(catalog, Resources.parse({"cpu": "2", "memory": "8Gi"}), two_same),
        "default/infer": cheapest(catalog, Resources.parse({"cpu": "1", "memory": "4Gi"}), any_gpu),
    }
    assert type_of == expected
    # the allocations were recorded on bind: each claim holds real devices of its node
    claims = sim.cluster.devices().claims
    assert len(claims["default/pair-gpus"].allocation.devices) == 2
    assert claims["default/train-gpu"].allocation is not None
    assert {n.capacity_type for n in sim.controller.state.nodes.values()} == {CapacityType.ON_DEMAND}


def test_claims_count_against_devices_of_existing_nodes(catalog):
    """A second pod claiming a GPU shares a multi-GPU node only while devices remain."""
    config, _ = parse_config(CONFIG.replace('["g*", "p*"]', '["g4dn.12xlarge"]'), "t", HERE)
    text = (HERE / "data" / "gpu-workload.yaml").read_text().split("pods:")[0] + (
        "pods:\n  - name: one\n    count: 6\n    pod:\n      spec:\n        resourceClaims: [{name: gpu, resourceClaimTemplateName: any}]\n"
        "        containers: [{name: c, resources: {requests: {cpu: '1', memory: 2Gi}}}]\n"
    )
    sim = Simulation(config, catalog, parse_workload(text), parse_devices(text))
    report = sim.run(until=300)
    assert report["pods"]["bound"] == 6
    assert report["nodes"]["booted"] == 2  # 4 T4s per g4dn.12xlarge: two machines for six claims
    per_node: dict[str, set] = {}
    for claim in sim.cluster.devices().claims.values():
        node = next(s.pod.node_name for s in sim.cluster.pods.values() if s.pod.claims and claim.key in s.pod.claims)
        for device in claim.allocation.devices:
            assert device.device not in per_node.setdefault(node, set())  # no device given twice
            per_node[node].add(device.device)


def test_a_claim_no_type_can_satisfy_is_unschedulable_with_the_reason(catalog):
    text = (HERE / "data" / "gpu-workload.yaml").read_text().replace('quantity("40Gi")', 'quantity("4000Gi")')
    config, _ = parse_config(CONFIG, "t", HERE)
    report = Simulation(config, catalog, parse_workload(text), parse_devices(text)).run(until=120)
    [item] = [u for u in report["unschedulable"] if u["pod"] == "default/train"]
    assert "cannot allocate devices for default/train-gpu" in item["reason"]


def test_pods_with_extended_gpu_requests_keep_working(catalog):
    config, _ = parse_config(CONFIG, "t", HERE)
    text = "pods:\n  - name: old\n    pod: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}\n"
    sim = Simulation(config, catalog, parse_workload(text), parse_devices(text))
    assert sim.run(until=120)["pods"]["bound"] == 1
    [node] = sim.controller.state.nodes.values()
    assert node.instance_type == cheapest(catalog, Resources.parse({"nvidia.com/gpu": 1}), lambda t: True)
