"""``InstanceType`` and ``Offering``: the capacity nodemanager can buy, and what it costs.

Allocatable follows the EKS / Karpenter model so that a new node holds exactly what the
kubelet will report:

* pods      = ``max_pods`` = min(ENIs x (IPv4 per ENI - 1) + 2, 110), or given explicitly
              (with prefix delegation, ``prefix_max_pods``);
* cpu       = vCPU - kube-reserved CPU, where kube-reserved is 6% of the first core,
              1% of the second, 0.5% of the third and fourth, 0.25% of every further core;
* memory    = memory - 7.5% VM overhead - kube-reserved (11 MiB x max_pods + 255 MiB)
              - 100 MiB hard eviction threshold;
* ephemeral-storage = root volume - 10% (the kubelet's nodefs eviction threshold);
* GPUs      = their count under ``nvidia.com/gpu`` (NVIDIA) or ``amd.com/gpu`` (AMD).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from nodemanager.model.node import CapacityType
from nodemanager.model.resources import AMD_GPU, CPU, EPHEMERAL_STORAGE, MEMORY, NVIDIA_GPU, PODS, Resources

MIB = 2**20
GIB = 2**30
DEFAULT_VOLUME_BYTES = 20 * GIB
KUBELET_MAX_PODS = 110
VM_MEMORY_OVERHEAD_PERMILLE = 75
EVICTION_MEMORY_MIB = 100
NODEFS_EVICTION_PERCENT = 10
# (start milli-core, end milli-core, reserved per 10,000 milli-cores): Karpenter's tiers.
_CPU_RESERVATION_TIERS = ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, 2**62, 25))


def kube_reserved_cpu(milli_cpu: int) -> int:
    """Milli-cores reserved for the kubelet and runtime on a node of ``milli_cpu``."""
    reserved_e4 = sum(max(0, min(milli_cpu, end) - start) * rate for start, end, rate in _CPU_RESERVATION_TIERS)
    return -(-reserved_e4 // 10_000)


def eni_max_pods(enis: int, ipv4_per_eni: int) -> int:
    """The VPC CNI pod limit, capped at the kubelet's default of 110."""
    if enis <= 0 or ipv4_per_eni <= 1:
        return KUBELET_MAX_PODS
    return min(enis * (ipv4_per_eni - 1) + 2, KUBELET_MAX_PODS)


PREFIX_ADDRESSES = 16  # a /28 prefix in each of an ENI's address slots
PREFIX_MAX_PODS, PREFIX_MAX_PODS_LARGE, LARGE_VCPU = 110, 250, 30  # EKS's max-pods calculator's caps


def prefix_max_pods(enis: int, ipv4_per_eni: int, vcpu: int) -> int | None:
    """The VPC CNI pod limit with prefix delegation (``ENABLE_PREFIX_DELEGATION``), as EKS's
    max-pods calculator gives it: ENIs x (IPv4 per ENI - 1) x 16 + 2, at most 110 below 30
    vCPU and 250 from 30; None where the type's ENIs are not known."""
    if enis <= 0 or ipv4_per_eni <= 1:
        return None
    return min(enis * (ipv4_per_eni - 1) * PREFIX_ADDRESSES + 2, PREFIX_MAX_PODS_LARGE if vcpu >= LARGE_VCPU else PREFIX_MAX_PODS)


@dataclass(frozen=True, slots=True)
class Gpu:
    count: int
    manufacturer: str
    model: str
    memory_mib: int  # per device

    @property
    def resource_name(self) -> str:
        return AMD_GPU if self.manufacturer.upper() == "AMD" else NVIDIA_GPU


@dataclass(frozen=True, slots=True)
class Offering:
    """One buyable (instance type, zone, capacity type) with its hourly price in USD. A
    reserved offering names its capacity reservation; its price is what planning weighs
    (next to nothing: the reservation is paid for, used or not)."""

    instance_type: str
    zone: str
    capacity_type: CapacityType
    price: float
    reservation: str = ""  # the capacity reservation's id (reserved offerings only)
    capacity_block: bool = False  # that reservation is a Capacity Block (launched as such; its nodes go before it ends)

    @property
    def key(self) -> tuple[str, CapacityType, str]:
        return (self.instance_type, self.capacity_type, self.zone)

    def __str__(self) -> str:
        where = f"{self.zone}/{self.reservation}" if self.reservation else self.zone
        return f"{self.instance_type}/{self.capacity_type}/{where}"


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpu: int
    memory_mib: int
    on_demand_price: float
    architectures: tuple[str, ...] = ("x86_64",)
    gpus: tuple[Gpu, ...] = ()
    spot_price: float | None = None  # None: spot is not offered for this type
    zones: tuple[str, ...] = ()
    max_pods: int = KUBELET_MAX_PODS
    burstable: bool = False
    bare_metal: bool = False
    current_generation: bool = True  # EC2's CurrentGeneration: previous ones often lack current images and network drivers
    enis: int = 0  # network interfaces, and IPv4 addresses on each (0: not known): the VPC CNI's pod limits
    ipv4_per_eni: int = 0
    offerings: tuple[Offering, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not self.offerings:
            offers = [Offering(self.name, z, CapacityType.ON_DEMAND, self.on_demand_price) for z in self.zones]
            if self.spot_price is not None:
                offers += [Offering(self.name, z, CapacityType.SPOT, self.spot_price) for z in self.zones]
            object.__setattr__(self, "offerings", tuple(offers))

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def gpu_count(self) -> int:
        return sum(g.count for g in self.gpus)

    def price(self, capacity_type: CapacityType, zone: str = "") -> float | None:
        """The hourly price; with a zone, that zone's offering (spot prices differ by zone)."""
        if zone:
            for offering in self.offerings:
                if offering.capacity_type is capacity_type and offering.zone == zone:
                    return offering.price
        if capacity_type is CapacityType.RESERVED:  # a reservation no longer offered: its instance runs on as an on-demand one
            return self.on_demand_price
        return self.on_demand_price if capacity_type is CapacityType.ON_DEMAND else self.spot_price

    def capacity(self, volume_bytes: int = DEFAULT_VOLUME_BYTES) -> Resources:
        """What the machine has, before any reservation."""
        amounts = {CPU: self.vcpu * 1000, MEMORY: self.memory_mib * MIB, PODS: self.max_pods, EPHEMERAL_STORAGE: volume_bytes}
        for gpu in self.gpus:
            amounts[gpu.resource_name] = amounts.get(gpu.resource_name, 0) + gpu.count
        return Resources(amounts)

    def allocatable_for(self, volume_bytes: int) -> Resources:
        """What pods may request on a node of this type with a root volume of ``volume_bytes``."""
        overhead_mib = -(-self.memory_mib * VM_MEMORY_OVERHEAD_PERMILLE // 1000)
        reserved_mib = 11 * self.max_pods + 255 + EVICTION_MEMORY_MIB
        reserved = Resources(
            {
                CPU: kube_reserved_cpu(self.vcpu * 1000),
                MEMORY: (overhead_mib + reserved_mib) * MIB,
                EPHEMERAL_STORAGE: volume_bytes * NODEFS_EVICTION_PERCENT // 100,
            }
        )
        return (self.capacity(volume_bytes) - reserved).clamp_nonnegative()

    @cached_property
    def allocatable(self) -> Resources:
        """Allocatable with the default 20 GiB root volume."""
        return self.allocatable_for(DEFAULT_VOLUME_BYTES)
