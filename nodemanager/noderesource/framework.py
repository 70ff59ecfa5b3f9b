"""The node-resource calculation framework (Koordinator's slo-controller/noderesource).

Plugins have a name and serve stages; each stage keeps its plugins in registration
order. One reconcile of a node:

1. colocation disabled -> every Calculate plugin's ``reset`` (its resources are removed);
   otherwise every plugin's ``calculate``; a plugin that fails loses only its own items;
2. PreUpdate, once; then Prepare applies the merged result to a *copy* of the node (it
   must be idempotent: it runs again on every retry of the update);
3. the node is synced when it never was, when ``updateTimeThresholdSeconds`` passed since the
   last sync, or when a NeedSync plugin says so (the first yes wins, with its reason).

Pure: no I/O and no clock; the caller passes ``now`` and writes the result.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from nodemanager.noderesource.model import NodeMetric, NodeResource, NodeView, ResourceItem
from nodemanager.noderesource.strategy import ColocationStrategy

log = logging.getLogger("nodemanager.noderesource")


class Plugin:
    name = ""


class SetupPlugin(Plugin):
    def setup(self, options: Mapping[str, object]) -> None:
        raise NotImplementedError


class CalculatePlugin(Plugin):
    def calculate(self, strategy: ColocationStrategy, node: NodeView, pods: Sequence[object], metric: NodeMetric | None, now: float) -> list[ResourceItem]:
        raise NotImplementedError

    def reset(self, node: NodeView, message: str) -> list[ResourceItem]:
        raise NotImplementedError


class PreUpdatePlugin(Plugin):
    def pre_update(self, strategy: ColocationStrategy, node: NodeView, result: NodeResource) -> None:
        raise NotImplementedError


class PreparePlugin(Plugin):
    def prepare(self, strategy: ColocationStrategy, node: NodeView, result: NodeResource) -> None:
        """Apply ``result`` to ``node`` (a copy) in place; must be idempotent."""
        raise NotImplementedError


class NeedSyncPlugin(Plugin):
    def need_sync(self, strategy: ColocationStrategy, old: NodeView, new: NodeView) -> tuple[bool, str]:
        raise NotImplementedError


class NeedSyncMetaPlugin(Plugin):
    def need_sync_meta(self, strategy: ColocationStrategy, old: NodeView, new: NodeView) -> tuple[bool, str]:
        raise NotImplementedError


STAGES: dict[str, type[Plugin]] = {
    "setup": SetupPlugin,
    "calculate": CalculatePlugin,
    "preUpdate": PreUpdatePlugin,
    "prepare": PreparePlugin,
    "needSync": NeedSyncPlugin,
    "needSyncMeta": NeedSyncMetaPlugin,
}


def plugin_enabled(name: str, switches: Sequence[str]) -> bool:
    """Koordinator's rule: the first switch naming the plugin (``Name`` or ``-Name``) decides;
    otherwise it is enabled when ``*`` is among the switches."""
    for switch in switches:
        if switch == name:
            return True
        if switch == f"-{name}":
            return False
    return "*" in switches


class StageRegistry:
    """One stage's plugins, in registration order; a duplicate name is skipped, not fatal."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self._plugins: list[Plugin] = []

    def register(self, *plugins: Plugin, enabled: Sequence[str] = ("*",)) -> None:
        for plugin in plugins:
            if not isinstance(plugin, STAGES[self.stage]):
                raise TypeError(f"plugin {plugin.name!r} does not serve stage {self.stage}")
            if any(p.name == plugin.name for p in self._plugins):
                log.error("%s: plugin %s is already registered; skipped", self.stage, plugin.name)
                continue
            if plugin_enabled(plugin.name, enabled):
                self._plugins.append(plugin)

    def unregister(self, name: str) -> None:
        self._plugins = [p for p in self._plugins if p.name != name]

    def all(self) -> list[Plugin]:
        return list(self._plugins)


@dataclass
class ReconcileResult:
    node: NodeView  # the node as it should be (the input when nothing changed)
    need_sync: bool
    reason: str
    need_sync_meta: bool = False
    meta_reason: str = ""
    messages: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class NodeResourceFramework:
    def __init__(self, plugins: Iterable[Plugin], enabled: Sequence[str] = ("*",)) -> None:
        self.stages = {stage: StageRegistry(stage) for stage in STAGES}
        plugins = list(plugins)
        for stage, kind in STAGES.items():
            self.stages[stage].register(*(p for p in plugins if isinstance(p, kind)), enabled=enabled)

    def setup(self, options: Mapping[str, object]) -> list[str]:
        """Run every Setup plugin once; failures are reported, the others still run."""
        errors = []
        for plugin in self.stages["setup"].all():
            try:
                plugin.setup(options)  # type: ignore[attr-defined]
            except Exception as exc:
                errors.append(f"{plugin.name}: setup failed: {exc}")
        return errors

    def calculate(
        self, strategy: ColocationStrategy, node: NodeView, pods: Sequence[object], metric: NodeMetric | None, now: float
    ) -> tuple[NodeResource, list[str]]:
        result, errors = NodeResource(), []
        for plugin in self.stages["calculate"].all():
            try:
                if strategy.enable:
                    items = plugin.calculate(strategy, node, pods, metric, now)  # type: ignore[attr-defined]
                else:
                    items = plugin.reset(node, "node colocation is disabled in Config, reason: DisableInConfig")  # type: ignore[attr-defined]
            except Exception as exc:
                errors.append(f"{plugin.name}: calculate failed: {exc}")
                continue
            result.set(items)
        return result, errors

    def reconcile(
        self, strategy: ColocationStrategy, node: NodeView, pods: Sequence[object], metric: NodeMetric | None, *, now: float, last_sync: float | None
    ) -> ReconcileResult:
        result, errors = self.calculate(strategy, node, pods, metric, now)
        for plugin in self.stages["preUpdate"].all():
            try:
                plugin.pre_update(strategy, node, result)  # type: ignore[attr-defined]
            except Exception as exc:
                errors.append(f"{plugin.name}: pre-update failed: {exc}")
        prepared = self.prepare(strategy, node, result)
        if last_sync is None:
            need, reason = True, "never synced"
        elif now - last_sync > strategy.update_time_threshold_seconds:
            need, reason = True, f"last sync {now - last_sync:.0f}s ago (> {strategy.update_time_threshold_seconds}s)"
        else:
            need, reason = self._first_yes("needSync", strategy, node, prepared)
        meta, meta_reason = self._first_yes("needSyncMeta", strategy, node, prepared)
        return ReconcileResult(prepared, need, reason, meta, meta_reason, dict(result.messages), errors)

    def prepare(self, strategy: ColocationStrategy, node: NodeView, result: NodeResource) -> NodeView:
        """Prepare on a deep copy: the caller's node is never changed."""
        prepared = copy.deepcopy(node)
        for plugin in self.stages["prepare"].all():
            plugin.prepare(strategy, prepared, result)  # type: ignore[attr-defined]
        return prepared

    def _first_yes(self, stage: str, strategy: ColocationStrategy, old: NodeView, new: NodeView) -> tuple[bool, str]:
        method = "need_sync" if stage == "needSync" else "need_sync_meta"
        for plugin in self.stages[stage].all():
            yes, why = getattr(plugin, method)(strategy, old, new)
            if yes:
                return True, f"{plugin.name}: {why}"
        return False, ""
