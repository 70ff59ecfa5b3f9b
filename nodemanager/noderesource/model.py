"""What the node-resource framework works on: items, the merged result, metrics, a node."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ResourceItem:
    """One plugin's verdict about one resource; ``quantity`` None (or ``reset``) removes it."""

    name: str
    quantity: int | None = None
    zone_quantity: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    message: str = ""
    reset: bool = False


@dataclass
class NodeResource:
    """The merged result of every Calculate plugin."""

    resources: dict[str, int | None] = field(default_factory=dict)
    zone_resources: dict[str, dict[str, int]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    resets: dict[str, bool] = field(default_factory=dict)

    def set(self, items: Iterable[ResourceItem]) -> None:
        """Later items overwrite earlier ones per resource; labels and annotations merge;
        only non-empty messages are kept."""
        for item in items:
            self.resources[item.name] = item.quantity
            self.resets[item.name] = item.reset
            for zone, amount in item.zone_quantity.items():
                self.zone_resources.setdefault(zone, {})[item.name] = amount
            self.labels.update(item.labels)
            self.annotations.update(item.annotations)
            if item.message:
                self.messages[item.name] = item.message


@dataclass
class PodUsage:
    cpu: int  # milli-cores
    memory: int  # bytes


@dataclass
class NodeMetric:
    """Usage a metrics source reported for one node, and when."""

    update_time: float | None
    system_cpu: int = 0
    system_memory: int = 0
    pods: dict[str, PodUsage] = field(default_factory=dict)  # pod key -> usage


@dataclass
class NodeView:
    """The parts of a node that the framework reads and writes (a mutable copy)."""

    name: str
    capacity: dict[str, int]
    allocatable: dict[str, int]
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
