import pytest

from nodemanager.model import CapacityType, Gpu, InstanceType, Resources
from nodemanager.model.instance_type import GIB, MIB, eni_max_pods, kube_reserved_cpu


@pytest.mark.parametrize(("cores", "reserved"), [(1, 60), (2, 70), (4, 80), (8, 90), (16, 110), (32, 150), (64, 230), (96, 310)])
def test_kube_reserved_cpu_matches_eks(cores, reserved):
    assert kube_reserved_cpu(cores * 1000) == reserved


@pytest.mark.parametrize(("enis", "ips", "pods"), [(3, 10, 29), (2, 2, 4), (4, 15, 58), (15, 50, 110), (0, 0, 110)])
def test_eni_max_pods(enis, ips, pods):
    assert eni_max_pods(enis, ips) == pods


def test_allocatable_formula_m5_large():
    m5 = InstanceType("m5.large", vcpu=2, memory_mib=8192, on_demand_price=0.096, max_pods=29, zones=("us-east-1a",))
    alloc = m5.allocatable
    assert alloc.cpu == 2000 - 70
    # 8192 - ceil(7.5%)=615 - (11*29 + 255) - 100 eviction
    assert alloc.memory == (8192 - 615 - 574 - 100) * MIB
    assert alloc.pods == 29
    assert alloc["ephemeral-storage"] == 20 * GIB - 2 * GIB
    assert m5.allocatable_for(100 * GIB)["ephemeral-storage"] == 90 * GIB


def test_gpus_become_extended_resources():
    t = InstanceType("g5.12xlarge", 48, 196608, 5.672, gpus=(Gpu(4, "NVIDIA", "A10G", 22888),))
    assert t.allocatable["nvidia.com/gpu"] == 4
    amd = InstanceType("g4ad.xlarge", 4, 16384, 0.378, gpus=(Gpu(1, "AMD", "Radeon Pro V520", 8192),))
    assert amd.allocatable["amd.com/gpu"] == 1
    assert t.gpu_count == 4


def test_offerings_per_zone_and_capacity_type():
    t = InstanceType("c5.large", 2, 4096, 0.085, spot_price=0.034, zones=("us-east-1a", "us-east-1b"))
    assert {(o.capacity_type, o.zone, o.price) for o in t.offerings} == {
        (CapacityType.ON_DEMAND, "us-east-1a", 0.085),
        (CapacityType.ON_DEMAND, "us-east-1b", 0.085),
        (CapacityType.SPOT, "us-east-1a", 0.034),
        (CapacityType.SPOT, "us-east-1b", 0.034),
    }
    no_spot = InstanceType("x.large", 2, 4096, 0.1, zones=("us-east-1a",))
    assert [o.capacity_type for o in no_spot.offerings] == [CapacityType.ON_DEMAND]
    assert no_spot.price(CapacityType.SPOT) is None


def test_tiny_type_holds_nothing_negative():
    t = InstanceType("t.tiny", 1, 256, 0.001, max_pods=4)
    assert t.allocatable.is_nonnegative()
    assert not Resources({"memory": 1}).fits(t.allocatable)
