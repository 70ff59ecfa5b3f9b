"""The controller booting through the EC2 provider on moto, with faults on the real client."""

from __future__ import annotations

import pytest
from aws_helpers import aws_cloud as make_cloud
from aws_helpers import default_subnets, error_reply, inject, moto_env, throttle_share
from harness import Harness, arrive

from nodemanager.config.schema import BootImageSpec, Pool
from nodemanager.model import CapacityType, NodeState

OD = CapacityType.ON_DEMAND


@pytest.fixture
def aws(monkeypatch):
    with moto_env(monkeypatch):
        yield


def pool(**kw):
    return Pool(
        **{"name": "general", "instance_types": ["m5.large", "m5.xlarge", "c5.xlarge"], "capacity_types": [OD], "zones": ["us-east-1a", "us-east-1b"], **kw}
    )


def harness(catalog, pods, launch=None, **kw):
    clouds = []

    def factory(clock):
        cloud = make_cloud(catalog, clock=clock)
        clouds.append(cloud)
        return cloud

    h = Harness(pool(**({"launch": launch} if launch else {})), arrivals=pods, catalog=catalog, cloud=factory, register_delay=5, **kw)
    return h, clouds[0]


RUN_INSTANCES = {"method": "runInstances"}


def test_a_node_is_launched_by_one_fleet_call_offering_its_equivalents(aws, catalog):
    h, cloud = harness(catalog, [arrive("p1", cpu="500m")])
    calls = inject(cloud, "*", lambda p: None)
    h.run(1)
    [fleet] = [c for c in calls if c["operation"] == "CreateFleet"]
    assert not [c for c in calls if c["operation"] == "RunInstances"]
    offered = {(v, fleet[k.replace("InstanceType", "AvailabilityZone")]) for k, v in fleet.items() if k.endswith(".InstanceType")}
    assert offered == {("m5.large", "us-east-1a"), ("m5.large", "us-east-1b")}  # m5.large is the one type within 10% of the cheapest
    h.run(40)
    [live] = h.controller.state.nodes.values()
    assert (live.instance_type, live.zone, live.state) == ("m5.large", "us-east-1a", NodeState.CLAIMED)
    assert h.bound() == {"default/p1": live.name}


def test_capacity_error_for_one_offering_moves_to_the_next_cheapest(aws, catalog):
    h, cloud = harness(catalog, [arrive("p1", cpu="500m")], launch=RUN_INSTANCES)
    run_calls = inject(
        cloud,
        "RunInstances",
        lambda p: error_reply("InsufficientInstanceCapacity") if p["InstanceType"] == "m5.large" and p["SubnetId"] == default_subnets()["us-east-1a"] else None,
    )
    h.run(1)
    assert [(c["InstanceType"], c["SubnetId"]) for c in run_calls] == [("m5.large", default_subnets()["us-east-1a"])]
    assert [(u["instance_type"], u["zone"]) for u in h.controller.state.keeper.dump(h.clock.now())] == [("m5.large", "us-east-1a")]
    h.run(40)
    [live] = [n for n in h.controller.state.nodes.values() if n.state is not NodeState.TERMINATED]
    assert (live.instance_type, live.zone) == ("m5.large", "us-east-1b")  # the next cheapest offering
    assert h.bound() == {"default/p1": live.name}


def test_address_exhausted_subnet_falls_back_to_another_zone(aws, catalog):
    h, cloud = harness(catalog, [arrive("p1", cpu="500m")], launch=RUN_INSTANCES)
    exhausted = default_subnets()["us-east-1a"]
    inject(cloud, "RunInstances", lambda p: error_reply("InsufficientFreeAddressesInSubnet") if p["SubnetId"] == exhausted else None)
    h.run(1)
    assert {(u["instance_type"], u["zone"]) for u in h.controller.state.keeper.dump(h.clock.now())} == {("*", "us-east-1a")}
    h.run(40)
    [live] = [n for n in h.controller.state.nodes.values() if n.state is not NodeState.TERMINATED]
    assert live.zone == "us-east-1b"
    assert h.bound() == {"default/p1": live.name}


def test_thirty_percent_throttling_converges(aws, catalog):
    pods = [arrive(f"p{i}", cpu="1500m", memory="2Gi") for i in range(12)]
    h, cloud = harness(catalog, pods)
    inject(cloud, "*", throttle_share(0.3, seed=11))
    h.run(180)
    assert len(h.bound()) == 12
    launched = [i.node_name for i in make_cloud(catalog, controller_id="test").list_instances()]
    assert len(launched) == len(set(launched))  # nothing launched twice
    assert set(launched) == {n for n, node in h.controller.state.nodes.items() if node.state is not NodeState.TERMINATED}


def test_a_new_boot_image_replaces_the_nodes_launched_from_the_old_one(aws, catalog):
    """AMI drift on EC2: bootImageSpec now resolves to another image (as after a restart with
    a new provider.yaml); orphan GC's pass resolves it without a boot, and the node launched
    from the old image is replaced by one launched from the new."""
    h, cloud = harness(catalog, [arrive("p1", cpu="500m")])
    h.run(120)
    [first] = h.bound().values()
    old = h.controller.state.nodes[first].image_id
    assert old
    new = next(i["ImageId"] for i in cloud.ec2.describe_images(Owners=["amazon"])["Images"] if i["ImageId"] != old and i["Architecture"] == "x86_64")
    cloud.boot_image = cloud.images.spec = BootImageSpec(image_ids=[new]).for_cloud()
    cloud.images.forget()  # what a restart starts from
    h.run(900)
    [second] = h.bound().values()
    assert second != first
    assert h.controller.state.nodes[second].image_id == new
    assert h.controller.disruption.summary()["Drifted"]["nodes"] == 1
