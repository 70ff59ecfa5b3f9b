"""The planning core: ``BindingNodeScaler.compute(snapshot, now) -> Decision``."""

from nodemanager.scaler.decision import Decision, NodeSpec, StopOrder
from nodemanager.scaler.scaler import BindingNodeScaler
from nodemanager.scaler.settings import ScalerSettings
from nodemanager.scaler.snapshot import ClusterSnapshot
from nodemanager.scaler.unavailability import UnavailabilityKeeper

__all__ = ["BindingNodeScaler", "ClusterSnapshot", "Decision", "NodeSpec", "ScalerSettings", "StopOrder", "UnavailabilityKeeper"]
