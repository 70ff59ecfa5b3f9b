"""PodGroup: a gang of pods gets capacity for at least ``minMember`` members, or none.

Members are held at Permit (Wait) until the group's placed members reach its minimum;
the member that completes the quorum allows the waiting ones. Members still waiting when
the wait ends are rejected, and Unreserve gives their capacity back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from nodemanager.durations import parse_duration
from nodemanager.model import Pod, PodKey
from nodemanager.scheduling.cycle_state import CycleState
from nodemanager.scheduling.interfaces import FrameworkHandle, PermitPlugin, ReservePlugin, UnreservePlugin
from nodemanager.scheduling.status import Code, Status

DEFAULT_TIMEOUT = 300.0  # seconds, the coscheduling default for scheduleTimeoutSeconds


class PodGroup(ReservePlugin, UnreservePlugin, PermitPlugin):
    name = "PodGroup"

    def __init__(self, handle: FrameworkHandle, args: Mapping[str, object] | None = None) -> None:
        super().__init__(handle, args)
        # (a scaler makes one per computation: the default needs no parsing)
        self.timeout = parse_duration(self.args["scheduleTimeout"]) if "scheduleTimeout" in self.args else DEFAULT_TIMEOUT
        self._baseline: dict[str, int] | None = None
        self._reserved: dict[str, set[PodKey]] = defaultdict(set)

    @staticmethod
    def _is_gang(pod: Pod) -> bool:
        return bool(pod.pod_group) and pod.pod_group_min_member > 1

    def _group(self, pod: Pod) -> str:
        return f"{pod.namespace}/{pod.pod_group}"

    def _placed(self, pod: Pod) -> int:
        return (self._baseline or {}).get(self._group(pod), 0) + len(self._reserved[self._group(pod)])

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if not self._is_gang(pod):
            return None
        if self._baseline is None:
            # Members already on nodes before this run (bound or running) count once.
            baseline: dict[str, int] = defaultdict(int)
            for info in self.handle.node_infos.values():
                for other in info.pods.values():
                    if self._is_gang(other) and other.key != pod.key:
                        baseline[self._group(other)] += 1
            self._baseline = dict(baseline)
        self._reserved[self._group(pod)].add(pod.key)
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        if self._is_gang(pod):
            self._reserved[self._group(pod)].discard(pod.key)

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        if not self._is_gang(pod):
            return None, 0.0
        if self._placed(pod) < pod.pod_group_min_member:
            have = self._placed(pod)
            return Status(Code.WAIT, f"pod group {pod.pod_group}: {have} of {pod.pod_group_min_member} members placed"), self.timeout
        group = self._group(pod)
        for waiting in self.handle.iterate_over_waiting_pods():
            if self._is_gang(waiting.pod) and self._group(waiting.pod) == group:
                waiting.allow(self.name)
        return None, 0.0
