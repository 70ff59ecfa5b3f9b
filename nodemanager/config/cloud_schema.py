"""provider.yaml's ``cloud`` block: the simulated cloud, or EC2 (``cloud.aws``); each builds
the plain settings its cloud takes (``for_cloud``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from cloud.aws import settings as cloud_aws
from cloud.aws.settings import USER_DATA_BYTES, ImageFamily, family_of
from nodemanager.config.blocks import MAX_TAGS, OWN_TAGS, Model, only_chosen_block
from nodemanager.config.durations import Duration

# --- cloud ------------------------------------------------------------------------------


class SimulatedCloud(Model):
    """The in-memory cloud (simulation, demos, tests)."""

    boot_delay: Duration = 30.0
    """Launch to `running`: the instance is `pending` (and not billed) until then."""
    seed: int = 0
    """Seeds every injected failure and interruption."""
    capacity: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    """`"type/capacity-type/zone"` glob → the most live instances of each matching offering (`0`: always out of capacity)."""
    throttle_rate: float = Field(default=0.0, ge=0, le=1)
    """Share of API calls answered "slow down" (0–1)."""
    instance_death_per_hour: float = Field(default=0.0, ge=0)
    """Chance per hour of a running instance dying."""
    spot_interruption_per_hour: float = Field(default=0.0, ge=0)
    """Chance per hour of a running spot instance being reclaimed; each is warned of two minutes ahead on the simulated interruption queue."""


class MetadataOptions(Model):
    """The instance metadata service of nodes (Karpenter's EC2NodeClass metadataOptions and
    defaults): IMDSv2 only, and a response hop limit of 1, so a pod (one hop further than the
    node) cannot read the node role's credentials."""

    http_endpoint: Literal["enabled", "disabled"] = "enabled"
    """`enabled` or `disabled`: whether the node answers instance metadata at all."""
    http_tokens: Literal["required", "optional"] = "required"
    """`required` (IMDSv2 only) or `optional`."""
    http_put_response_hop_limit: int = Field(default=1, ge=1, le=64)
    """1–64. One hop keeps pods (one hop further than the node) from reading the node role's credentials; raise it to 2 only for pods that must reach IMDS."""


class RootVolume(Model):
    """The root EBS volume of nodes (its size is ``nodes.volumeSize``), encrypted by default."""

    volume_type: Literal["gp3", "gp2", "io1", "io2"] = "gp3"
    """`gp3`, `gp2`, `io1` or `io2`."""
    iops: int | None = Field(default=None, ge=100, le=256_000)
    """Provisioned IOPS (100–256,000): io1 and io2 need it; gp3 takes 3,000–16,000."""
    throughput: int | None = Field(default=None, ge=125, le=1000)
    """MiB/s (125–1,000), gp3 only."""
    encrypted: bool = True
    """Encrypt the volume."""
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID")
    """The KMS key for the volume (needs `encrypted: true`); default: the account's EBS key. A customer key needs `kms:CreateGrant`,
    `kms:GenerateDataKeyWithoutPlaintext` and `kms:Decrypt` on it for nodemanager's role."""

    @model_validator(mode="after")
    def _consistent(self) -> RootVolume:
        if self.throughput is not None and self.volume_type != "gp3":
            raise ValueError(f"throughput is a gp3 setting, not {self.volume_type}")
        if self.iops is None and self.volume_type in ("io1", "io2"):
            raise ValueError(f"{self.volume_type} needs iops")
        if self.kms_key_id and not self.encrypted:
            raise ValueError("kmsKeyID needs encrypted: true")
        return self


class EksCluster(Model):
    """The EKS cluster nodes join. Given its name alone, nodemanager reads the rest with
    `eks:DescribeCluster` at its first boot (the IAM policy grants it); given each value
    (`aws eks describe-cluster --name NAME` shows them), it makes no such call."""

    name: str = Field(pattern=r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
    """The cluster's name."""
    endpoint: str | None = Field(default=None, pattern=r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?$")
    """The API server's URL (`cluster.endpoint`); default: read from the cluster."""
    certificate_authority: str | None = Field(default=None, pattern=r"^[A-Za-z0-9+/=]{16,16384}$")
    """The cluster's CA, base64 (`cluster.certificateAuthority.data`); default: read from the cluster."""
    service_cidr: str | None = Field(default=None, alias="serviceCIDR")
    """The service network (`kubernetesNetworkConfig.serviceIpv4Cidr`); the kubelet's cluster DNS address derives from it.
    Default: read from the cluster when the endpoint or CA is too, else `10.100.0.0/16` (EKS's usual; a cluster in a
    10.0.0.0/8 VPC has 172.20.0.0/16: give it)."""

    @field_validator("service_cidr")
    @classmethod
    def _cidr(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            ipaddress.ip_network(value)
        except ValueError as exc:
            raise ValueError(f"not a CIDR: {exc}") from None
        return value

    def for_cloud(self) -> cloud_aws.EksCluster:
        return cloud_aws.EksCluster(self.name, self.endpoint, self.certificate_authority, self.service_cidr)


class AwsCloud(Model):
    """EC2 in one region. Credentials come only from the standard AWS chain."""

    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]$")
    """The AWS region, e.g. `us-east-1`."""
    endpoint_url: str | None = Field(default=None, alias="endpointURL")
    """Any EC2-compatible endpoint instead of AWS's (a test server, a VPC endpoint)."""
    subnets: list[str] = Field(default_factory=list)
    """Subnet ids, one zone each; several give zone fallback."""
    subnet_selector: dict[str, str] = Field(default_factory=dict)
    """Tag key → value selecting the subnets, instead of ids."""
    security_groups: list[str] = Field(default_factory=list)
    """Security group ids for the nodes."""
    instance_profile: str | None = None
    """The nodes' instance profile: a name, or an ARN."""
    user_data: SecretStr | None = None
    """User data template (see [Install on EKS](install-eks.md)); with an `imageFamily` other than `Custom`, your own steps, merged with what nodemanager
    writes. `{pool}`, `{labels}`, `{taints}`, `{capacity_type}`, `{controller_id}` are filled in; so are `{node_name}`, `{instance_type}` and
    `{zone}`, but they make every pool launch with `RunInstances` (a fleet's launch templates are shared). Secret: never shown in `/status`, logs
    or errors. At most 15 KiB."""
    tags: dict[str, str] = Field(default_factory=dict, max_length=MAX_TAGS - OWN_TAGS)
    """Tags added to every instance (EC2's rules: keys 1–128 characters not starting with `aws:`, values at most 256; at most 44)."""
    image_family: ImageFamily | None = None
    """`AL2023`, `AL2`, `Bottlerocket` or `Custom`: which user data nodemanager writes so a node joins its cluster (nodeadm NodeConfig, bootstrap.sh, TOML
    settings, or `userData` as written). Unset: the image's, by its name as AWS names EKS-optimized images (`amazon-eks-node-al2023-*`,
    `amazon-eks-node-1.31-*`, `bottlerocket-aws-k8s-*`), from `nodes.bootImageSpec`'s name filter or else from the image booted; `Custom` for
    any other image."""
    eks: EksCluster | None = None
    """The EKS cluster nodes join; needed by every `imageFamily` but `Custom`."""
    metadata_options: MetadataOptions = Field(default_factory=MetadataOptions)
    """The nodes' instance metadata service; the defaults are Karpenter's (IMDSv2 only, one hop)."""
    root_volume: RootVolume = Field(default_factory=RootVolume)
    """The nodes' root EBS volume (its size is `nodes.volumeSize`); ignored with a launch template, which carries its own."""
    detailed_monitoring: bool = False
    """CloudWatch metrics every minute (billed) instead of every five."""
    refresh_prices: bool = True
    """Fetch live prices (Pricing API, spot price history) every `loops.prices`."""
    interruption_queue: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,80}(\.fifo)?$")
    """Name of an SQS queue fed by EventBridge with EC2 spot interruption, rebalance, state-change and AWS Health events."""

    def for_cloud(self) -> cloud_aws.AwsSettings:
        """These settings as the AWS cloud takes them."""
        meta, volume = self.metadata_options, self.root_volume
        return cloud_aws.AwsSettings(
            region=self.region,
            endpoint_url=self.endpoint_url,
            subnets=tuple(self.subnets),
            subnet_selector=dict(self.subnet_selector),
            security_groups=tuple(self.security_groups),
            instance_profile=self.instance_profile,
            user_data=self.user_data.get_secret_value() if self.user_data is not None else None,
            tags=dict(self.tags),
            image_family=self.image_family,
            eks=self.eks.for_cloud() if self.eks else None,
            metadata_options=cloud_aws.MetadataOptions(meta.http_endpoint, meta.http_tokens, meta.http_put_response_hop_limit),
            root_volume=cloud_aws.RootVolume(volume.volume_type, volume.iops, volume.throughput, volume.encrypted, volume.kms_key_id),
            detailed_monitoring=self.detailed_monitoring,
            refresh_prices=self.refresh_prices,
            interruption_queue=self.interruption_queue,
        )

    @model_validator(mode="after")
    def _family(self) -> AwsCloud:
        if self.image_family not in (None, ImageFamily.CUSTOM) and self.eks is None:
            raise ValueError(f"imageFamily {self.image_family.value} needs eks: {{name}} (its endpoint, CA and service CIDR: given, or read from the cluster)")
        script = self.user_data.get_secret_value() if self.user_data else ""
        if self.image_family is ImageFamily.AL2023 and "/etc/eks/bootstrap.sh" in script:
            raise ValueError(
                "userData calls /etc/eks/bootstrap.sh, which AL2023 images do not have: nodemanager writes their NodeConfig; keep only your own steps"
            )
        return self

    @field_validator("user_data")
    @classmethod
    def _user_data_fits(cls, value: SecretStr | None) -> SecretStr | None:
        size = len(value.get_secret_value().encode()) if value is not None else 0
        if size > USER_DATA_BYTES - 1024:
            raise ValueError(f"{size:,} bytes, more than the {USER_DATA_BYTES - 1024:,} allowed (EC2 takes 16 KiB, less room for the values filled in)")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str]) -> dict[str, str]:
        for key, value in tags.items():
            if not 1 <= len(key) <= 128 or key.lower().startswith("aws:"):
                raise ValueError(f"tag key {key!r}: 1 to 128 characters, not starting with aws: (EC2's rules)")
            if len(value) > 256:
                raise ValueError(f"tag {key}: its value has {len(value)} characters, more than EC2's 256")
        return tags

    @model_validator(mode="before")
    @classmethod
    def _no_credentials(cls, data: object) -> object:
        if isinstance(data, dict):
            for key in ("accessKeyID", "secretAccessKey", "accessKeyId", "sessionToken"):
                if key in data:
                    raise ValueError(f"{key} is not accepted: credentials come only from the standard AWS chain (environment, shared files, instance profile)")
        return data


class CloudProvider(StrEnum):
    SIMULATED = "simulated"
    AWS = "aws"


class Cloud(Model):
    provider: CloudProvider = CloudProvider.SIMULATED
    """`simulated` or `aws`. A block for the other provider is an error."""
    simulated: SimulatedCloud | None = None
    """Settings of the simulated cloud."""
    aws: AwsCloud | None = None
    """Settings of the EC2 provider (required with `provider: aws`)."""

    @model_validator(mode="after")
    def _one_block(self) -> Cloud:
        only_chosen_block(self, "provider", {CloudProvider.SIMULATED: SimulatedCloud, CloudProvider.AWS: None})
        return self


def settle_image_family(aws: AwsCloud, name_filters: Sequence[str]) -> list[str]:
    """An unset ``imageFamily`` taken from the image name filter of ``nodes.bootImageSpec``
    where every pattern names one family of EKS-optimized images (left unset otherwise: the
    booted image's name decides); why nodes of that family could not join, if they could not."""
    families = {family_of(name) for name in name_filters}
    if aws.image_family is not None or len(families) != 1 or None in families:
        return []
    [family] = families
    problems = []
    if family is ImageFamily.AL2023 and aws.user_data is not None and "/etc/eks/bootstrap.sh" in aws.user_data.get_secret_value():
        problems.append(
            "cloud.aws.userData: calls /etc/eks/bootstrap.sh, but nodes.bootImageSpec selects AL2023 images, which join with nodeadm: "
            "nodemanager joins them from cloud.aws.eks; keep only your own steps in userData"
        )
    if aws.eks is None:
        problems.append(
            f"cloud.aws.eks: nodes.bootImageSpec selects {family.value} images (its name filter), which join their cluster with what nodemanager "
            f"writes from cloud.aws.eks: give eks: {{name: CLUSTER}}, or set imageFamily: Custom and join in your userData"
        )
    if not problems:
        object.__setattr__(aws, "image_family", family)
    return problems
