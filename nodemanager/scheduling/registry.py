"""Plugin factories by name. A registry is built explicitly; nothing registers at import."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from nodemanager.scheduling.interfaces import FrameworkHandle, Plugin

PluginFactory = Callable[[FrameworkHandle, Mapping[str, object]], Plugin]


class Registry:
    def __init__(self) -> None:
        self._factories: dict[str, PluginFactory] = {}

    def register(self, name: str, factory: PluginFactory) -> None:
        if name in self._factories:
            raise ValueError(f"a plugin named {name!r} is already registered")
        self._factories[name] = factory

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._factories))

    def create(self, name: str, handle: FrameworkHandle, args: Mapping[str, object]) -> Plugin:
        return self.factory(name)(handle, args)

    def factory(self, name: str) -> PluginFactory:
        return self._factories[name]


def default_registry() -> Registry:
    """A new registry holding the built-in plugins."""
    from nodemanager.scheduling.plugins import BUILTIN_PLUGINS

    registry = Registry()
    for plugin_class in BUILTIN_PLUGINS:
        registry.register(plugin_class.name, plugin_class)
    return registry
