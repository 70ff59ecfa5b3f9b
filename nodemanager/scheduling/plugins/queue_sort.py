"""PrioritySort: higher priority first, then the older pod (kube-scheduler's queue order; the
key breaks ties between pods created in the same instant)."""

from __future__ import annotations

from nodemanager.model import Pod
from nodemanager.scheduling.interfaces import QueueSortPlugin


def priority_key(pod: Pod) -> tuple[int, float, str]:
    """A total order: sorting by this key is what ``PrioritySort.less`` decides."""
    return (-pod.priority, pod.created_at, pod.key)


class PrioritySort(QueueSortPlugin):
    name = "PrioritySort"
    keeps_nothing = True

    def less(self, a: Pod, b: Pod) -> bool:
        return priority_key(a) < priority_key(b)

    def sort_key(self, pod: Pod) -> tuple[int, float, str]:
        return priority_key(pod)
