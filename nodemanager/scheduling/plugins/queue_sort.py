"""PrioritySort: higher priority first, then the more constrained pod, then the older one."""

from __future__ import annotations

from nodemanager.model import Pod
from nodemanager.scheduling.interfaces import QueueSortPlugin


def priority_key(pod: Pod) -> tuple[int, int, float, str]:
    """A total order: sorting by this key is what ``PrioritySort.less`` decides."""
    return (-pod.priority, -pod.specificity(), pod.created_at, pod.key)


class PrioritySort(QueueSortPlugin):
    name = "PrioritySort"
    keeps_nothing = True

    def less(self, a: Pod, b: Pod) -> bool:
        return priority_key(a) < priority_key(b)

    def sort_key(self, pod: Pod) -> tuple[int, int, float, str]:
        return priority_key(pod)
