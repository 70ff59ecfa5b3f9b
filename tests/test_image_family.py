"""The image family taken from the image when provider.yaml does not set it: from the name
filter of ``nodes.bootImageSpec``, else from the name of the image booted."""

from __future__ import annotations

import base64
from email import message_from_string

import boto3
import pytest
from aws_helpers import REGION, aws_cloud, inject, moto_env, ok_reply

from cloud.aws.settings import ImageFamily, family_of
from cloud.base import BootRequest
from cloud.errors import CloudError
from nodemanager.config import parse_config
from nodemanager.config.cloud_schema import EksCluster
from nodemanager.config.schema import BootImageSpec
from nodemanager.errors import ConfigError
from nodemanager.model import CapacityType

EKS = EksCluster(name="prod-east", endpoint="https://abc.gr7.us-east-1.eks.amazonaws.com", certificateAuthority="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==")


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("amazon-eks-node-al2023-x86_64-standard-1.31-v20250101", ImageFamily.AL2023),
        ("amazon-eks-node-al2023-arm64-nvidia-1.31-*", ImageFamily.AL2023),
        ("amazon-eks-node-1.31-v20250101", ImageFamily.AL2),
        ("amazon-eks-gpu-node-1.30-*", ImageFamily.AL2),
        ("amazon-eks-arm64-node-1.29-v20240101", ImageFamily.AL2),
        ("bottlerocket-aws-k8s-1.31-x86_64-v1.26.0-*", ImageFamily.BOTTLEROCKET),
        ("amzn2-ami-hvm-2.0.20250101-x86_64-gp2", None),
        ("my-golden-image-*", None),
    ],
)
def test_the_family_of_an_eks_optimized_image_by_its_name(name, family):
    assert family_of(name) is family


CONFIG = """
controllerId: c
cloud: {{provider: aws, aws: {{region: us-east-1{eks}}}}}
nodes: {{bootImageSpec: {{owners: ["602401143452"], filters: {{name: ["{name}"]}}}}}}
pools: [{{name: general}}]
"""


def test_an_unset_family_is_the_name_filters_and_such_nodes_need_the_cluster(tmp_path):
    eks = ", eks: {name: prod-east}"
    config, _ = parse_config(CONFIG.format(eks=eks, name="amazon-eks-node-al2023-x86_64-standard-1.31-*"), "provider.yaml", tmp_path)
    assert config.cloud.aws.image_family is ImageFamily.AL2023
    config, _ = parse_config(CONFIG.format(eks=eks, name="bottlerocket-aws-k8s-1.31-x86_64-*"), "provider.yaml", tmp_path)
    assert config.cloud.aws.image_family is ImageFamily.BOTTLEROCKET
    config, _ = parse_config(CONFIG.format(eks="", name="my-golden-image-*"), "provider.yaml", tmp_path)
    assert config.cloud.aws.image_family is None  # the booted image's name decides
    with pytest.raises(ConfigError, match=r"cloud\.aws\.eks: nodes\.bootImageSpec selects AL2 images"):
        parse_config(CONFIG.format(eks="", name="amazon-eks-node-1.31-*"), "provider.yaml", tmp_path)


def _named(cloud, name):
    """DescribeImages answers with one of moto's images, under an EKS-optimized name."""
    ami = boto3.client("ec2", region_name=REGION).describe_images(Owners=["amazon"])["Images"][0]
    image = {"ImageId": ami["ImageId"], "Name": name, "CreationDate": "2026-01-01T00:00:00.000Z", "Architecture": "x86_64", "RootDeviceName": "/dev/xvda"}
    inject(cloud, "DescribeImages", lambda p: (ok_reply(), {"Images": [image], "ResponseMetadata": {"HTTPStatusCode": 200}}))


def _request():
    return BootRequest("n1", "general", "m5.large", CapacityType.ON_DEMAND, "us-east-1a", "tok-1", 50 * 2**30, {"team": "web"})


def test_an_unset_family_is_the_booted_images_and_its_user_data_joins_the_cluster(monkeypatch, catalog):
    with moto_env(monkeypatch):
        cloud = aws_cloud(catalog, boot_image=BootImageSpec(image_ids=["ami-any"]), eks=EKS)
        _named(cloud, "amazon-eks-node-al2023-x86_64-standard-1.31-v20260101")
        instance = cloud.boot(_request())
        ec2 = boto3.client("ec2", region_name=REGION)
        sent = base64.b64decode(ec2.describe_instance_attribute(InstanceId=instance.instance_id, Attribute="userData")["UserData"]["Value"]).decode()
    [part] = [p for p in message_from_string(sent).walk() if not p.is_multipart()]
    assert part.get_content_type() == "application/node.eks.aws"
    assert "name: prod-east" in part.get_payload()


def test_an_eks_optimized_image_booted_without_the_cluster_is_refused_saying_why(monkeypatch, catalog):
    with moto_env(monkeypatch):
        cloud = aws_cloud(catalog, boot_image=BootImageSpec(image_ids=["ami-any"]))
        _named(cloud, "amazon-eks-node-1.31-v20260101")
        with pytest.raises(CloudError, match=r"EKS-optimized AL2 image, but cloud\.aws\.eks is not set"):
            cloud.boot(_request())
        assert cloud.list_instances() == []  # nothing launched that could not join


def test_check_config_says_how_nodes_join(tmp_path, capsys):
    from nodemanager.cli import main

    path = tmp_path / "provider.yaml"
    path.write_text(CONFIG.format(eks=", eks: {name: prod-east}", name="bottlerocket-aws-k8s-1.31-x86_64-*"))
    assert main(["check-config", str(path)]) == 0
    assert "nodes join as image family Bottlerocket (from nodes.bootImageSpec's name filter)" in capsys.readouterr().out
    path.write_text(CONFIG.format(eks="", name="amazon-eks-node-al2023-x86_64-standard-1.31-*"))
    assert main(["check-config", str(path)]) == 2
    assert "cloud.aws.eks: nodes.bootImageSpec selects AL2023 images" in capsys.readouterr().err
