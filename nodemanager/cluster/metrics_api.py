"""Usage from the Kubernetes metrics API (``metrics.k8s.io/v1beta1``, metrics-server).

``read_metrics`` lists NodeMetrics and PodMetrics through the official client's
CustomObjectsApi; ``node_metrics`` turns the two lists into one ``NodeMetric`` per node:
a node's system usage is what the node uses beyond its pods (clamped at zero), and its
update time is the metrics' timestamp, so stale metrics degrade batch resources.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodemanager.cluster.kubernetes.convert import parse_time
from nodemanager.model import resource_amount
from nodemanager.noderesource.model import NodeMetric, PodUsage

GROUP, VERSION = "metrics.k8s.io", "v1beta1"


def _usage(doc: Mapping[str, Any], where: str) -> tuple[int, int]:
    usage = doc.get("usage") or {}
    return resource_amount("cpu", usage.get("cpu", 0), f"{where}.usage.cpu"), resource_amount("memory", usage.get("memory", 0), f"{where}.usage.memory")


def node_metrics(nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], pod_nodes: Mapping[str, str]) -> dict[str, NodeMetric]:
    """``pod_nodes`` maps "namespace/name" to the node the pod runs on (from the cache)."""
    out: dict[str, NodeMetric] = {}
    totals: dict[str, tuple[int, int]] = {}
    for i, doc in enumerate(nodes):
        name = doc["metadata"]["name"]
        totals[name] = _usage(doc, f"nodes[{i}]")
        out[name] = NodeMetric(update_time=parse_time(doc.get("timestamp")))
    for i, doc in enumerate(pods):
        key = f"{doc['metadata'].get('namespace', 'default')}/{doc['metadata']['name']}"
        node = pod_nodes.get(key)
        if node not in out:
            continue
        cpu = memory = 0
        for j, container in enumerate(doc.get("containers") or []):
            c, m = _usage(container, f"pods[{i}].containers[{j}]")
            cpu, memory = cpu + c, memory + m
        out[node].pods[key] = PodUsage(cpu, memory)
    for name, metric in out.items():
        pod_cpu = sum(u.cpu for u in metric.pods.values())
        pod_memory = sum(u.memory for u in metric.pods.values())
        metric.system_cpu = max(totals[name][0] - pod_cpu, 0)
        metric.system_memory = max(totals[name][1] - pod_memory, 0)
    return out


def read_metrics(custom_objects: Any, pod_nodes: Mapping[str, str]) -> dict[str, NodeMetric]:
    """Both lists from the metrics API (``kubernetes.client.CustomObjectsApi``)."""
    nodes = custom_objects.list_cluster_custom_object(GROUP, VERSION, "nodes").get("items", [])
    pods = custom_objects.list_cluster_custom_object(GROUP, VERSION, "pods").get("items", [])
    return node_metrics(nodes, pods, pod_nodes)
