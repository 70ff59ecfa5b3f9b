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
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True, use_enum_values=False)


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

    boot_delay: Duration = 30.0  # RunInstances to "running": EC2's usual 20-40 s
    seed: int = 0  # every random choice (failures, interruptions) derives from it
    capacity: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)  # "type/capacity-type/zone" glob -> most live instances
    throttle_rate: float = Field(default=0.0, ge=0, le=1)  # share of API calls answered "slow down"
    instance_death_per_hour: float = Field(default=0.0, ge=0)  # chance rate of a running instance dying
    spot_interruption_per_hour: float = Field(default=0.0, ge=0)  # ... and of a spot instance being reclaimed


class MetadataOptions(Model):
    """The instance metadata service of nodes (Karpenter's EC2NodeClass metadataOptions and
    defaults): IMDSv2 only, and a response hop limit of 1, so a pod (one hop further than the
    node) cannot read the node role's credentials."""

    http_endpoint: Literal["enabled", "disabled"] = "enabled"
    http_tokens: Literal["required", "optional"] = "required"
    http_put_response_hop_limit: int = Field(default=1, ge=1, le=64)


class RootVolume(Model):
    """The root EBS volume of nodes (its size is ``nodes.volumeSize``), encrypted by default."""

    volume_type: Literal["gp3", "gp2", "io1", "io2"] = "gp3"
    iops: int | None = Field(default=None, ge=100, le=256_000)  # gp3: 3,000-16,000; io1/io2: as provisioned
    throughput: int | None = Field(default=None, ge=125, le=1000)  # MiB/s, gp3 only
    encrypted: bool = True
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID")  # default: the account's EBS key

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
    """The EKS cluster nodes join (``aws eks describe-cluster --name NAME`` gives each)."""

    name: str = Field(pattern=r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
    endpoint: str = Field(pattern=r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?$")  # cluster.endpoint
    certificate_authority: str = Field(pattern=r"^[A-Za-z0-9+/=]{16,16384}$")  # cluster.certificateAuthority.data (base64)
    service_cidr: str = Field(default="10.100.0.0/16", alias="serviceCIDR")  # kubernetesNetworkConfig.serviceIpv4Cidr

    @field_validator("service_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            ipaddress.ip_network(value)
        except ValueError as exc:
            raise ValueError(f"not a CIDR: {exc}") from None
        return value


class AwsCloud(Model):
    """EC2 in one region. Credentials come only from the standard AWS chain."""

    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]$")
    endpoint_url: str | None = Field(default=None, alias="endpointURL")  # any EC2-compatible endpoint
    subnets: list[str] = Field(default_factory=list)  # subnet ids; one zone each, several for zone fallback
    subnet_selector: dict[str, str] = Field(default_factory=dict)  # tag key -> value, instead of ids
    security_groups: list[str] = Field(default_factory=list)
    instance_profile: str | None = None  # name, or ARN when it contains ':'
    user_data: SecretStr | None = None  # template; may hold bootstrap tokens, so kept secret
    tags: dict[str, str] = Field(default_factory=dict, max_length=MAX_TAGS - OWN_TAGS)
    image_family: ImageFamily = ImageFamily.CUSTOM  # how nodes join: the user data nodemanager writes
    eks: EksCluster | None = None  # the cluster they join (needed by every family but Custom)
    metadata_options: MetadataOptions = Field(default_factory=MetadataOptions)
    root_volume: RootVolume = Field(default_factory=RootVolume)  # ignored with a launch template (it has its own)
    detailed_monitoring: bool = False  # CloudWatch metrics every minute (billed) instead of five
    refresh_prices: bool = True  # Pricing API and spot price history every loops.prices
    interruption_queue: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,80}(\.fifo)?$")  # SQS queue name fed by EventBridge

    @model_validator(mode="after")
    def _family(self) -> AwsCloud:
        if self.image_family is not ImageFamily.CUSTOM and self.eks is None:
            raise ValueError(f"imageFamily {self.image_family.value} needs eks: {{name, endpoint, certificateAuthority}} (aws eks describe-cluster gives them)")
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
    simulated: SimulatedCloud | None = None
    aws: AwsCloud | None = None

    @model_validator(mode="after")
    def _one_block(self) -> Cloud:
        _only_chosen_block(self, "provider", {CloudProvider.SIMULATED: SimulatedCloud, CloudProvider.AWS: None})
        return self


# --- cluster ----------------------------------------------------------------------------


class SimulatedCluster(Model):
    """A cluster in memory that registers booted instances as nodes and plays a workload."""

    workload: str | None = None  # workload file, relative to provider.yaml; none = no pods
    register_delay: Duration = 10.0  # running instance to Ready node (kubelet start-up)
    system_cpu: CpuQuantity = 200  # what each node's system daemons use (for batch resources)
    system_memory: ByteQuantity = 512 * 2**20
    # A pod whose node goes (consolidation, a failure) runs again from the start (a Job's
    # pod restarted), or resumes where it stopped (work that checkpoints).
    evicted_pods: Literal["restart", "resume"] = "restart"


class LeaderElection(Model):
    enabled: bool = True
    namespace: str = "nodemanager"
    lease_name: str = "nodemanager"
    lease_duration: Duration = 15.0  # client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry
    renew_deadline: Duration = 10.0
    retry_period: Duration = 2.0

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
    # provisioner: kube-scheduler binds every pod and nodemanager boots what they need (the
    # way Karpenter and the Cluster Autoscaler work, so their users' pods run unchanged);
    # scheduler: nodemanager binds the pods that name it in schedulerName.
    mode: KubernetesMode = KubernetesMode.PROVISIONER
    scheduler_name: str = "nodemanager"
    kubeconfig: str | None = None  # none: in-cluster, then the default kubeconfig
    context: str | None = None
    drain_timeout: Duration = 300.0
    leader_election: LeaderElection = Field(default_factory=LeaderElection)


class ClusterSource(StrEnum):
    SIMULATED = "simulated"
    KUBERNETES = "kubernetes"


class Cluster(Model):
    source: ClusterSource = ClusterSource.SIMULATED
    simulated: SimulatedCluster | None = None
    kubernetes: KubernetesCluster | None = None

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
    owners: list[str] = Field(default_factory=list)
    filters: dict[str, list[str]] = Field(default_factory=dict)  # EC2 DescribeImages filters
    launch_template: str | None = None

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
    boots_per_pod: float = Field(default=2.0, ge=1.0, le=1000.0)


class NodeDefaults(Model):
    default_instance_type: str = "t3.medium"  # for standby entries and pods that name no type
    volume_size: ByteQuantity = 20 * 2**30  # root volume; EKS AMIs need about 20 GiB
    boot_image_spec: BootImageSpec = Field(default_factory=BootImageSpec)
    name_tag: str = Field(default="nodemanager", max_length=34, pattern=_DNS_LABEL)  # Name tag / node name prefix
    boot_timeout: Duration = Field(default=300.0, ge=MIN_BOOT_TIMEOUT)  # an instance not a Ready node by then is terminated
    healthy_timeout: Duration = 90.0  # a Ready node not heard from for this long is replaced
    idle_grace: Duration = 300.0  # an unneeded node is stopped only after being unneeded this long
    max_boots_per_loop: int = Field(default=10, ge=1, le=MAX_BOOTS)  # bounds the blast radius of one bad decision
    unavailable_offering_ttl: Duration = Field(default=180.0, alias="unavailableOfferingTTL")  # an offering that ran out of capacity is skipped this long
    boot_brake: BootBrake = Field(default_factory=BootBrake)


class Taint(Model):
    key: str = Field(min_length=1)
    value: str = ""
    effect: TaintEffect

    @model_validator(mode="after")
    def _valid(self) -> Taint:
        check_label(self.key, self.value)
        return self


class Limits(Model):
    """Caps on what a pool may hold in total; none means unbounded."""

    nodes: int | None = Field(default=None, ge=0)
    cpu: CpuQuantity | None = None
    memory: ByteQuantity | None = None


class Standby(Model):
    """Nodes kept booted and idle so that pods start without waiting for a boot."""

    instance_type: str | None = None  # default: nodes.defaultInstanceType
    count: int = Field(ge=0, le=MAX_COUNT)
    spot: bool = False
    zone: str | None = None


class Colocation(Model):
    """Batch-tier overcommit (Koordinator's ColocationStrategy). Left out: the defaults below;
    in a pool: only what differs from the cluster-wide block."""

    enable: bool | None = None  # default false: no batch resources are offered
    cpu_reclaim_threshold_percent: int | None = Field(default=None, ge=0, le=100)  # default 60
    memory_reclaim_threshold_percent: int | None = Field(default=None, ge=0, le=100)  # default 65
    cpu_calculate_policy: Literal["usage", "maxUsageRequest"] | None = None  # default usage
    memory_calculate_policy: Literal["usage", "request", "maxUsageRequest"] | None = None  # default usage
    degrade_time_minutes: int | None = Field(default=None, gt=0)  # default 15: older metrics remove batch resources
    update_time_threshold_seconds: int | None = Field(default=None, gt=0)  # default 300: sync at least this often
    resource_diff_threshold: float | None = Field(default=None, gt=0, le=1)  # default 0.1: sync on a larger relative change
    batch_cpu_threshold_percent: int | None = Field(default=None, ge=0)  # optional cap, % of capacity
    batch_memory_threshold_percent: int | None = Field(default=None, ge=0)

    def overrides(self) -> dict[str, object]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class ColocationSettings(Colocation):
    plugins: list[str] = Field(default_factory=lambda: ["*"])  # "*", "Name", "-Name": first explicit match wins


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
    reasons: list[DisruptionReason] = Field(default_factory=list)
    schedule: str | None = None  # checked by config.load (the cron parser is not the planning core's)
    duration: Duration | None = Field(default=None, gt=0)

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
    consolidate_after: Duration = Field(default=0.0, ge=0)  # a node's pods unchanged this long before it is a candidate
    # A replacement may cost at most this share of the nodes it replaces (Karpenter's RFC
    # "consolidation price improvement factor"; 1.0: any saving, Karpenter's behaviour; 0.8:
    # at least 20%; 0: never replace, only delete). Cuts the churn of replacements for
    # marginal savings, which restart every pod of the nodes replaced (see the README).
    consolidation_price_improvement_factor: float = Field(default=0.7, ge=0.0, le=1.0)
    # Nodes older than this are replaced (Karpenter's default: 30 days); "Never" keeps them.
    expire_after: Annotated[Duration | None, BeforeValidator(lambda v: None if v == "Never" else v)] = Field(default=720 * 3600.0, gt=0)
    budgets: list[DisruptionBudget] = Field(default_factory=lambda: [DisruptionBudget()], max_length=50)
    # A pod no controller makes again (no ownerReferences) is lost for good when evicted: by
    # default a node holding one is never disrupted voluntarily (the Cluster Autoscaler's way).
    evict_bare_pods: bool = False


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

    share: float | None = Field(default=None, ge=0.0, le=1.0)  # 0: no floor
    max_cpu: float = Field(default=16.0, ge=0.0, le=1024.0, alias="maxCPU")  # vCPU


class Packing(StrEnum):
    CELL = "cell"  # one pod per node, node stopped when its pod ends
    BINPACK = "binpack"  # many pods per node, cheapest mix of instance types


class InstanceGeneration(StrEnum):
    CURRENT = "current"
    PREVIOUS = "previous"
    ANY = "any"


class Pool(Model):
    name: str = Field(max_length=63, pattern=_DNS_LABEL)
    packing: Packing = Packing.BINPACK
    instance_types: list[str] = Field(default_factory=lambda: ["*"], min_length=1, max_length=MAX_PATTERNS)  # names or globs
    exclude_instance_types: list[str] = Field(default_factory=list, max_length=MAX_PATTERNS)  # names or globs never bought, e.g. "t*" (burstable)
    architectures: list[Literal["x86_64", "arm64"]] = Field(default_factory=lambda: ["x86_64"], min_length=1)  # images are rarely multi-arch
    # Types a pattern sweeps in (``*``, ``*.large``) must be of this generation; a pattern that
    # names a type (``m1.small``, ``m3.*``) allows it whatever its generation.
    instance_generation: InstanceGeneration = InstanceGeneration.CURRENT
    capacity_types: list[CapacityType] = Field(default_factory=lambda: [CapacityType.ON_DEMAND], min_length=1)
    zones: list[str] = Field(default_factory=list, max_length=100)  # empty: every zone of the region
    labels: dict[str, str] = Field(default_factory=dict, max_length=100)  # set on the pool's nodes; pods select pools with them
    taints: list[Taint] = Field(default_factory=list, max_length=50)  # only pods tolerating them land in the pool
    # Taints the node registers with and its own agents remove once ready (a CNI, a GPU
    # driver): ignored when planning onto the pool's nodes; pods are bound once they are gone.
    startup_taints: list[Taint] = Field(default_factory=list, max_length=50)
    limits: Limits = Field(default_factory=Limits)
    standby: list[Standby] = Field(default_factory=list, max_length=100)
    weight: int = Field(default=0, ge=0, le=100)  # higher is tried first when several pools fit
    colocation: Colocation = Field(default_factory=Colocation)  # merged over the cluster-wide block
    disruption: Disruption = Field(default_factory=Disruption)
    node_size_floor: NodeSizeFloor = Field(default_factory=NodeSizeFloor)

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
    heartbeat: Duration = Field(default=10.0, ge=MIN_INTERVAL)
    reaper: Duration = Field(default=10.0, ge=MIN_INTERVAL)
    orphan_gc: Duration = Field(default=60.0, ge=MIN_INTERVAL, alias="orphanGC")
    prices: Duration = Field(default=12 * 3600.0, ge=MIN_INTERVAL)  # live prices, where the cloud has them (Karpenter: 12 h)
    colocation: Duration = Field(default=30.0, ge=MIN_INTERVAL)  # batch resources recalculated (metrics report every 60 s)
    disruption: Duration = Field(default=10.0, ge=MIN_INTERVAL)  # consolidation looked for (Karpenter: every 10 s)
    interruption: Duration = Field(default=5.0, ge=MIN_INTERVAL)  # the interruption queue polled (each poll waits up to 5 s in real time)
    # A pass of a loop that holds the controller stops retrying cloud calls, and makes no new
    # one, once it has run this long (nodemanager.deadline); the price refresh runs outside
    # the controller, bounded by its own retries.
    pass_deadline: Duration = Field(default=30.0, gt=0, le=3600)

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
    listen: str = Field(default="127.0.0.1:8080", pattern=r"^(\[[0-9a-fA-F:]+\]|[^:\s]+):[0-9]{1,5}$")  # loopback: opt in to expose it
    bearer_token_file: str | None = None  # guards all but /healthz when set
    bearer_token_env: str | None = None  # name of an environment variable holding the token
    allow_unauthenticated: bool = False  # listen beyond loopback without a token (anyone who reaches it reads the config)
    tls_cert_file: str | None = None  # PEM certificate chain: serve HTTPS (with tlsKeyFile)
    tls_key_file: str | None = None  # PEM private key of that certificate

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
    file: str | None = None  # a catalog JSON made by cloud.catalog_gen; default: the bundled one
    spot_price_fraction: float = Field(default=0.4, gt=0, le=1)  # until real spot prices are fetched


class ScorePluginRef(Model):
    name: str
    weight: int = Field(default=1, ge=0)  # 0 counts as 1, as in kube-scheduler


class Scheduling(Model):
    """The scheduling profile: plugins per extension point, in order. A point left out
    keeps the default list (see the README); an empty list disables the point."""

    queue_sort: list[str] | None = None
    pre_filter: list[str] | None = None
    filter: list[str] | None = None
    post_filter: list[str] | None = None
    score: list[ScorePluginRef] | None = None
    reserve: list[str] | None = None
    unreserve: list[str] | None = None
    permit: list[str] | None = None
    pre_bind: list[str] | None = None
    bind: list[str] | None = None
    post_bind: list[str] | None = None
    plugin_args: dict[str, dict[str, object]] = Field(default_factory=dict)  # e.g. {PodGroup: {scheduleTimeout: 5m}}
    seed: int = 0  # seeds the tie-breaking draw between equally scored nodes

    def profile(self) -> Profile:
        default = DEFAULT_PROFILE
        points = ("queue_sort", "pre_filter", "filter", "post_filter", "reserve", "unreserve", "permit", "pre_bind", "bind", "post_bind")
        lists = {name: tuple(getattr(self, name)) if getattr(self, name) is not None else getattr(default, name) for name in points}
        score = tuple((s.name, s.weight) for s in self.score) if self.score is not None else default.score
        return Profile(**lists, score=score, plugin_args=self.plugin_args)


class ProviderConfig(Model):
    """The whole provider.yaml."""

    api_version: Literal["nodemanager/v1"] = "nodemanager/v1"
    controller_id: str | None = Field(default=None, pattern=_DNS_LABEL, max_length=63)
    cloud: Cloud = Field(default_factory=Cloud)
    cluster: Cluster = Field(default_factory=Cluster)
    catalog: CatalogSettings = Field(default_factory=CatalogSettings)
    nodes: NodeDefaults = Field(default_factory=NodeDefaults)
    pools: list[Pool] = Field(min_length=1, max_length=MAX_POOLS)
    loops: Loops = Field(default_factory=Loops)
    status: Status = Field(default_factory=Status)
    scheduling: Scheduling = Field(default_factory=Scheduling)
    colocation: ColocationSettings = Field(default_factory=ColocationSettings)

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
