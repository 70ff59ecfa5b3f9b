"""VPC CNI prefix delegation (``nodes.prefixDelegation``): more pods per node, planned for and
given to each kubelet, as EKS's max-pods calculator counts them."""

from __future__ import annotations

import base64
from pathlib import Path

import boto3
import pytest
from aws_helpers import REGION, aws_cloud, moto_env

from cloud.base import BootRequest
from cloud.catalog import Catalog
from nodemanager.config import parse_config
from nodemanager.config.schema import NodeDefaults
from nodemanager.model import CapacityType, Pod, Resources
from nodemanager.model.instance_type import MIB, prefix_max_pods
from nodemanager.scaler import BindingNodeScaler, ClusterSnapshot, ScalerSettings


@pytest.mark.parametrize(
    ("enis", "ipv4", "vcpu", "pods"),
    [
        (2, 2, 2, 34),  # t3.nano: 4 without
        (3, 10, 2, 110),  # m5.large: 29 without; capped below 30 vCPU
        (4, 15, 29, 110),
        (4, 15, 30, 250),  # from 30 vCPU the cap is 250
        (8, 30, 32, 250),  # m5.8xlarge
        (1, 2, 64, 18),
        (0, 0, 4, None),  # not known: the type keeps its limit
    ],
)
def test_the_pod_limit_is_eks_max_pods_calculators(enis, ipv4, vcpu, pods):
    assert prefix_max_pods(enis, ipv4, vcpu) == pods


def test_the_bundled_catalog_knows_every_types_enis_and_a_prefix_catalog_raises_the_limits():
    listed = Catalog.bundled()
    assert all(t.enis > 0 and t.ipv4_per_eni > 1 for t in listed)
    prefixed = listed.with_prefix_delegation()
    assert (listed["m5.large"].max_pods, prefixed["m5.large"].max_pods) == (29, 110)
    assert (listed["t3.nano"].max_pods, prefixed["t3.nano"].max_pods) == (4, 34)
    assert prefixed["m5.8xlarge"].max_pods == 250
    # the kubelet reserves 11 MiB more memory per pod it may run
    assert listed["m5.large"].allocatable.memory - prefixed["m5.large"].allocatable.memory == 11 * MIB * (110 - 29)
    assert prefixed["m5.large"].allocatable.pods == 110
    refreshed = prefixed.with_prices({"m5.large": 0.5}, {}, "refreshed")
    assert refreshed["m5.large"].max_pods == 110  # fresher prices keep the limit


def test_the_setting_reaches_the_catalog_and_the_plan(tmp_path: Path):
    text = "nodes: {prefixDelegation: %s}\npools:\n  - {name: small, instanceTypes: [m5.large]}\n"
    plain, listed = parse_config(text % "false", "provider.yaml", tmp_path)
    prefixed, catalog = parse_config(text % "true", "provider.yaml", tmp_path)
    assert (listed["m5.large"].max_pods, catalog["m5.large"].max_pods) == (29, 110)
    pods = tuple(Pod("default", f"p{i}", f"u{i}", Resources.parse({"cpu": "10m", "memory": "16Mi"}), created_at=float(i)) for i in range(60))

    def nodes(config, catalog) -> int:
        settings = ScalerSettings(tuple(config.pools), NodeDefaults(default_instance_type="m5.large"))
        return len(BindingNodeScaler(settings, catalog).compute(ClusterSnapshot(pods, ()), 0.0).start)

    assert nodes(plain, listed) == 3  # 29 pods a node
    assert nodes(prefixed, catalog) == 1


def test_each_kubelet_is_given_the_limit_the_plan_used(monkeypatch):
    from email import message_from_string

    from cloud.aws.settings import ImageFamily
    from nodemanager.config.cloud_schema import EksCluster

    eks = EksCluster(name="prod-east", endpoint="https://abc.gr7.us-east-1.eks.amazonaws.com", certificateAuthority="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==")
    with moto_env(monkeypatch):
        ec2 = boto3.client("ec2", region_name=REGION)
        cloud = aws_cloud(Catalog.bundled().with_prefix_delegation(), image_family=ImageFamily.AL2023, eks=eks)
        request = BootRequest("n1", "general", "m5.large", CapacityType.ON_DEMAND, "us-east-1a", "tok-1", 50 * 2**30, {"team": "web"})
        instance = cloud.boot(request)
        sent = base64.b64decode(ec2.describe_instance_attribute(InstanceId=instance.instance_id, Attribute="userData")["UserData"]["Value"]).decode()
    [part] = [p for p in message_from_string(sent).walk() if not p.is_multipart()]
    assert "maxPods: 110" in part.get_payload()
