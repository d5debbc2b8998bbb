"""A profile from the config file: which plugins, in what order, with what score weights."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu.config import SchedulerConfig, scoring_keys
from vgpu.errors import ConfigError
from vgpu_scheduler.framework import interfaces as fw
from vgpu_scheduler.framework.handle import Host, PluginFactory
from vgpu_scheduler.framework.runtime import Framework


def build(config: SchedulerConfig, registry: Mapping[str, PluginFactory],
          host: Host | None = None) -> Framework:
    """The profile's framework, its configured plugins built with it as their handle (as
    kube-scheduler's ``NewFramework``) over what ``host`` lends it; unknown names and
    incomplete profiles are :class:`ConfigError` naming the key."""
    unknown = [name for name in config.plugins if name not in registry]
    if unknown:
        raise ConfigError(f"scheduler.plugins: unknown plugin {unknown[0]!r}; known: "
                          f"{', '.join(sorted(registry))}")
    framework = Framework(
        percentage_of_nodes_to_score=scoring_keys.percentage_to_score(config), host=host)
    plugins: list[Any] = []
    for name in config.plugins:
        plugin = registry[name](framework)
        if getattr(plugin, "name", None) != name:
            raise ConfigError(f"scheduler.plugins: plugin {name!r} calls itself "
                              f"{getattr(plugin, 'name', None)!r}")
        plugins.append(plugin)
    weights = config.weights()
    for name in weights:
        plugin = plugins[config.plugins.index(name)]
        if not isinstance(plugin, fw.ScorePlugin):
            raise ConfigError(f"scheduler.scoreWeights: {name!r} does not score nodes")
    if not any(isinstance(p, fw.QueueSortPlugin) for p in plugins):
        raise ConfigError("scheduler.plugins: no queue sort plugin (add PrioritySort)")
    if sum(isinstance(p, fw.QueueSortPlugin) for p in plugins) > 1:
        raise ConfigError("scheduler.plugins: more than one queue sort plugin")
    if not any(isinstance(p, fw.BindPlugin) for p in plugins):
        raise ConfigError("scheduler.plugins: no bind plugin (add VGPUBinder)")
    framework.load(plugins, weights)
    return framework
