"""Fleet launches (``CreateFleet`` type instant) against moto, in process and as a server.

moto answers CreateFleet with the instance of the first override and never with an error
for an override (it models no capacity), so a fleet's per-override errors are tested with
botocore's Stubber, which checks the request and the answer against EC2's real API shapes.
"""

from __future__ import annotations

import base64
import os

import boto3
import pytest
from aws_helpers import REGION, aws_cloud, default_subnets, error_reply, inject, moto_env, moto_server
from botocore.stub import ANY, Stubber

from cloud.base import CONTROLLER_TAG, NODE_TAG, BootRequest
from cloud.errors import CloudError, InsufficientCapacity, LaunchRefused, QuotaExceeded, ZoneUnavailable
from nodemanager.model import CapacityType, LaunchOption, Resources

OD, SPOT = CapacityType.ON_DEMAND, CapacityType.SPOT
LABELS = {
    "nodemanager.io/pool": "general",
    "node.kubernetes.io/instance-type": "m5.large",
    "topology.kubernetes.io/zone": "us-east-1a",
    "kubernetes.io/hostname": "n1",
}


@pytest.fixture
def aws(monkeypatch):
    with moto_env(monkeypatch):
        yield boto3.client("ec2", region_name=REGION)


def option(itype: str, zone: str, price: float = 0.1) -> LaunchOption:
    return LaunchOption(itype, zone, price, Resources({"cpu": 2000}), {})


ALTERNATIVES = (option("m5.large", "us-east-1b"), option("m5a.large", "us-east-1a"), option("m5.xlarge", "us-east-1c"))


def fleet_request(name="n1", capacity=OD, alternatives=ALTERNATIVES, **kw) -> BootRequest:
    return BootRequest(name, "general", "m5.large", capacity, "us-east-1a", f"token-{name}", 50 * 2**30, LABELS, alternatives=alternatives, **kw)


def test_one_create_fleet_offers_every_offering_and_its_instance_is_the_nodes(aws, catalog):
    cloud = aws_cloud(catalog, tags={"team": "platform"})
    calls = inject(cloud, "*", lambda p: None)
    instance = cloud.boot(fleet_request())
    [fleet] = [c for c in calls if c["operation"] == "CreateFleet"]
    assert fleet["Type"] == "instant"
    assert fleet["ClientToken"] == "token-n1"
    assert fleet["TargetCapacitySpecification.TotalTargetCapacity"] == 1
    assert fleet["TargetCapacitySpecification.DefaultTargetCapacityType"] == "on-demand"
    assert fleet["OnDemandOptions.AllocationStrategy"] == "lowest-price"
    overrides = sorted(
        (fleet[f"LaunchTemplateConfigs.{i}.Overrides.{k}.InstanceType"], fleet[f"LaunchTemplateConfigs.{i}.Overrides.{k}.AvailabilityZone"])
        for i in (1, 2)
        for k in range(1, 5)
        if f"LaunchTemplateConfigs.{i}.Overrides.{k}.InstanceType" in fleet
    )
    assert overrides == sorted([("m5.large", "us-east-1a"), ("m5.large", "us-east-1b"), ("m5a.large", "us-east-1a"), ("m5.xlarge", "us-east-1c")])
    subnets = default_subnets()
    assert fleet["LaunchTemplateConfigs.1.Overrides.1.SubnetId"] == subnets["us-east-1a"]
    # moto launches the first override: the planned offering
    assert (instance.instance_type, instance.capacity_type, instance.zone, instance.refused) == ("m5.large", OD, "us-east-1a", ())
    record = aws.describe_instances(InstanceIds=[instance.instance_id])["Reservations"][0]["Instances"][0]
    tags = {t["Key"]: t["Value"] for t in record["Tags"]}
    assert tags[NODE_TAG] == "n1"
    assert tags[CONTROLLER_TAG] == "test"
    assert tags["team"] == "platform"
    assert record["SubnetId"] == subnets["us-east-1a"]
    assert instance.image_id == record["ImageId"]
    assert [i.instance_id for i in cloud.list_instances()] == [instance.instance_id]  # found by its tags, as every instance


def test_the_launch_template_is_made_once_holds_the_launch_settings_and_no_one_nodes_labels(aws, catalog):
    cloud = aws_cloud(catalog, user_data="#!/bin/bash\necho pool={pool}\n")
    calls = inject(cloud, "CreateLaunchTemplate", lambda p: None)
    cloud.boot(fleet_request("n1"))
    cloud.boot(fleet_request("n2"))
    [made] = calls  # one content for every offering and both nodes
    assert made["LaunchTemplateName"].startswith("nodemanager-test-")
    version = aws.describe_launch_template_versions(LaunchTemplateName=made["LaunchTemplateName"])["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert version["MetadataOptions"]["HttpTokens"] == "required"
    assert version["BlockDeviceMappings"][0]["Ebs"]["Encrypted"] is True
    assert "InstanceMarketOptions" not in version
    assert "ImageId" not in version
    assert base64.b64decode(version["UserData"]).decode() == "#!/bin/bash\necho pool=general\n"
    restarted = aws_cloud(catalog, user_data="#!/bin/bash\necho pool={pool}\n")  # another process of this controller: it exists already
    assert restarted.boot(fleet_request("n3")).instance_type == "m5.large"


def test_an_eks_join_gets_a_template_per_pod_limit_with_the_pools_labels_only(aws, catalog):
    from email import message_from_string

    from cloud.aws.settings import ImageFamily
    from nodemanager.config.cloud_schema import EksCluster

    eks = EksCluster(name="prod-east", endpoint="https://abc.gr7.us-east-1.eks.amazonaws.com", certificateAuthority="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==")
    cloud = aws_cloud(catalog, image_family=ImageFamily.AL2023, eks=eks)
    calls = inject(cloud, "CreateLaunchTemplate", lambda p: None)
    cloud.boot(fleet_request())
    configs = {}
    for call in calls:
        data = aws.describe_launch_template_versions(LaunchTemplateName=call["LaunchTemplateName"])["LaunchTemplateVersions"][0]["LaunchTemplateData"]
        [part] = [p for p in message_from_string(base64.b64decode(data["UserData"]).decode()).walk() if not p.is_multipart()]
        configs[call["LaunchTemplateName"]] = part.get_payload()
    assert len(configs) == 2  # m5.large and m5a.large hold 29 pods, m5.xlarge 58
    assert sorted("maxPods: 29" in c for c in configs.values()) == [False, True]
    for config in configs.values():
        assert "--node-labels=nodemanager.io/pool=general" in config
        assert "hostname" not in config
        assert "instance-type" not in config
        assert "us-east-1a" not in config


def test_a_spot_fleet_asks_for_spot_by_its_allocation_strategy(aws, catalog):
    cloud = aws_cloud(catalog)
    calls = inject(cloud, "CreateFleet", lambda p: None)
    instance = cloud.boot(fleet_request(capacity=SPOT, spot_strategy="capacity-optimized"))
    assert calls[0]["TargetCapacitySpecification.DefaultTargetCapacityType"] == "spot"
    assert calls[0]["SpotOptions.AllocationStrategy"] == "capacity-optimized"
    assert instance.capacity_type is SPOT
    assert aws.describe_instances(InstanceIds=[instance.instance_id])["Reservations"][0]["Instances"][0]["InstanceLifecycle"] == "spot"


def test_prioritized_on_demand_gives_the_planned_offering_the_first_priority(aws, catalog):
    cloud = aws_cloud(catalog)
    calls = inject(cloud, "CreateFleet", lambda p: None)
    cloud.boot(fleet_request(on_demand_strategy="prioritized"))
    fleet = calls[0]
    assert fleet["OnDemandOptions.AllocationStrategy"] == "prioritized"
    priorities = {
        (fleet[f"LaunchTemplateConfigs.{i}.Overrides.{k}.InstanceType"], fleet[f"LaunchTemplateConfigs.{i}.Overrides.{k}.AvailabilityZone"]): float(
            fleet[f"LaunchTemplateConfigs.{i}.Overrides.{k}.Priority"]
        )
        for i in (1, 2)
        for k in range(1, 5)
        if f"LaunchTemplateConfigs.{i}.Overrides.{k}.Priority" in fleet
    }
    assert priorities == {("m5.large", "us-east-1a"): 0.0, ("m5.large", "us-east-1b"): 1.0, ("m5a.large", "us-east-1a"): 2.0, ("m5.xlarge", "us-east-1c"): 3.0}


def test_a_repeated_boot_finds_the_instance_and_makes_no_second_fleet(aws, catalog):
    cloud = aws_cloud(catalog)
    calls = inject(cloud, "CreateFleet", lambda p: None)
    first = cloud.boot(fleet_request())
    assert cloud.boot(fleet_request()).instance_id == first.instance_id
    assert len(calls) == 1


# -- per-override errors: Stubber on EC2's shapes, after one real boot filled the caches --------


def _warm(aws, catalog):
    cloud = aws_cloud(catalog)
    cloud.boot(fleet_request("warm"))  # subnets, image and templates are now known
    return cloud, default_subnets()


def _fleet_error(itype, zone, subnet, code, message="injected"):
    overrides = {"InstanceType": itype, "AvailabilityZone": zone, "SubnetId": subnet}
    spec = {"LaunchTemplateName": "nodemanager-test-lt", "Version": "1"}
    return {
        "LaunchTemplateAndOverrides": {"LaunchTemplateSpecification": spec, "Overrides": overrides},
        "Lifecycle": "on-demand",
        "ErrorCode": code,
        "ErrorMessage": message,
    }


FLEET_KEYS = ("Type", "ClientToken", "LaunchTemplateConfigs", "TargetCapacitySpecification", "TagSpecifications", "OnDemandOptions")


def _stub_fleet(cloud, reply):
    stubber = Stubber(cloud.ec2)
    stubber.add_response("describe_instances", {"Reservations": []}, {"Filters": ANY, "MaxResults": 100})
    stubber.add_response("create_fleet", reply, dict.fromkeys(FLEET_KEYS, ANY))
    return stubber


def test_a_fleet_that_falls_back_returns_the_instance_it_got_and_the_offerings_it_could_not(aws, catalog):
    cloud, subnets = _warm(aws, catalog)
    reply = {
        "FleetId": "fleet-1",
        "Errors": [_fleet_error("m5.large", "us-east-1a", subnets["us-east-1a"], "InsufficientInstanceCapacity")],
        "Instances": [
            {
                "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "m5a.large", "AvailabilityZone": "us-east-1a", "SubnetId": subnets["us-east-1a"]}},
                "Lifecycle": "on-demand",
                "InstanceIds": ["i-0123456789abcdef0"],
                "InstanceType": "m5a.large",
            }
        ],
    }
    with _stub_fleet(cloud, reply) as stubber:
        instance = cloud.boot(fleet_request())
        stubber.assert_no_pending_responses()
    assert (instance.instance_id, instance.instance_type, instance.zone) == ("i-0123456789abcdef0", "m5a.large", "us-east-1a")
    [refused] = instance.refused
    assert isinstance(refused, InsufficientCapacity)
    assert (refused.instance_type, refused.capacity_type, refused.zone) == ("m5.large", OD, "us-east-1a")


def test_a_fleet_that_fell_back_from_a_zone_out_of_addresses_reports_the_zone_and_logs_a_quota(aws, catalog, caplog):
    cloud, subnets = _warm(aws, catalog)
    reply = {
        "Errors": [
            _fleet_error("m5.large", "us-east-1a", subnets["us-east-1a"], "InsufficientFreeAddressesInSubnet"),
            _fleet_error("m5.xlarge", "us-east-1c", subnets["us-east-1c"], "VcpuLimitExceeded"),
        ],
        "Instances": [
            {
                "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1b", "SubnetId": subnets["us-east-1b"]}},
                "InstanceIds": ["i-0bbbbbbbbbbbbbbb1"],
                "InstanceType": "m5.large",
            }
        ],
    }
    with _stub_fleet(cloud, reply):
        instance = cloud.boot(fleet_request())
    [refused] = instance.refused  # us-east-1a has one subnet: the zone is out, and the scaler hears of it
    assert isinstance(refused, ZoneUnavailable)
    assert refused.zone == "us-east-1a"
    assert "VcpuLimitExceeded" in caplog.text  # a quota says nothing of one offering: logged, not marked


def test_a_fleet_that_launches_nothing_says_why_for_each_offering(aws, catalog):
    cloud, subnets = _warm(aws, catalog)
    reply = {
        "FleetId": "fleet-2",
        "Errors": [
            _fleet_error("m5.large", "us-east-1a", subnets["us-east-1a"], "InsufficientInstanceCapacity"),
            _fleet_error("m5.large", "us-east-1b", subnets["us-east-1b"], "UnfulfillableCapacity"),
            _fleet_error("m5.xlarge", "us-east-1c", subnets["us-east-1c"], "VcpuLimitExceeded"),
            _fleet_error("m5a.large", "us-east-1a", subnets["us-east-1a"], "InsufficientFreeAddressesInSubnet"),
        ],
        "Instances": [],
    }
    with _stub_fleet(cloud, reply), pytest.raises(LaunchRefused) as raised:
        cloud.boot(fleet_request())
    kinds = [type(r) for r in raised.value.refusals]
    assert kinds == [InsufficientCapacity, InsufficientCapacity, QuotaExceeded, ZoneUnavailable]  # us-east-1a has one subnet: the zone is out
    assert raised.value.refusals[3].zone == "us-east-1a"
    # the exhausted subnet is skipped next time: us-east-1a is offered no more
    calls = inject(cloud, "CreateFleet", lambda p: None)
    cloud.boot(fleet_request("n9"))
    offered = {v for k, v in calls[0].items() if k.endswith(".AvailabilityZone")}
    assert offered == {"us-east-1b", "us-east-1c"}


def test_a_subnet_out_of_addresses_is_passed_over_and_the_fleet_asked_again_with_the_zones_other(aws, catalog):
    vpc = aws.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    extra = aws.create_subnet(VpcId=vpc, CidrBlock="172.31.96.0/20", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    aws.modify_subnet_attribute(SubnetId=extra, MapPublicIpOnLaunch={"Value": True})
    cloud = aws_cloud(catalog, subnets=[*default_subnets().values(), extra])
    cloud.boot(fleet_request("warm"))
    first = cloud.subnets.usable("us-east-1a")[0]
    launched = {
        "Instances": [
            {
                "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SubnetId": "subnet-x"}},
                "InstanceIds": ["i-0aaaaaaaaaaaaaaa1"],
                "InstanceType": "m5.large",
            }
        ]
    }
    with _stub_fleet(cloud, {"Errors": [_fleet_error("m5.large", "us-east-1a", first, "InsufficientFreeAddressesInSubnet")], "Instances": []}) as stubber:
        stubber.add_response("create_fleet", launched, dict.fromkeys(FLEET_KEYS, ANY))
        instance = cloud.boot(fleet_request())
        stubber.assert_no_pending_responses()
    assert instance.instance_id == "i-0aaaaaaaaaaaaaaa1"
    both = {default_subnets()["us-east-1a"], extra}
    assert cloud.subnets.usable("us-east-1a") == sorted(both - {first})  # the zone's other subnet, for a while


def test_a_launch_template_deleted_behind_our_back_is_made_again_within_the_boot(aws, catalog):
    cloud, _ = _warm(aws, catalog)
    for template in aws.describe_launch_templates()["LaunchTemplates"]:
        aws.delete_launch_template(LaunchTemplateName=template["LaunchTemplateName"])
    # moto launches from a deleted template's data it kept; EC2 answers with this code
    missing = iter([error_reply("InvalidLaunchTemplateName.NotFoundException")])
    calls = inject(cloud, "*", lambda p: next(missing, None) if p["operation"] == "CreateFleet" else None)
    assert cloud.boot(fleet_request("n1")).instance_type == "m5.large"
    assert [c["operation"] for c in calls if c["operation"].startswith("Create")] == ["CreateFleet", "CreateLaunchTemplate", "CreateFleet"]
    assert len(aws.describe_launch_templates()["LaunchTemplates"]) == 1


def test_a_gone_template_twice_in_a_row_fails_the_boot_saying_so(aws, catalog):
    cloud, _ = _warm(aws, catalog)
    inject(cloud, "CreateFleet", lambda p: error_reply("InvalidLaunchTemplateName.NotFoundException"))
    with pytest.raises(CloudError, match="NotFoundException"):
        cloud.boot(fleet_request("n1"))


# -- a moto server on 127.0.0.1 ------------------------------------------------------------------


def test_fleet_launches_against_a_moto_server(catalog, monkeypatch):
    with moto_server(monkeypatch) as endpoint:
        cloud = aws_cloud(catalog, endpoint_url=endpoint)
        first = cloud.boot(fleet_request("n1"))
        second = cloud.boot(fleet_request("n2", capacity=SPOT))
        assert (first.capacity_type, second.capacity_type) == (OD, SPOT)
        assert sorted(i.node_name for i in cloud.list_instances()) == ["n1", "n2"]
        assert cloud.boot(fleet_request("n1")).instance_id == first.instance_id  # found by its tags over HTTP too
        cloud.terminate([first.instance_id, second.instance_id])
        assert cloud.list_instances() == []
    assert "AWS_PROFILE" not in os.environ
