"""What the scaler knows of devices: classes, claims and published slices; and instance
types seen as devices, so claims can be tested against machines not yet booted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from nodemanager.dra.model import Device, DeviceClass, ResourceClaim, ResourceSlice
from nodemanager.model import InstanceType

MIB = 2**20
GPU_DRIVERS = {"NVIDIA": "gpu.nvidia.com", "AMD": "gpu.amd.com"}


@dataclass(frozen=True)
class DeviceContext:
    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    claims: Mapping[str, ResourceClaim] = field(default_factory=dict)
    slices: tuple[ResourceSlice, ...] = ()  # what drivers on real nodes published
    unavailable: str = ""  # why claims cannot be read at all (the API group is not served)

    def published_for(self, node: str) -> list[ResourceSlice]:
        return [s for s in self.slices if s.node_name == node]

    def allocated(self) -> list[ResourceClaim]:
        return [c for c in self.claims.values() if c.allocation is not None]


def instance_slices(itype: InstanceType, node_name: str = "") -> tuple[ResourceSlice, ...]:
    """An instance type's GPUs as the slice its driver would publish: one device per GPU
    with ``model``, ``manufacturer`` and ``index`` attributes and a ``memory`` capacity. With
    no node name the slice is for every node (a machine not booted yet)."""
    slices = []
    index = 0
    for gpu in itype.gpus:
        driver = GPU_DRIVERS.get(gpu.manufacturer.upper(), f"gpu.{gpu.manufacturer.lower() or 'unknown'}.com")
        devices = []
        for _ in range(gpu.count):
            attributes = {"model": gpu.model, "manufacturer": gpu.manufacturer, "index": index, "productName": gpu.model}
            devices.append(Device(f"gpu-{index}", attributes, {"memory": gpu.memory_mib * MIB}))
            index += 1
        slices.append(
            ResourceSlice(
                name=f"{node_name or itype.name}-{driver}",
                driver=driver,
                pool=node_name or itype.name,
                generation=1,
                slice_count=1,
                devices=tuple(devices),
                node_name=node_name,
                all_nodes=not node_name,
            )
        )
    return tuple(slices)
