"""What the AWS cloud is given, as plain values: the configuration (provider.yaml's
``cloud.aws`` and ``nodes.bootImageSpec``, validated there) builds these, so the cloud edge
depends on no configuration schema. The defaults and the checks live in the schema."""

from __future__ import annotations

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
    image_family: ImageFamily
    eks: EksCluster | None
    metadata_options: MetadataOptions
    root_volume: RootVolume
    detailed_monitoring: bool
    refresh_prices: bool
    interruption_queue: str | None
