"""Structured device allocation: claims, classes, slices, the allocator and its CEL."""

from nodemanager.dra.allocator import Allocator, devices_of
from nodemanager.dra.cel import CelError, compile_selector, evaluate
from nodemanager.dra.model import (
    AllocationMode,
    AllocationResult,
    Device,
    DeviceClass,
    DeviceRequest,
    ResourceClaim,
    ResourceSlice,
    Version,
    parse_all,
    parse_claim,
    parse_device_class,
    parse_slice,
)
from nodemanager.dra.pools import AllocationError, DevicePool, gather_pools

__all__ = [
    "AllocationError",
    "AllocationMode",
    "AllocationResult",
    "Allocator",
    "CelError",
    "Device",
    "DeviceClass",
    "DevicePool",
    "DeviceRequest",
    "ResourceClaim",
    "ResourceSlice",
    "Version",
    "compile_selector",
    "devices_of",
    "evaluate",
    "gather_pools",
    "parse_all",
    "parse_claim",
    "parse_device_class",
    "parse_slice",
]
