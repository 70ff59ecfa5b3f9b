"""BatchResource: capacity that high-priority pods requested but do not use, offered to
batch pods as ``kubernetes.io/batch-cpu`` (milli-cores) and ``kubernetes.io/batch-memory``.

    safetyMargin   = capacity x (100 - reclaimThresholdPercent) / 100
    nodeReserved   = max(capacity - allocatable, reservation annotation)
    byUsage        = capacity - safetyMargin - max(systemUsed, nodeReserved) - hpUsed
    byRequest      = capacity - safetyMargin - nodeReserved - hpRequest
    byMaxUsageReq  = capacity - safetyMargin - max(systemUsed, nodeReserved) - hpMaxUsedRequest

each clamped at 0. CPU uses maxUsageRequest when asked, else usage ("request" included);
memory uses request, maxUsageRequest or usage. Optional caps (batch*ThresholdPercent) bound
the result by a share of capacity. Metrics older than degradeTimeMinutes (or none) remove
the batch resources instead of leaving stale ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from nodemanager.model import Pod, PodPhase, Resources
from nodemanager.model.resources import BATCH_CPU, BATCH_MEMORY, BATCH_RESOURCES
from nodemanager.noderesource.framework import CalculatePlugin, NeedSyncPlugin, PreparePlugin
from nodemanager.noderesource.model import NodeMetric, NodeResource, NodeView, ResourceItem
from nodemanager.noderesource.strategy import CalculatePolicy, ColocationStrategy

PRIORITY_CLASS_LABEL = "koordinator.sh/priority-class"
QOS_LABEL = "koordinator.sh/qosClass"
RESERVATION_ANNOTATION = "node.koordinator.sh/reservation"
DEGRADE_MESSAGE = "degrade node resource because of abnormal nodeMetric, reason: degradedByBatchResource"
_CLASS_RANGES = (("Prod", 9000, 9999), ("Mid", 7000, 7999), ("Batch", 5000, 5999), ("Free", 3000, 3999))
_LABEL_CLASSES = {"koord-prod": "Prod", "koord-mid": "Mid", "koord-batch": "Batch", "koord-free": "Free"}
_QOS_CLASSES = {"SYSTEM": "Prod", "LSE": "Prod", "LSR": "Prod", "LS": "Prod", "BE": "Batch"}


def priority_class(pod: Pod) -> str | None:
    """Prod / Mid / Batch / Free from the label, else the priority value, else the QoS class."""
    label = pod.labels.get(PRIORITY_CLASS_LABEL)
    if label in _LABEL_CLASSES:
        return _LABEL_CLASSES[label]
    for name, low, high in _CLASS_RANGES:
        if low <= pod.priority <= high:
            return name
    return _QOS_CLASSES.get(pod.labels.get(QOS_LABEL, ""))


def is_high_priority(pod: Pod) -> bool:
    """Not Batch and not Free (so a pod of no class counts as high priority)."""
    return priority_class(pod) not in ("Batch", "Free")


def _pair(resources: Resources) -> tuple[int, int]:
    return resources.cpu, resources.memory


def _reserved(node: NodeView) -> tuple[int, int]:
    kubelet = (max(node.capacity.get("cpu", 0) - node.allocatable.get("cpu", 0), 0), max(node.capacity.get("memory", 0) - node.allocatable.get("memory", 0), 0))
    text = node.annotations.get(RESERVATION_ANNOTATION)
    if not text:
        return kubelet
    try:
        doc = json.loads(text)
        annotated = Resources.parse(doc.get("resources") or {}, RESERVATION_ANNOTATION)
        cpus = doc.get("reservedCPUs", "")
        cpu = max(annotated.cpu, _count_cpus(cpus) * 1000) if cpus else annotated.cpu
    except (ValueError, AttributeError):
        return kubelet
    return max(kubelet[0], cpu), max(kubelet[1], annotated.memory)


def _count_cpus(cpuset: str) -> int:
    count = 0
    for part in filter(None, cpuset.split(",")):
        low, _, high = part.partition("-")
        count += int(high) - int(low) + 1 if high else 1
    return count


class BatchResource(CalculatePlugin, PreparePlugin, NeedSyncPlugin):
    name = "BatchResource"

    def reset(self, node: NodeView, message: str) -> list[ResourceItem]:
        return [ResourceItem(name, None, message=message, reset=True) for name in BATCH_RESOURCES]

    def calculate(self, strategy: ColocationStrategy, node: NodeView, pods: Sequence[object], metric: NodeMetric | None, now: float) -> list[ResourceItem]:
        if node is None or strategy is None:
            raise ValueError("node and strategy are required")
        if metric is None or metric.update_time is None or now > metric.update_time + strategy.degrade_time_minutes * 60:
            return self.reset(node, DEGRADE_MESSAGE)
        capacity = (node.capacity.get("cpu", 0), node.capacity.get("memory", 0))
        margin = (
            capacity[0] * (100 - strategy.cpu_reclaim_threshold_percent) // 100,
            capacity[1] * (100 - strategy.memory_reclaim_threshold_percent) // 100,
        )
        reserved = _reserved(node)
        system_or_reserved = (max(metric.system_cpu, reserved[0]), max(metric.system_memory, reserved[1]))
        hp_request, hp_used, hp_max = [0, 0], [0, 0], [0, 0]
        listed = set()
        for pod in pods:
            if not isinstance(pod, Pod) or pod.phase not in (PodPhase.RUNNING, PodPhase.PENDING):
                continue
            listed.add(pod.key)
            if not is_high_priority(pod):
                continue
            request = _pair(pod.requests.only("cpu", "memory"))
            usage = metric.pods.get(pod.key)
            for i in (0, 1):
                hp_request[i] += request[i]
            if usage is None:
                hp_used[0] += request[0]
                hp_used[1] += request[1]
                continue
            used = (request[0], usage.memory) if pod.labels.get(QOS_LABEL) == "LSE" else (usage.cpu, usage.memory)
            for i in (0, 1):
                hp_used[i] += used[i]
                hp_max[i] += max(request[i], (usage.cpu, usage.memory)[i])
        for key, usage in metric.pods.items():  # dangling: usage of pods we were not shown
            if key not in listed:
                hp_used[0] += usage.cpu
                hp_used[1] += usage.memory
                hp_max[0] += usage.cpu
                hp_max[1] += usage.memory
        by_usage = [max(capacity[i] - margin[i] - system_or_reserved[i] - hp_used[i], 0) for i in (0, 1)]
        by_request = [max(capacity[i] - margin[i] - reserved[i] - hp_request[i], 0) for i in (0, 1)]
        by_max = [max(capacity[i] - margin[i] - system_or_reserved[i] - hp_max[i], 0) for i in (0, 1)]
        if strategy.cpu_calculate_policy is CalculatePolicy.MAX_USAGE_REQUEST:
            cpu, cpu_used, cpu_system = by_max[0], hp_max[0], system_or_reserved[0]
        else:
            cpu, cpu_used, cpu_system = by_usage[0], hp_used[0], system_or_reserved[0]
        memory_policy = strategy.memory_calculate_policy
        if memory_policy is CalculatePolicy.REQUEST:
            memory, mem_used, mem_system = by_request[1], hp_request[1], reserved[1]
        elif memory_policy is CalculatePolicy.MAX_USAGE_REQUEST:
            memory, mem_used, mem_system = by_max[1], hp_max[1], system_or_reserved[1]
        else:
            memory, mem_used, mem_system = by_usage[1], hp_used[1], system_or_reserved[1]
        if strategy.batch_cpu_threshold_percent is not None:
            cpu = min(cpu, capacity[0] * strategy.batch_cpu_threshold_percent // 100)
        if strategy.batch_memory_threshold_percent is not None:
            memory = min(memory, capacity[1] * strategy.batch_memory_threshold_percent // 100)
        gb = 10**9
        return [
            ResourceItem(
                BATCH_CPU,
                cpu,
                message=f"batchAllocatable[CPU(Milli-Core)]:{cpu} = nodeCapacity:{capacity[0]} - nodeSafetyMargin:{margin[0]} "
                f"- systemUsageOrNodeReserved:{cpu_system} - podHPUsed:{cpu_used}",
            ),
            ResourceItem(
                BATCH_MEMORY,
                memory,
                message=f"batchAllocatable[Mem(GB)]:{memory / gb:g} = nodeCapacity:{capacity[1] / gb:g} - nodeSafetyMargin:{margin[1] / gb:g} "
                f"- systemUsageOrNodeReserved:{mem_system / gb:g} - podHPUsed:{mem_used / gb:g}",
            ),
        ]

    def prepare(self, strategy: ColocationStrategy, node: NodeView, result: NodeResource) -> None:
        for name in BATCH_RESOURCES:
            amount = result.resources.get(name)
            if amount is None or result.resets.get(name):
                node.capacity.pop(name, None)
                node.allocatable.pop(name, None)
            else:
                node.capacity[name] = node.allocatable[name] = int(amount)

    def need_sync(self, strategy: ColocationStrategy, old: NodeView, new: NodeView) -> tuple[bool, str]:
        for name in BATCH_RESOURCES:
            if resource_differs(old.allocatable, new.allocatable, name, strategy.resource_diff_threshold):
                return True, f"{name} changed from {old.allocatable.get(name)} to {new.allocatable.get(name)}"
        return False, ""


def resource_differs(old: dict[str, int], new: dict[str, int], name: str, threshold: float) -> bool:
    """Presence differs, or the relative change exceeds ``threshold`` (so 0 -> anything syncs)."""
    if (name in old) != (name in new):
        return True
    if name not in old:
        return False
    return abs(new[name] - old[name]) > old[name] * threshold
