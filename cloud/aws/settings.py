"""What the AWS cloud is given, as plain values: the configuration (provider.yaml's
``cloud.aws`` and ``nodes.bootImageSpec``, validated there) builds these, so the cloud edge
depends on no configuration schema. The defaults and the checks live in the schema."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

DEFAULT_SERVICE_CIDR = "10.100.0.0/16"  # EKS's usual service network, where the cluster says none
USER_DATA_BYTES = 16 * 1024  # EC2's limit on user data, before base64


class ImageFamily(StrEnum):
    """How a node of the image joins its cluster (Karpenter's AMI families)."""

    AL2023 = "AL2023"  # nodeadm reads a NodeConfig from MIME multipart user data
    AL2 = "AL2"  # /etc/eks/bootstrap.sh
    BOTTLEROCKET = "Bottlerocket"  # TOML settings
    CUSTOM = "Custom"  # cloud.aws.userData as written, placeholders filled in


_AL2_NAME = re.compile(r"amazon-eks-(gpu-|arm64-)?node-\d")


def family_of(image_name: str) -> ImageFamily | None:
    """The family of an EKS-optimized image by its name (or a name filter's glob), as AWS
    names them: ``amazon-eks-node-al2023-*``, ``amazon-eks-node-1.31-*`` (and its ``gpu-``
    and ``arm64-`` kin), ``bottlerocket-aws-k8s-*``; None for any other image."""
    name = image_name.lower()
    if name.startswith("bottlerocket-aws-k8s"):
        return ImageFamily.BOTTLEROCKET
    if name.startswith("amazon-eks-node-al2023"):
        return ImageFamily.AL2023
    if _AL2_NAME.match(name):
        return ImageFamily.AL2
    return None


@dataclass(frozen=True)
class EksCluster:
    """The EKS cluster nodes join; what is not given is read with DescribeCluster."""

    name: str
    endpoint: str | None = None
    certificate_authority: str | None = None  # base64
    service_cidr: str | None = None

    @property
    def complete(self) -> bool:
        """Whether every value a node needs is given (no DescribeCluster call needed)."""
        return self.endpoint is not None and self.certificate_authority is not None


@dataclass(frozen=True)
class MetadataOptions:
    http_endpoint: str
    http_tokens: str
    http_put_response_hop_limit: int


@dataclass(frozen=True)
class RootVolume:
    volume_type: str
    iops: int | None
    throughput: int | None
    encrypted: bool
    kms_key_id: str | None


@dataclass(frozen=True)
class BootImage:
    """Explicit image ids, or the newest image of these owners matching these filters, or a
    launch template (none of them: the cloud cannot boot)."""

    image_ids: tuple[str, ...] = ()
    owners: tuple[str, ...] = ()
    filters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    launch_template: str | None = None


@dataclass(frozen=True)
class AwsSettings:
    region: str
    endpoint_url: str | None
    subnets: tuple[str, ...]
    subnet_selector: Mapping[str, str]
    security_groups: tuple[str, ...]
    instance_profile: str | None
    user_data: str | None = field(repr=False)  # secret: never in a repr, a log or an error
    tags: Mapping[str, str]
    image_family: ImageFamily | None  # None: the booted image's, by its name (``family_of``), else Custom
    eks: EksCluster | None
    metadata_options: MetadataOptions
    root_volume: RootVolume
    detailed_monitoring: bool
    refresh_prices: bool
    interruption_queue: str | None
