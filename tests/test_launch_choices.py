"""The other offerings a new node's fleet launch may take (``scaler/launch_choices.py``):
each holds what the node was planned for, as the planned offering does."""

from __future__ import annotations

import dataclasses

from builders import OD, SPOT, pod, scaler

from cloud.catalog import Catalog
from nodemanager.config.schema import Limits, Pool
from nodemanager.model import CapacityPolicy, CapacityType, InstanceType, Pod
from nodemanager.scaler import ClusterSnapshot

ZONES = ("z-1a", "z-1b")
ZONE_KEY = "topology.kubernetes.io/zone"
WEB = {"matchLabels": {"app": "web"}}
TYPES = (
    InstanceType("a.large", 2, 8192, 0.100, spot_price=0.040, zones=ZONES, max_pods=29),
    InstanceType("b.large", 2, 8192, 0.105, spot_price=0.042, zones=ZONES, max_pods=29),  # 5% dearer
    InstanceType("m.xlarge", 4, 16384, 0.108, spot_price=0.043, zones=ZONES, max_pods=58),  # 8% dearer, twice the machine
    InstanceType("c.large", 2, 8192, 0.120, spot_price=0.048, zones=ZONES, max_pods=29),  # 20% dearer
    InstanceType("t.medium", 1, 4096, 0.050, spot_price=0.020, zones=ZONES, max_pods=17),  # too small for the pod
)
CATALOG = Catalog(TYPES, region="z-1")


def pool(**kw: object) -> Pool:
    return Pool(**{"name": "general", "instance_types": ["*.large", "*.xlarge", "*.medium"], "capacity_types": [OD], **kw})


def started(p: Pool, pods: list[Pod], **snapshot: object):
    decision = scaler(p, catalog=CATALOG).compute(ClusterSnapshot(tuple(pods), (), **snapshot), 100.0)
    [spec] = decision.start
    return spec


def offered(spec) -> list[tuple[str, str]]:
    return [(o.instance_type, o.zone) for o in spec.alternatives]


def test_a_node_is_offered_every_offering_within_the_tolerance_that_holds_its_pods_cheapest_first():
    spec = started(pool(), [pod("p", cpu="1500m", memory="2Gi")])
    assert (spec.instance_type, spec.zone) == ("a.large", "z-1a")
    assert offered(spec) == [("a.large", "z-1b"), ("b.large", "z-1a"), ("b.large", "z-1b"), ("m.xlarge", "z-1a"), ("m.xlarge", "z-1b")]
    b = spec.alternatives[1]
    assert b.labels["node.kubernetes.io/instance-type"] == "b.large"
    assert b.labels["topology.kubernetes.io/zone"] == "z-1a"
    assert "kubernetes.io/hostname" not in b.labels  # the node's own name adds it
    assert b.allocatable == CATALOG["b.large"].allocatable
    assert [o.price for o in spec.alternatives] == sorted(o.price for o in spec.alternatives)


def test_the_tolerance_and_the_count_are_the_pools():
    wide = started(pool(launch={"priceTolerance": 0.25}), [pod("p", cpu="1500m", memory="2Gi")])
    assert ("c.large", "z-1a") in offered(wide)
    few = started(pool(launch={"maxOfferings": 3}), [pod("p", cpu="1500m", memory="2Gi")])
    assert offered(few) == [("a.large", "z-1b"), ("b.large", "z-1a")]
    none = started(pool(launch={"priceTolerance": 0}), [pod("p", cpu="1500m", memory="2Gi")])
    assert offered(none) == [("a.large", "z-1b")]  # the same price in another zone


def test_run_instances_pools_offer_nothing_else():
    assert started(pool(launch={"method": "runInstances"}), [pod("p", cpu="1500m")]).alternatives == ()


def test_a_pod_that_keeps_apart_from_others_keeps_its_nodes_zone():
    manifest = {
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": WEB}],
        },
    }
    spec = started(pool(), [Pod.from_manifest(manifest)])
    assert {zone for _, zone in offered(spec)} == {spec.zone}
    assert offered(spec) == [("b.large", spec.zone), ("m.xlarge", spec.zone)]


def test_what_the_pods_select_limits_the_offerings():
    spec = started(pool(), [pod("p", cpu="1500m", selector={"node.kubernetes.io/instance-type": "a.large"})])
    assert offered(spec) == [("a.large", "z-1b")]
    zonal = started(pool(), [pod("p", cpu="1500m", selector={"topology.kubernetes.io/zone": "z-1b"})])
    assert {zone for _, zone in offered(zonal)} == {"z-1b"}


def test_under_limits_no_offering_is_more_machine_than_planned():
    spec = started(pool(limits=Limits(cpu="64")), [pod("p", cpu="1500m")])
    assert "m.xlarge" not in {t for t, _ in offered(spec)}
    assert offered(spec) == [("a.large", "z-1b"), ("b.large", "z-1a"), ("b.large", "z-1b")]


def test_a_spot_node_is_offered_spot_only():
    spec = started(pool(capacity_types=[OD, SPOT]), [pod("p", cpu="1500m", policy=CapacityPolicy.SPOT)])
    assert spec.capacity_type is CapacityType.SPOT
    assert ("b.large", "z-1a") in offered(spec)
    assert all(o.price < 0.05 for o in spec.alternatives)  # spot prices


def test_an_offering_marked_unavailable_is_not_offered():
    spec = started(pool(), [pod("p", cpu="1500m")], unavailable={("b.large", OD, "z-1a"): 500.0})
    assert ("b.large", "z-1a") not in offered(spec)
    assert ("b.large", "z-1b") in offered(spec)


def test_a_consolidations_replacement_is_offered_nothing_dearer():
    spec = started(pool(), [pod("p", cpu="1500m"), pod("q", cpu="200m")], one_new_node=True)
    assert all(o.price <= spec.price for o in spec.alternatives)


def test_every_offering_holds_everything_the_node_was_planned_for():
    pods = [dataclasses.replace(pod(f"p{i}", cpu="500m", memory="1Gi"), created_at=float(i)) for i in range(3)]
    spec = started(pool(), pods)
    need = 3 * 500
    for option in spec.alternatives:
        assert option.allocatable.cpu >= need
        assert option.allocatable.pods >= len(spec.pods)
