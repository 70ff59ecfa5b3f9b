"""The provider.yaml schema. Every field has a default with its reason, or is required.

Keys are camelCase in YAML (``bootTimeout``) and snake_case in Python (``boot_timeout``).
Unknown keys are errors. Values that could be secret (user data) are ``SecretStr`` and
never appear in ``repr`` or in dumps.
"""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, SecretStr, field_validator, model_validator
from pydantic.alias_generators import to_camel

from nodemanager.config.durations import Duration
from nodemanager.errors import InvalidQuantity
from nodemanager.model import CapacityType, TaintEffect, format_quantity, resource_amount
from nodemanager.model.pdb import scaled
from nodemanager.noderesource.strategy import ColocationStrategy
from nodemanager.scheduling.profile import DEFAULT_PROFILE, Profile


def _amount_of(resource: str) -> BeforeValidator:
    def parse(value: object) -> int:
        try:
            return resource_amount(resource, value, resource)
        except InvalidQuantity as exc:
            raise ValueError(f"expected {exc.expected}, got {value!r}") from None

    return BeforeValidator(parse)


#: Milli-cores, written as ``4``, ``500m`` or ``1.5``.
CpuQuantity = Annotated[int, _amount_of("cpu"), PlainSerializer(lambda v: format_quantity("cpu", v), return_type=str)]
#: Bytes, written as ``20Gi``, ``512Mi`` or ``1G``.
ByteQuantity = Annotated[int, _amount_of("memory"), PlainSerializer(lambda v: format_quantity("memory", v), return_type=str)]

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
MAX_COUNT = 10_000  # standby nodes per entry: more is a typo, and each is work per loop
MAX_STANDBY = 10_000  # standby nodes across every entry of every pool
MAX_POOLS = 100
MAX_PATTERNS = 500  # instance type names or globs per list
MIN_INTERVAL = 0.1  # seconds: a loop run more often only burns a core
MIN_BOOT_TIMEOUT = 30.0  # seconds: no instance boots and registers faster
USER_DATA_BYTES = 16 * 1024  # EC2's limit on user data, before base64
MAX_TAGS = 50  # EC2's limit on tags per instance, nodemanager's own included
OWN_TAGS = 6  # the tags nodemanager adds (Name, controller, node, pool, taints, startup taints)
# Kubernetes' qualified names (label and taint keys) and label values.
_LABEL_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
_QUALIFIED = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^{_LABEL_NAME}?$")


def check_label(key: str, value: str) -> None:
    """Kubernetes' rules for a label (and a taint): a qualified key, a value of at most 63
    characters of letters, digits, ``-``, ``_`` and ``.``. Values that pass them need no
    quoting where a user-data template pastes them into a shell command."""
    if not _QUALIFIED.match(key):
        raise ValueError(f"{key!r} is not a valid label key (an optional DNS-subdomain prefix and '/', then at most 63 letters, digits, '-', '_', '.')")
    if not _LABEL_VALUE.match(value):
        raise ValueError(f"{key}: {value!r} is not a valid label value (at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric)")


MAX_BOOTS = 100_000  # boots one decision may start


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True, use_enum_values=False, use_attribute_docstrings=True
    )


def _only_chosen_block(model: BaseModel, selector: str, blocks: dict[StrEnum, type[BaseModel] | None]) -> None:
    """The block named by ``model.<selector>`` may be given (or is defaulted); the others
    may not. A block without a default (``None``) must be given."""
    chosen = getattr(model, selector)
    for kind in blocks:
        if kind is not chosen and getattr(model, kind.value) is not None:
            raise ValueError(f"has a {kind.value!r} block but {selector} is {chosen.value!r}")
    if getattr(model, chosen.value) is None:
        default = blocks[chosen]
        if default is None:
            raise ValueError(f"{selector} is {chosen.value!r} but there is no {chosen.value!r} block")
        object.__setattr__(model, chosen.value, default())


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


class ImageFamily(StrEnum):
    """How a node of the image joins its cluster (Karpenter's AMI families)."""

    AL2023 = "AL2023"  # nodeadm reads a NodeConfig from MIME multipart user data
    AL2 = "AL2"  # /etc/eks/bootstrap.sh
    BOTTLEROCKET = "Bottlerocket"  # TOML settings
    CUSTOM = "Custom"  # cloud.aws.userData as written, placeholders filled in


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

    @property
    def complete(self) -> bool:
        """Whether every value a node needs is given (no DescribeCluster call needed)."""
        return self.endpoint is not None and self.certificate_authority is not None


DEFAULT_SERVICE_CIDR = "10.100.0.0/16"


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
    writes. Secret: never shown in `/status`, logs or errors. At most 15 KiB."""
    tags: dict[str, str] = Field(default_factory=dict, max_length=MAX_TAGS - OWN_TAGS)
    """Tags added to every instance (EC2's rules: keys 1–128 characters not starting with `aws:`, values at most 256; at most 44)."""
    image_family: ImageFamily = ImageFamily.CUSTOM
    """`AL2023`, `AL2`, `Bottlerocket` or `Custom`: which user data nodemanager writes so a node joins its cluster (nodeadm NodeConfig, bootstrap.sh, TOML
    settings, or `userData` as written)."""
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

    @model_validator(mode="after")
    def _family(self) -> AwsCloud:
        if self.image_family is not ImageFamily.CUSTOM and self.eks is None:
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
        _only_chosen_block(self, "provider", {CloudProvider.SIMULATED: SimulatedCloud, CloudProvider.AWS: None})
        return self


# --- cluster ----------------------------------------------------------------------------


class SimulatedCluster(Model):
    """A cluster in memory that registers booted instances as nodes and plays a workload."""

    workload: str | None = None
    """Workload file, relative to the configuration file; none: no pods."""
    register_delay: Duration = 10.0
    """Running instance to Ready node."""
    system_cpu: CpuQuantity = 200
    """CPU each simulated node's system daemons use (counted by the batch tier)."""
    system_memory: ByteQuantity = 512 * 2**20
    """Memory each simulated node's system daemons use."""
    evicted_pods: Literal["restart", "resume"] = "restart"
    """A pod whose node goes (consolidation, expiry, failure) runs its whole `duration` again (`restart`, as a Job's pod does) or what it had left
    (`resume`)."""


class LeaderElection(Model):
    enabled: bool = True
    """Run only while holding the Lease, so two replicas never act at once."""
    namespace: str = "nodemanager"
    """Namespace of the Lease."""
    lease_name: str = "nodemanager"
    """Name of the Lease."""
    lease_duration: Duration = 15.0
    """How long a Lease lasts unrenewed (client-go's default)."""
    renew_deadline: Duration = 10.0
    """A leader that could not renew within this long stops acting. Needs `retryPeriod` < `renewDeadline` < `leaseDuration`."""
    retry_period: Duration = 2.0
    """How often a candidate tries to take or renew the Lease."""

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElection:
        # A leader must stop acting (renewDeadline) before its lease can run out for others.
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                f"need 0 < retryPeriod ({self.retry_period:g}s) < renewDeadline ({self.renew_deadline:g}s) < leaseDuration ({self.lease_duration:g}s)"
            )
        return self


class KubernetesMode(StrEnum):
    SCHEDULER = "scheduler"  # nodemanager binds the pods whose schedulerName is ours
    PROVISIONER = "provisioner"  # the default scheduler binds; we add capacity for its unschedulable pods


class KubernetesCluster(Model):
    mode: KubernetesMode = KubernetesMode.PROVISIONER
    """`provisioner`: kube-scheduler binds every pod and nodemanager boots what the pods it could not place need (as Karpenter and the Cluster Autoscaler
    do, so their users' workloads run unchanged). `scheduler`: nodemanager binds the pods whose `schedulerName` is `schedulerName`."""
    scheduler_name: str = "nodemanager"
    """The `schedulerName` of the pods nodemanager binds in `scheduler` mode."""
    kubeconfig: str | None = None
    """Path of a kubeconfig; none: the in-cluster service account, then the default kubeconfig."""
    context: str | None = None
    """The kubeconfig context to use; none: its current context."""
    drain_timeout: Duration = 300.0
    """How long a node's pods may take to leave before the node is terminated anyway (a voluntary disruption waits instead)."""
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    """Leader election through a coordination.k8s.io Lease."""


class ClusterSource(StrEnum):
    SIMULATED = "simulated"
    KUBERNETES = "kubernetes"


class Cluster(Model):
    source: ClusterSource = ClusterSource.SIMULATED
    """`simulated` or `kubernetes`: where pods and nodes come from."""
    simulated: SimulatedCluster | None = None
    """Settings of the simulated cluster."""
    kubernetes: KubernetesCluster | None = None
    """Settings for a real Kubernetes cluster."""

    @property
    def drain_timeout(self) -> float:
        """How long a node's pods may take to leave before it is terminated anyway."""
        return self.kubernetes.drain_timeout if self.kubernetes else KubernetesCluster.model_fields["drain_timeout"].default

    @model_validator(mode="after")
    def _one_block(self) -> Cluster:
        _only_chosen_block(self, "source", {ClusterSource.SIMULATED: SimulatedCluster, ClusterSource.KUBERNETES: KubernetesCluster})
        return self


# --- nodes and pools --------------------------------------------------------------------


class BootImageSpec(Model):
    """Which machine image to boot: explicit ids, the newest image matching owners and
    filters, or a launch template (which then also carries the image)."""

    image_ids: list[str] = Field(default_factory=list, alias="imageIDs")
    """Explicit image ids (the simulated cloud launches from the first)."""
    owners: list[str] = Field(default_factory=list)
    """Image owners (`amazon`, an account id) for the newest image matching `filters`."""
    filters: dict[str, list[str]] = Field(default_factory=dict)
    """EC2 DescribeImages filters, e.g. `{name: ["amazon-eks-node-al2023-x86_64-standard-1.31-*"]}`."""
    launch_template: str | None = None
    """A launch template (name or id) that carries the image and its own settings."""

    @model_validator(mode="after")
    def _one_way(self) -> BootImageSpec:
        ways = [bool(self.image_ids), bool(self.owners or self.filters), bool(self.launch_template)]
        if sum(ways) > 1:
            raise ValueError("give imageIDs, or owners/filters, or launchTemplate, not several")
        return self


class BootBrake(Model):
    """The fleet brake: within ``window`` a pool launches at most ``bootsPerPod`` nodes per
    distinct pod those launches were for (standby nodes are not counted)."""

    window: Duration = Field(default=600.0, gt=0)
    """The brake's window."""
    boots_per_pod: float = Field(default=2.0, ge=1.0, le=1000.0)
    """1–1000 launches per distinct pod within the window. Past it the pool's boots pause (logged as a warning, counted in `nodemanager_boot_brakes_total`,
    said in each waiting pod's reason) until older launches leave the window."""


class NodeDefaults(Model):
    default_instance_type: str = "t3.medium"
    """The type of standby entries that name none."""
    volume_size: ByteQuantity = 20 * 2**30
    """Root volume size; 90% of it is the node's ephemeral-storage allocatable."""
    boot_image_spec: BootImageSpec = Field(default_factory=BootImageSpec)
    """Which image nodes boot: `imageIDs`, or `owners` + `filters` (the newest match), or `launchTemplate`. A node launched from another image than the one
    this resolves to now is drifted."""
    name_tag: str = Field(default="nodemanager", max_length=34, pattern=_DNS_LABEL)
    """Prefix of instance Name tags and node names (a DNS label, at most 34 characters)."""
    boot_timeout: Duration = Field(default=300.0, ge=MIN_BOOT_TIMEOUT)
    """An instance that is not a Ready node by then is terminated and its pods placed again. At least 30 s."""
    healthy_timeout: Duration = 90.0
    """A Ready node not heard from this long is replaced. At least `loops.heartbeat`."""
    idle_grace: Duration = 300.0
    """An unneeded node is stopped only after being unneeded this long (also while booting), as far as the pool's `Empty` budgets allow."""
    max_boots_per_loop: int = Field(default=10, ge=1, le=MAX_BOOTS)
    """Bounds the blast radius of one decision (1–100,000). The nodes a capped plan leaves for later are kept, and the next loops start them without
    planning again while nothing they were planned from changed."""
    unavailable_offering_ttl: Duration = Field(default=180.0, alias="unavailableOfferingTTL")
    """An offering that ran out of capacity is skipped this long."""
    boot_brake: BootBrake = Field(default_factory=BootBrake)
    """The fleet brake: within `window` a pool launches at most `bootsPerPod` nodes per distinct pod those launches were for (standby nodes are not
    counted)."""


class Taint(Model):
    key: str = Field(min_length=1)
    """The taint's key (a Kubernetes qualified name)."""
    value: str = ""
    """The taint's value (a label value)."""
    effect: TaintEffect
    """`NoSchedule`, `PreferNoSchedule` or `NoExecute`."""

    @model_validator(mode="after")
    def _valid(self) -> Taint:
        check_label(self.key, self.value)
        return self


class Limits(Model):
    """Caps on what a pool may hold in total; none means unbounded."""

    nodes: int | None = Field(default=None, ge=0)
    """Most nodes in the pool."""
    cpu: CpuQuantity | None = None
    """Most vCPU of the pool's machines in total (capacity, not allocatable)."""
    memory: ByteQuantity | None = None
    """Most memory of the pool's machines in total."""


class Standby(Model):
    """Nodes kept booted and idle so that pods start without waiting for a boot."""

    instance_type: str | None = None
    """The type of the standby nodes; default: `nodes.defaultInstanceType`."""
    count: int = Field(ge=0, le=MAX_COUNT)
    """How many (0–10,000; at most 10,000 standby nodes in all)."""
    spot: bool = False
    """Spot instead of on-demand."""
    zone: str | None = None
    """The zone; default: any of the pool's."""


class Colocation(Model):
    """Batch-tier overcommit (Koordinator's ColocationStrategy). Left out: the defaults below;
    in a pool: only what differs from the cluster-wide block."""

    enable: bool | None = None
    """Offer batch resources (default `false`)."""
    cpu_reclaim_threshold_percent: int | None = Field(default=None, ge=0, le=100)
    """The share of CPU capacity that may be reclaimed for the batch tier (default 60)."""
    memory_reclaim_threshold_percent: int | None = Field(default=None, ge=0, le=100)
    """The share of memory capacity that may be reclaimed (default 65)."""
    cpu_calculate_policy: Literal["usage", "maxUsageRequest"] | None = None
    """`usage` or `maxUsageRequest`: what high-priority pods are taken to hold (default `usage`)."""
    memory_calculate_policy: Literal["usage", "request", "maxUsageRequest"] | None = None
    """`usage`, `request` or `maxUsageRequest` (default `usage`)."""
    degrade_time_minutes: int | None = Field(default=None, gt=0)
    """Metrics older than this remove a node's batch resources (default 15)."""
    update_time_threshold_seconds: int | None = Field(default=None, gt=0)
    """Rewrite a node's batch resources at least this often (default 300)."""
    resource_diff_threshold: float | None = Field(default=None, gt=0, le=1)
    """Rewrite them on a larger relative change (0–1, default 0.1)."""
    batch_cpu_threshold_percent: int | None = Field(default=None, ge=0)
    """Cap on batch CPU, as a share of capacity (default: none)."""
    batch_memory_threshold_percent: int | None = Field(default=None, ge=0)
    """Cap on batch memory, as a share of capacity (default: none)."""

    def overrides(self) -> dict[str, object]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class ColocationSettings(Colocation):
    plugins: list[str] = Field(default_factory=lambda: ["*"])
    """Enable or disable plugins by name (`BatchResource`, `-BatchResource`, `*`); the first explicit match wins; an unknown name is an error."""


class DisruptionReason(StrEnum):
    """Why a node is disrupted voluntarily (Karpenter's reasons)."""

    EMPTY = "Empty"  # no pods: stopped after nodes.idleGrace
    UNDERUTILIZED = "Underutilized"  # its pods fit elsewhere, plus at most one cheaper node
    DRIFTED = "Drifted"
    EXPIRED = "Expired"


class ConsolidationPolicy(StrEnum):
    WHEN_EMPTY = "WhenEmpty"
    WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"


class DisruptionBudget(Model):
    """At most ``nodes`` of a pool's nodes disrupted at once for ``reasons`` (all if empty);
    with a ``schedule`` (cron, UTC) only for ``duration`` from each time it fires."""

    nodes: str = Field(default="10%", pattern=r"^(100|[1-9]?[0-9])%$|^[0-9]+$")
    """A count or `N%` (0–100%, rounded up) of the pool's nodes."""
    reasons: list[DisruptionReason] = Field(default_factory=list)
    """Any of `Empty`, `Underutilized`, `Drifted`, `Expired`; none: all."""
    schedule: str | None = None  # checked by config.load (the cron parser is not the planning core's)
    """A cron line (UTC) from which the budget holds for `duration`; one that never fires (such as `0 0 31 2 *`) is refused."""
    duration: Duration | None = Field(default=None, gt=0)
    """How long the budget holds from each firing of `schedule` (both or neither)."""

    @model_validator(mode="after")
    def _window(self) -> DisruptionBudget:
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("schedule and duration go together")
        return self

    def limit(self, nodes: int) -> int:
        """How many of ``nodes`` this budget lets be disrupted at once (a share rounds up)."""
        return scaled(self.nodes if self.nodes.endswith("%") else int(self.nodes), nodes)


class Disruption(Model):
    """Voluntary disruption of a pool's nodes (Karpenter's NodePool disruption block)."""

    consolidation_policy: ConsolidationPolicy = ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    """`WhenEmpty`: only idle nodes are stopped; `WhenEmptyOrUnderutilized`: also nodes whose pods fit elsewhere, plus at most one cheaper node."""
    consolidate_after: Duration = Field(default=0.0, ge=0)
    """A node is a consolidation candidate once its pods have not changed for this long."""
    consolidation_price_improvement_factor: float = Field(default=0.7, ge=0.0, le=1.0)
    """0–1: a consolidation replaces nodes only with one costing at most this share of them (`0.7`: at least 30% saved, which cuts
    the churn of replacements for marginal savings; `1.0`: any saving, Karpenter's behaviour; `0`: never replace, only delete).
    Nodes of several pools: the smallest factor. Deletions are not held back."""
    expire_after: Annotated[Duration | None, BeforeValidator(lambda v: None if v == "Never" else v)] = Field(default=720 * 3600.0, gt=0)
    """Nodes older than this are replaced (Karpenter's default: 30 days); `Never` keeps them."""
    budgets: list[DisruptionBudget] = Field(default_factory=lambda: [DisruptionBudget()], max_length=50)
    """At most 50. A node is disrupted only when every budget for its reason allows it."""
    evict_bare_pods: bool = False
    """A pod with no controller (no `ownerReferences`) is gone for good once evicted, so by default a node holding one is never consolidated, drifted or
    expired (the Cluster Autoscaler's default). `true` lets voluntary disruption evict them."""


DEFAULT_FLOOR_SHARE = 0.25  # of the CPU a consolidating pool's pods request (see NodeSizeFloor)


class NodeSizeFloor(Model):
    """The smallest new node a bin-pack pool boots, as its load grows: at least ``share`` of
    the CPU its pods request on its nodes now, never more than ``max_cpu`` vCPU, with the
    memory those pods ask for per CPU. A pool of many nodes that boots a small node for the
    few pods that did not fit pays for it twice: the node's own overhead, and the
    consolidation that later moves its pods again. Pods asking for GPUs (or other extended
    resources) are sized by those, not held to it. Unset, the share is 1/4 in a pool that
    consolidates underutilized nodes and 0 (no floor) in one that does not: without
    consolidation, a larger node's room would stay unused."""

    share: float | None = Field(default=None, ge=0.0, le=1.0)
    """0–1 of the CPU the pool's pods request on its nodes now; `0` turns the floor off. Unset: 1/4 in a pool that consolidates underutilized nodes, else
    0."""
    max_cpu: float = Field(default=16.0, ge=0.0, le=1024.0, alias="maxCPU")
    """The most vCPU the floor asks for (0–1024)."""


class Packing(StrEnum):
    CELL = "cell"  # one pod per node, node stopped when its pod ends
    BINPACK = "binpack"  # many pods per node, cheapest mix of instance types


class InstanceGeneration(StrEnum):
    CURRENT = "current"
    PREVIOUS = "previous"
    ANY = "any"


class Pool(Model):
    name: str = Field(max_length=63, pattern=_DNS_LABEL)
    """A DNS label, unique among pools."""
    packing: Packing = Packing.BINPACK
    """`binpack`: many pods per node, the cheapest mix of types. `cell`: one pod per node, the node terminated when its pod ends."""
    instance_types: list[str] = Field(default_factory=lambda: ["*"], min_length=1, max_length=MAX_PATTERNS)
    """Names or globs (`c5*`, `m5.*`); each must match a type of the catalog. At most 500."""
    exclude_instance_types: list[str] = Field(default_factory=list, max_length=MAX_PATTERNS)
    """Names or globs never bought, e.g. `t*`. At most 500."""
    architectures: list[Literal["x86_64", "arm64"]] = Field(default_factory=lambda: ["x86_64"], min_length=1)
    """`x86_64` and/or `arm64` (images are rarely multi-arch)."""
    instance_generation: InstanceGeneration = InstanceGeneration.CURRENT
    """`current`, `previous` or `any`: the EC2 generation of the types a pattern sweeps in (`*`, `*.large`). A pattern that names a type (`m1.small`,
    `m3.*`) allows it whatever its generation. Bin-pack pools also leave out burstable types a pattern only sweeps in: name them (`t3.*`) to use them."""
    capacity_types: list[CapacityType] = Field(default_factory=lambda: [CapacityType.ON_DEMAND], min_length=1)
    """`on-demand` and/or `spot`. Spot is used when allowed and cheaper, unless the pod says otherwise."""
    zones: list[str] = Field(default_factory=list, max_length=100)
    """Zones of the region; none: all."""
    labels: dict[str, str] = Field(default_factory=dict, max_length=100)
    """Set on the pool's nodes; pods select pools with `nodeSelector` or node affinity on them (at most 100)."""
    taints: list[Taint] = Field(default_factory=list, max_length=50)
    """Only pods that tolerate them land in the pool (at most 50)."""
    startup_taints: list[Taint] = Field(default_factory=list, max_length=50)
    """The node registers with them and its own agents (a CNI, a GPU driver) remove them: ignored when planning, pods are bound once they are gone."""
    limits: Limits = Field(default_factory=Limits)
    """Totals of the pool's machines, never exceeded. Pods a limit leaves over wait with `pool P: limit on nodes reached` (or `cpu`, `memory`)."""
    standby: list[Standby] = Field(default_factory=list, max_length=100)
    """Nodes kept booted and idle (at most 100 entries)."""
    weight: int = Field(default=0, ge=0, le=100)
    """0–100; a higher weight is tried first when several pools fit."""
    colocation: Colocation = Field(default_factory=Colocation)
    """Batch-tier settings for this pool (all but `plugins`), merged over the cluster-wide `colocation` block."""
    disruption: Disruption = Field(default_factory=Disruption)
    """Voluntary disruption of the pool's nodes (see [Disruption](concepts/disruption.md))."""
    node_size_floor: NodeSizeFloor = Field(default_factory=NodeSizeFloor)
    """The smallest new node a bin-pack pool boots as its load grows: at least `share` of the CPU its pods request on its nodes now, at most `maxCPU`. Let
    go where no type that large holds the pods, where the limits leave room only for smaller nodes, and for pods asking for GPUs."""

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for key, value in labels.items():
            check_label(key, value)
        return labels

    @property
    def size_floor_share(self) -> float:
        """``node_size_floor.share``, or its default for this pool's consolidation policy."""
        share = self.node_size_floor.share
        if share is not None:
            return share
        return DEFAULT_FLOOR_SHARE if self.disruption.consolidation_policy is ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED else 0.0

    def type_query(self) -> dict[str, Any]:
        """``Catalog.matching``'s arguments for the types this pool may boot. Burstable types
        a pattern only sweeps in stay out of bin-pack pools: their list price holds only
        under the CPU-credit baseline, and packed pods use the CPU they ask for."""
        return {
            "patterns": self.instance_types,
            "architectures": self.architectures,
            "exclude": self.exclude_instance_types,
            "generation": self.instance_generation.value,
            "burstable": self.packing is Packing.CELL,
        }


class Loops(Model):
    """How often each control loop runs (Kip's values)."""

    pool: Duration = Field(default=7.0, ge=MIN_INTERVAL)
    """How often pending pods are placed and nodes booted."""
    heartbeat: Duration = Field(default=10.0, ge=MIN_INTERVAL)
    """How often nodes are checked for health."""
    reaper: Duration = Field(default=10.0, ge=MIN_INTERVAL)
    """How often nodes that outlived `bootTimeout` or `healthyTimeout` are replaced."""
    orphan_gc: Duration = Field(default=60.0, ge=MIN_INTERVAL, alias="orphanGC")
    """How often instances tagged with this `controllerId` but known to no record are terminated."""
    prices: Duration = Field(default=12 * 3600.0, ge=MIN_INTERVAL)
    """Live price refresh, where the cloud has live prices (Karpenter's interval)."""
    colocation: Duration = Field(default=30.0, ge=MIN_INTERVAL)
    """How often batch resources are recalculated."""
    disruption: Duration = Field(default=10.0, ge=MIN_INTERVAL)
    """How often consolidation, drift and expiry are looked for (Karpenter's interval)."""
    interruption: Duration = Field(default=5.0, ge=MIN_INTERVAL)
    """How often the interruption queue is read (each read waits up to 5 s for a message)."""
    pass_deadline: Duration = Field(default=30.0, gt=0, le=3600)
    """How long one pass of a loop (all but `prices`) may spend on cloud and API calls. Past it a pass makes no new EC2 call (the rest waits for the next
    pass), and a Kubernetes API call waits no longer than what is left (at least 1 s)."""
    config_check: Duration = Field(default=10.0, ge=1.0)
    """How often `run --config` looks at its configuration file for a change (a ConfigMap update reaches a mounted file
    within a minute or so); SIGHUP asks at once. A changed file is checked whole: refused with every problem logged, or applied by
    restarting in place."""

    def intervals(self) -> dict[str, float]:
        """Loop name (as the controller names its loops) -> seconds."""
        return {
            "pool": self.pool,
            "heartbeat": self.heartbeat,
            "reaper": self.reaper,
            "orphan_gc": self.orphan_gc,
            "prices": self.prices,
            "colocation": self.colocation,
            "disruption": self.disruption,
            "interruption": self.interruption,
        }


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) as its host and port."""
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


class Status(Model):
    listen: str = Field(default="127.0.0.1:8080", pattern=r"^(\[[0-9a-fA-F:]+\]|[^:\s]+):[0-9]{1,5}$")
    """`host:port` or `[v6]:port`; the host must resolve. Loopback by default: expose it deliberately."""
    bearer_token_file: str | None = None
    """A file holding the token every path but `/healthz` and `/readyz` needs (`Authorization: Bearer <token>`); `check-config` refuses one that is
    missing, blank or over 64 KiB."""
    bearer_token_env: str | None = None
    """The name of an environment variable holding that token instead."""
    allow_unauthenticated: bool = False
    """A `listen` address beyond loopback needs a token unless this is `true`: anyone who reaches the endpoint reads the configuration, nodes and pods."""
    tls_cert_file: str | None = None
    """PEM certificate chain: serve HTTPS (with `tlsKeyFile`)."""
    tls_key_file: str | None = None
    """PEM private key of that certificate."""

    @model_validator(mode="after")
    def _tls_pair(self) -> Status:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("tlsCertFile and tlsKeyFile go together: give both, or neither")
        return self

    @field_validator("listen")
    @classmethod
    def _port_in_range(cls, value: str) -> str:
        port = parse_listen(value)[1]
        if not 1 <= port <= 65535:
            raise ValueError(f"port must be 1-65535, got {port}")
        return value


class CatalogSettings(Model):
    region: str = "us-east-1"
    """Which bundled catalog of instance types and prices."""
    file: str | None = None
    """A catalog JSON made by `python -m cloud.catalog_gen`, instead of the bundled one."""
    spot_price_fraction: float = Field(default=0.4, gt=0, le=1)
    """Spot price as a fraction of on-demand, until real spot prices are fetched."""


class ScorePluginRef(Model):
    name: str
    """The plugin's name."""
    weight: int = Field(default=1, ge=0)
    """Its weight (0 counts as 1, as in kube-scheduler)."""


class Scheduling(Model):
    """The scheduling profile: plugins per extension point, in order. A point left out
    keeps the default list (see docs/configuration.md); an empty list disables the point."""

    queue_sort: list[str] | None = None
    """Plugins ordering the queue; default `PrioritySort`."""
    pre_filter: list[str] | None = None
    """PreFilter plugins, in order."""
    filter: list[str] | None = None
    """Filter plugins, in order (a node failing several is reported by the first)."""
    post_filter: list[str] | None = None
    """PostFilter plugins (preemption)."""
    score: list[ScorePluginRef] | None = None
    """Score plugins with their weights (`[{name, weight}]`)."""
    reserve: list[str] | None = None
    """Reserve plugins."""
    unreserve: list[str] | None = None
    """Unreserve plugins."""
    permit: list[str] | None = None
    """Permit plugins."""
    pre_bind: list[str] | None = None
    """PreBind plugins."""
    bind: list[str] | None = None
    """Bind plugins."""
    post_bind: list[str] | None = None
    """PostBind plugins."""
    plugin_args: dict[str, dict[str, object]] = Field(default_factory=dict)
    """Arguments per plugin, e.g. `{PodGroup: {scheduleTimeout: 5m}}`; `PodTopologySpread` takes kube's `defaultingType` and `defaultConstraints`."""
    seed: int = 0
    """Seeds the tie-break between equally scored nodes."""

    def profile(self) -> Profile:
        default = DEFAULT_PROFILE
        points = ("queue_sort", "pre_filter", "filter", "post_filter", "reserve", "unreserve", "permit", "pre_bind", "bind", "post_bind")
        lists = {name: tuple(getattr(self, name)) if getattr(self, name) is not None else getattr(default, name) for name in points}
        score = tuple((s.name, s.weight) for s in self.score) if self.score is not None else default.score
        return Profile(**lists, score=score, plugin_args=self.plugin_args)


class ProviderConfig(Model):
    """The whole provider.yaml."""

    api_version: Literal["nodemanager/v1"] = "nodemanager/v1"
    """`nodemanager/v1`."""
    controller_id: str | None = Field(default=None, pattern=_DNS_LABEL, max_length=63)
    """Tags every instance; stable and unique per cluster, since orphan collection terminates tagged instances no record knows. Required with
    `cloud.provider: aws`; default `simulated` otherwise."""
    cloud: Cloud = Field(default_factory=Cloud)
    """Where nodes are booted."""
    cluster: Cluster = Field(default_factory=Cluster)
    """Where pods and nodes come from."""
    catalog: CatalogSettings = Field(default_factory=CatalogSettings)
    """The instance types and prices nodemanager chooses from."""
    nodes: NodeDefaults = Field(default_factory=NodeDefaults)
    """Settings for every node."""
    pools: list[Pool] = Field(min_length=1, max_length=MAX_POOLS)
    """The node pools (1–100)."""
    loops: Loops = Field(default_factory=Loops)
    """How often each control loop runs."""
    status: Status = Field(default_factory=Status)
    """The ops status endpoint."""
    scheduling: Scheduling = Field(default_factory=Scheduling)
    """The scheduling profile: plugins per extension point. A point left out keeps its default; an empty list disables it."""
    colocation: ColocationSettings = Field(default_factory=ColocationSettings)
    """The cluster-wide batch tier (see [The batch tier](concepts/batch-tier.md))."""

    @model_validator(mode="after")
    def _controller_id(self) -> ProviderConfig:
        if self.controller_id is None:
            if self.cloud.provider is CloudProvider.AWS:
                raise ValueError(
                    "controllerId: required with cloud.provider aws: it tags this controller's instances, so it must be stable and unique per cluster"
                )
            object.__setattr__(self, "controller_id", "simulated")
        return self

    @model_validator(mode="after")
    def _bounded(self) -> ProviderConfig:
        if self.nodes.healthy_timeout < self.loops.heartbeat:
            raise ValueError(
                f"nodes.healthyTimeout ({self.nodes.healthy_timeout:g}s) is shorter than loops.heartbeat ({self.loops.heartbeat:g}s): "
                "every Ready node would be replaced between two looks at its heartbeat"
            )
        standby = sum(s.count for p in self.pools for s in p.standby)
        if standby > MAX_STANDBY:
            raise ValueError(f"pools[*].standby: {standby:,} standby nodes in all, more than the {MAX_STANDBY:,} allowed")
        return self

    def pool(self, name: str) -> Pool:
        return next(p for p in self.pools if p.name == name)

    def colocation_for(self, pool: Pool | None) -> ColocationStrategy:
        """Koordinator's defaults, then the cluster-wide block, then the pool's overrides."""
        strategy = ColocationStrategy().merged(self.colocation.overrides())
        return strategy.merged(pool.colocation.overrides()) if pool is not None else strategy

    @property
    def colocation_anywhere(self) -> bool:
        return any(self.colocation_for(p).enable for p in self.pools)
