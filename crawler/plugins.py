"""Plugins by registry: a name maps to a ``"module:attr"`` string, imported on first use.

Built-in registries are plain dicts in the module that owns the extension point;
third-party packages add names through the entry-point group of the same name
(``crawler.protocols``, ``crawler.parsers``), merged into the same registry.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from crawler.errors import PluginError, PluginNotFound


class Registry:
    def __init__(self, group: str, builtins: dict[str, str]) -> None:
        self.group = group
        self._targets = dict(builtins)
        for ep in entry_points(group=group):
            self._targets.setdefault(ep.name, ep.value)
        self._loaded: dict[str, Any] = {}

    def names(self) -> list[str]:
        return sorted(self._targets)

    def __contains__(self, name: str) -> bool:
        return name in self._targets

    def load(self, name: str) -> Any:
        if name in self._loaded:
            return self._loaded[name]
        target = self._targets.get(name)
        if target is None:
            raise PluginNotFound(f"no {self.group} plugin named {name!r} (known: {', '.join(self.names())})")
        module_name, _, attr = target.partition(":")
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise PluginError(f"{self.group} plugin {name!r}: cannot load {target} ({exc})") from exc
        self._loaded[name] = obj
        return obj
