"""Drift: a node its pool would no longer boot (Karpenter's static drift). Compared with
what the pool says now: instance type (names, globs, exclusions, architectures, generation), capacity
type, zone, and the labels and taints the pool puts on its nodes; and with the image a boot
of its type would use now (``nodes.bootImageSpec`` as last resolved), where both are known
(not with a launch template, which names its own image)."""

from __future__ import annotations

from cloud.catalog import Catalog
from nodemanager.config.schema import Pool
from nodemanager.model import Node, Taint


def drifted(node: Node, pool: Pool, catalog: Catalog, image: str | None = None) -> str:
    """Why ``node`` no longer matches ``pool`` or the current boot ``image`` ("" when it does)."""
    if node.instance_type not in catalog.matching(**pool.type_query()):
        return f"instance type {node.instance_type} is no longer allowed"
    if node.capacity_type not in pool.capacity_types:
        return f"capacity type {node.capacity_type} is no longer allowed"
    if pool.zones and node.zone not in pool.zones:
        return f"zone {node.zone} is no longer allowed"
    changed = sorted(k for k, v in pool.labels.items() if node.labels.get(k) != v)
    if changed:
        return f"label {changed[0]} changed"
    taints = {Taint(t.key, t.effect, t.value) for t in pool.taints}
    if taints != set(node.taints):
        return "taints changed"
    if image and node.image_id and node.image_id != image:
        return f"image {node.image_id} replaced by {image}"
    return ""
