"""The provider.yaml schema. Every field has a default with its reason, or is required.

Keys are camelCase in YAML (``bootTimeout``) and snake_case in Python (``boot_timeout``).
Unknown keys are errors. Values that could be secret (user data) are ``SecretStr`` and
never appear in ``repr`` or in dumps.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from cloud.aws import settings as cloud_aws
from nodemanager.config.blocks import (
    DNS_LABEL,
    MAX_BOOTS,
    MAX_COUNT,
    MAX_PATTERNS,
    MAX_POOLS,
    MAX_STANDBY,
    MIN_BOOT_TIMEOUT,
    MIN_INTERVAL,
    ByteQuantity,
    CpuQuantity,
    Model,
    check_label,
)
from nodemanager.config.catalog_schema import CatalogSettings
from nodemanager.config.cloud_schema import Cloud, CloudProvider, settle_image_family
from nodemanager.config.cluster_schema import Cluster
from nodemanager.config.durations import Duration
from nodemanager.config.launch_schema import Launch, launch_method_problems
from nodemanager.config.reservation_schema import MAX_TERMS, ReservationTerm, reservation_problems
from nodemanager.config.scheduling_schema import Scheduling
from nodemanager.model import CapacityType, TaintEffect
from nodemanager.model.pdb import scaled
from nodemanager.noderesource.strategy import ColocationStrategy

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

    def for_cloud(self) -> cloud_aws.BootImage:
        """This spec as the AWS cloud takes it."""
        filters = {name: tuple(values) for name, values in self.filters.items()}
        return cloud_aws.BootImage(tuple(self.image_ids), tuple(self.owners), filters, self.launch_template)

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


NODE_NAME_DIGITS = 12  # hex digits after "<nameTag>-<pool>-" in a node's name
HOSTNAME_MAX = 63  # a node's name is its kubernetes.io/hostname label's value


class NodeDefaults(Model):
    default_instance_type: str = "t3.medium"
    """The type of standby entries that name none."""
    volume_size: ByteQuantity = 20 * 2**30
    """Root volume size; 90% of it is the node's ephemeral-storage allocatable."""
    prefix_delegation: bool = False
    """The VPC CNI hands out /28 prefixes (`ENABLE_PREFIX_DELEGATION`): each type holds ENIs x (IPv4 per ENI - 1) x 16 + 2 pods, at most 110 below
    30 vCPU and 250 from 30 (EKS's max-pods calculator), planned for and given to each kubelet; `false`: the ENIs' addresses, at most 110."""
    boot_image_spec: BootImageSpec = Field(default_factory=BootImageSpec)
    """Which image nodes boot: `imageIDs`, or `owners` + `filters` (the newest match), or `launchTemplate`. A node launched from another image than the one
    this resolves to now is drifted."""
    name_tag: str = Field(default="nodemanager", max_length=34, pattern=DNS_LABEL)
    """Prefix of instance Name tags and node names (a DNS label, at most 34 characters). A node is named `<nameTag>-<pool>-<12 hex digits>`, which
    must fit the 63 characters of its `kubernetes.io/hostname` label."""
    boot_timeout: Duration = Field(default=300.0, ge=MIN_BOOT_TIMEOUT)
    """An instance that is not a Ready node by then is terminated and its pods placed again. At least 30 s."""
    healthy_timeout: Duration = 90.0
    """A Ready node not heard from this long is replaced. At least `loops.heartbeat`."""
    idle_grace: Duration = 60.0
    """An unneeded node is stopped only after being unneeded this long (also while booting), as far as the pool's `Empty` budgets allow. The default
    is about what a new node takes to boot and join: kept empty longer, a node costs more than booting another would if pods came for it (Karpenter
    stops an empty node at once, the Cluster Autoscaler after 10 minutes)."""
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
    BALANCED = "Balanced"


class ConsolidationPayback(Model):
    """A consolidation goes ahead only when the fleet would cost less with it than without it until the pods it moves would have ended: the nodes
    they go to kept longer for them, each pod's share of its node's price for its start-up and, for a pod that runs to completion (a Job's), the
    work it does again."""

    enabled: bool = True
    """`false`: every move that saves anything goes ahead (Karpenter's `WhenEmptyOrUnderutilized`)."""
    horizon: Duration = Field(default=3600.0, gt=0)
    """The longest any time is counted for: a pod that runs for good counts this long, one that runs to completion what it is expected to run
    still (learnt from those that ended), at most this long."""
    pod_startup: Duration = Field(default=30.0, ge=0)
    """How long an evicted pod takes to run again, counted for every pod a move evicts."""


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
    """`WhenEmpty`: only idle nodes are stopped; `WhenEmptyOrUnderutilized`: also nodes whose pods fit elsewhere, plus at most one cheaper node;
    `Balanced`: those moves too, when their share of the pool's cost saved is at least `1/consolidationThreshold` of their share of its disruption
    (Karpenter's)."""
    consolidation_threshold: int | None = Field(default=None, ge=1, le=3)
    """1–3, with `Balanced` only (default 2): a move passes when the share of the pool's disruption it causes is at most this many times the share
    of its cost it saves."""
    consolidation_payback: ConsolidationPayback = Field(default_factory=ConsolidationPayback)
    """Every consolidation of nodes that hold pods must pay for its evictions (see its fields)."""
    consolidation_cooldown: Duration = Field(default=1800.0, ge=0)
    """A node holding a pod that a disruption moved less than this long ago is not consolidated (expiry, drift and interruptions still take it); each
    earlier move of the pod within a day makes the wait four times as long, and after a second move it is a day at least, so consolidation moves a
    pod at most twice a day. `0` turns it off."""
    consolidate_after: Duration = Field(default=0.0, ge=0)
    """A node is a consolidation candidate once its pods have not changed for this long."""
    consolidation_price_improvement_factor: float = Field(default=0.7, ge=0.0, le=1.0)
    """0–1: a consolidation replaces nodes only with one costing at most this share of them (`0.7`: at least 30% saved, which cuts
    the churn of replacements for marginal savings; `1.0`: any saving, Karpenter's behaviour; `0`: never replace, only delete).
    Nodes of several pools: the smallest factor. Deletions are not held back."""
    spot_to_spot_min_types: int = Field(default=15, ge=1, le=1000)
    """A spot node is replaced by a cheaper spot node only when its pool offers at least this many spot types cheaper than it
    (15, Karpenter's rule: with fewer, the replacement would chase the cheapest spot pool, which is the most often interrupted).
    Deleting a spot node, or replacing it with on-demand, is not held back."""
    expire_after: Annotated[Duration | None, BeforeValidator(lambda v: None if v == "Never" else v)] = Field(default=720 * 3600.0, gt=0)
    """Nodes older than this are replaced (Karpenter's default: 30 days); `Never` keeps them."""
    budgets: list[DisruptionBudget] = Field(default_factory=lambda: [DisruptionBudget()], max_length=50)
    """At most 50. A node is disrupted only when every budget for its reason allows it."""
    evict_bare_pods: bool = False
    """A pod with no controller (no `ownerReferences`) is gone for good once evicted, so by default a node holding one is never consolidated, drifted or
    expired (the Cluster Autoscaler's default). `true` lets voluntary disruption evict them."""

    @model_validator(mode="after")
    def _threshold(self) -> Disruption:
        if self.consolidation_threshold is not None and self.consolidation_policy is not ConsolidationPolicy.BALANCED:
            raise ValueError("consolidationThreshold goes with consolidationPolicy: Balanced")
        return self

    @property
    def consolidates(self) -> bool:
        """Whether nodes that hold pods are consolidated (not only idle ones stopped)."""
        return self.consolidation_policy is not ConsolidationPolicy.WHEN_EMPTY

    @property
    def threshold(self) -> int:
        """``consolidationThreshold``, or its default (Karpenter's k = 2)."""
        return self.consolidation_threshold or 2


DEFAULT_FLOOR_SHARE = 0.25  # of the CPU a consolidating pool's pods request (see NodeSizeFloor)


class NodeSizeFloor(Model):
    """The smallest new node a bin-pack pool boots, as its load grows: at least ``share`` of
    the CPU its pods request on its nodes now, never more than ``max_cpu`` vCPU, with the
    memory those pods ask for per CPU. A pool of many nodes that boots a small node for the
    few pods that did not fit pays for it twice: the node's own overhead, and the
    consolidation that later moves its pods again. Pods asking for GPUs (or other extended
    resources) are sized by those, not held to it; nor are the pods of a Job of several pods
    (they come together and mostly end together: a node sized to them ends with them, where
    the room a larger node leaves beside them goes to other Jobs' pods that end at other
    times). Unset, the share is 1/4 in a pool that consolidates underutilized nodes and 0
    (no floor) in one that does not: without consolidation, a larger node's room would stay
    unused."""

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
    name: str = Field(max_length=63, pattern=DNS_LABEL)
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
    """`on-demand`, `spot` and/or `reserved`. Spot is used when allowed and cheaper, unless the pod says otherwise; `reserved` capacity (what
    `capacityReservations` selects) before either, while it has instances left."""
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
    launch: Launch = Field(default_factory=Launch)
    """How the pool's nodes are launched: an EC2 Fleet call offering several types and zones, or `RunInstances` for one (see
    [Launches](concepts/launches.md))."""
    capacity_reservations: list[ReservationTerm] = Field(default_factory=list, max_length=MAX_TERMS)
    """Capacity reservations the pool launches into first, by id or tags (see [Reserved capacity](concepts/reserved-capacity.md))."""

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
        return DEFAULT_FLOOR_SHARE if self.disruption.consolidates else 0.0

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
    reservations: Duration = Field(default=60.0, ge=MIN_INTERVAL)
    """How often the selected capacity reservations are read again (instances left, new and ended ones) and Capacity Blocks near their end drained."""
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
            "reservations": self.reservations,
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


class ProviderConfig(Model):
    """The whole provider.yaml."""

    api_version: Literal["nodemanager/v1"] = "nodemanager/v1"
    """`nodemanager/v1`."""
    controller_id: str | None = Field(default=None, pattern=DNS_LABEL, max_length=63)
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

    @model_validator(mode="after")
    def _settled(self) -> ProviderConfig:
        """Launch methods and the image family, where provider.yaml leaves them to nodemanager."""
        problems = launch_method_problems([p.launch for p in self.pools], *self.fleet_inputs())
        problems += reservation_problems([(p.capacity_reservations, p.capacity_types) for p in self.pools])
        if self.cloud.provider is CloudProvider.AWS and self.cloud.aws is not None:
            problems += settle_image_family(self.cloud.aws, self.nodes.boot_image_spec.filters.get("name", []))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def fleet_inputs(self) -> tuple[str | None, str]:
        """The launch template and the user data a fleet launch would be made from (EC2's only)."""
        aws = self.cloud.aws if self.cloud.provider is CloudProvider.AWS else None
        user_data = aws.user_data.get_secret_value() if aws is not None and aws.user_data is not None else ""
        return (self.nodes.boot_image_spec.launch_template if aws is not None else None), user_data

    def pool(self, name: str) -> Pool:
        return next(p for p in self.pools if p.name == name)

    def colocation_for(self, pool: Pool | None) -> ColocationStrategy:
        """Koordinator's defaults, then the cluster-wide block, then the pool's overrides."""
        strategy = ColocationStrategy().merged(self.colocation.overrides())
        return strategy.merged(pool.colocation.overrides()) if pool is not None else strategy

    @property
    def colocation_anywhere(self) -> bool:
        return any(self.colocation_for(p).enable for p in self.pools)
