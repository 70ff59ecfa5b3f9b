"""The scheduling framework (extension points, profile, registry) and its plugins."""

from nodemanager.scheduling.cycle_state import CycleState
from nodemanager.scheduling.framework import Framework, FrameworkConfigError, ScheduleResult
from nodemanager.scheduling.nodeinfo import NodeInfo
from nodemanager.scheduling.profile import DEFAULT_PROFILE, Profile
from nodemanager.scheduling.registry import Registry, default_registry
from nodemanager.scheduling.status import Code, Status

__all__ = [
    "DEFAULT_PROFILE",
    "Code",
    "CycleState",
    "Framework",
    "FrameworkConfigError",
    "NodeInfo",
    "Profile",
    "Registry",
    "ScheduleResult",
    "Status",
    "default_registry",
]
