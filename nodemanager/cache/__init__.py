"""The cluster cache: pod state machine, per-node usage, immutable snapshots."""

from nodemanager.cache.handler import DEFAULT_ASSUME_TTL, CacheSnapshot, ClusterEventsHandler, NodeUsage
from nodemanager.cache.pod_state import POD_TRANSITIONS, IllegalPodTransition, PodOp, PodState

__all__ = ["DEFAULT_ASSUME_TTL", "POD_TRANSITIONS", "CacheSnapshot", "ClusterEventsHandler", "IllegalPodTransition", "NodeUsage", "PodOp", "PodState"]
