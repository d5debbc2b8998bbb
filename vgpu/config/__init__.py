"""The one typed configuration of vgpu.

Every knob of docs/contracts.md#config-file plus the per-component settings, as frozen
dataclasses. A file (YAML or JSON) uses camelCase keys as HAMi's config does
(``deviceSplitCount``); an environment variable ``VGPU_<SNAKE_CASE>`` overrides a top-level
key and ``VGPU_<SECTION>__<SNAKE_CASE>`` a key of a section
(``VGPU_SCHEDULER__PERMIT_TIMEOUT_SECONDS``). Every wrong key or value is rejected with a
message naming the key, the value and what is allowed; nothing is silently ignored. A file
starts with its format's ``version: v1`` (:mod:`~vgpu.config.version`; a file without it is
read as v1).

:mod:`~vgpu.config.sections` declares the settings, :mod:`~vgpu.config.loading` reads them
from files and the environment, and :mod:`~vgpu.config.cli` is ``vgpu config`` and the
``--config`` option every command takes. Callers import from this package.
"""

from __future__ import annotations

from vgpu.config.component_sections import NodeAgentConfig, QuotaConfig, WebhookConfig
from vgpu.config.loading import camel, describe, from_mapping, load, parse_text, to_mapping
from vgpu.config.plugin_args import (
    SYSTEM_DEFAULT_CONSTRAINTS,
    DefaultConstraint,
    InterPodAffinityArgs,
    NodeResourcesFitArgs,
    PodTopologySpreadArgs,
)
from vgpu.config.sections import (
    CORE_POLICY_DEFAULT,
    CORE_POLICY_DISABLE,
    CORE_POLICY_FORCE,
    DEFAULT_SCHEDULER_PLUGINS,
    DEFAULT_SCORE_WEIGHTS,
    Config,
    ResourceNames,
    SchedulerConfig,
)

__all__ = [
    "CORE_POLICY_DEFAULT",
    "CORE_POLICY_DISABLE",
    "CORE_POLICY_FORCE",
    "DEFAULT_SCHEDULER_PLUGINS",
    "DEFAULT_SCORE_WEIGHTS",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "Config",
    "DefaultConstraint",
    "InterPodAffinityArgs",
    "NodeAgentConfig",
    "NodeResourcesFitArgs",
    "PodTopologySpreadArgs",
    "QuotaConfig",
    "ResourceNames",
    "SchedulerConfig",
    "WebhookConfig",
    "camel",
    "describe",
    "from_mapping",
    "load",
    "parse_text",
    "to_mapping",
]
