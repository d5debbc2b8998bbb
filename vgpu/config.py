"""The one typed configuration of vgpu.

Every knob of DESIGN §2 plus the per-component settings, as frozen dataclasses. A file
(YAML or JSON) uses camelCase keys as HAMi's config does (``deviceSplitCount``); an
environment variable ``VGPU_<SNAKE_CASE>`` overrides a top-level key and
``VGPU_<SECTION>__<SNAKE_CASE>`` a key of a section (``VGPU_SCHEDULER__PERMIT_TIMEOUT_SECONDS``).
Every wrong key or value is rejected with a message naming the key, the value and what is
allowed; nothing is silently ignored.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from vgpu import policy
from vgpu.errors import ConfigError

_ENV_PREFIX = "VGPU_"


def _knob(default: Any, doc: str, *, lo: float | None = None, hi: float | None = None,
          choices: tuple[str, ...] | None = None) -> Any:
    return field(default=default, metadata={"doc": doc, "lo": lo, "hi": hi, "choices": choices})


def _section(factory: Any, doc: str) -> Any:
    return field(default_factory=factory, metadata={"doc": doc})


@dataclass(frozen=True)
class ResourceNames:
    """The extended-resource names users write in ``resources.limits``."""

    gpu: str = _knob("nvidia.com/gpu", "number of vGPUs; each on a distinct physical GPU")
    gpumem: str = _knob("nvidia.com/gpumem", "device memory per vGPU, MiB")
    gpumem_percentage: str = _knob(
        "nvidia.com/gpumem-percentage", "device memory per vGPU, percent of the chosen GPU"
    )
    gpucores: str = _knob("nvidia.com/gpucores", "compute share per vGPU, percent")
    priority: str = _knob("nvidia.com/priority", "task priority for the in-container limiter")

    def all(self) -> tuple[str, str, str, str, str]:
        return (self.gpu, self.gpumem, self.gpumem_percentage, self.gpucores, self.priority)


@dataclass(frozen=True)
class WebhookConfig:
    port: int = _knob(9443, "HTTPS port of /mutate", lo=1, hi=65535)
    metrics_port: int = _knob(9395, "plain-HTTP port of /healthz, /readyz and /metrics",
                              lo=1, hi=65535)
    cert_reload_seconds: float = _knob(
        10.0, "how often the certificate and key files are checked for a change", lo=0.1,
        hi=3600)


#: The scheduler's default profile: plugins in the order their extension points run.
DEFAULT_SCHEDULER_PLUGINS: tuple[str, ...] = (
    "PrioritySort", "NodeUnschedulable", "TaintToleration", "NodeAffinity",
    "NodeResourcesFit", "VGPU", "AllocationGate", "VGPUBinder",
)


def _plugin_name_ok(name: str) -> bool:
    return name.isascii() and name.replace("_", "").replace("-", "").isalnum()


@dataclass(frozen=True)
class SchedulerConfig:
    permit_timeout_seconds: float = _knob(
        30.0, "how long a node's gate waits for the in-flight pod to be allocated", lo=0.1
    )
    assume_ttl_seconds: float = _knob(
        120.0, "how long a bound placement stays assumed until the watch confirms it", lo=1
    )
    plugins: tuple[str, ...] = _knob(
        DEFAULT_SCHEDULER_PLUGINS,
        "plugins of the profile, in the order their extension points run (names from the "
        "scheduler's registry)",
    )
    score_weights: tuple[str, ...] = _knob(
        (), "score weights as Name=weight (default 1 for every score plugin in plugins)"
    )
    nodes_to_score: int = _knob(
        64, "feasible nodes to find and score per pod (percentageOfNodesToScore in absolute "
        "numbers); 0 = every feasible node", lo=0,
    )
    pod_initial_backoff_seconds: float = _knob(1.0, "backoff after a pod's first failed attempt",
                                               lo=0)
    pod_max_backoff_seconds: float = _knob(10.0, "backoff cap; it doubles per failed attempt",
                                           lo=0)
    pod_max_unschedulable_seconds: float = _knob(
        300.0, "an unschedulable pod no cluster event woke is retried after this long", lo=1
    )
    bind_workers: int = _knob(
        16, "threads that run bindings in the threaded scheduler; 0 = bind in the scheduling "
        "thread", lo=0, hi=256,
    )
    api_qps: float = _knob(
        500.0, "client-side limit on the scheduler's API requests per second (bindings, "
        "lists, watches); 0 = no limit", lo=0,
    )
    api_burst: int = _knob(1000, "requests allowed above apiQps in a burst", lo=1)
    event_qps: float = _knob(
        50.0, "client-side limit on Events written per second (a connection of their own, so "
        "that events never delay bindings); 0 = no limit", lo=0,
    )
    event_burst: int = _knob(100, "Events allowed above eventQps in a burst", lo=1)
    event_repeat_seconds: float = _knob(
        10.0, "a pod's event of the same reason goes out again at the earliest after this "
        "long; the same message again after twice as long each time", lo=0,
    )
    event_repeat_max_seconds: float = _knob(
        600.0, "the longest spacing between repeats of the same event of a pod", lo=0,
    )

    def __post_init__(self) -> None:
        if not self.plugins:
            raise ConfigError("scheduler.plugins: empty; name at least a queue sort, a filter "
                              "and a binder")
        seen: set[str] = set()
        for name in self.plugins:
            if not _plugin_name_ok(name):
                raise ConfigError(f"scheduler.plugins: {name!r} is not a plugin name")
            if name in seen:
                raise ConfigError(f"scheduler.plugins: {name!r} is listed twice")
            seen.add(name)
        self.weights()
        if self.pod_max_backoff_seconds < self.pod_initial_backoff_seconds:
            raise ConfigError(
                f"scheduler.podMaxBackoffSeconds: {self.pod_max_backoff_seconds!r} is below "
                f"podInitialBackoffSeconds ({self.pod_initial_backoff_seconds!r})")

    def weights(self) -> dict[str, int]:
        """``score_weights`` as a mapping; every name must be one of ``plugins``."""
        out: dict[str, int] = {}
        for entry in self.score_weights:
            name, sep, raw = entry.partition("=")
            name = name.strip()
            try:
                weight = int(raw.strip()) if sep else -1
            except ValueError:
                weight = -1
            if weight < 0 or weight > 1000:
                raise ConfigError(f"scheduler.scoreWeights: {entry!r} is not Name=weight with a "
                                  "weight from 0 to 1000")
            if name not in self.plugins:
                raise ConfigError(f"scheduler.scoreWeights: {name!r} is not in scheduler.plugins")
            out[name] = weight
        return out
    metrics_port: int = _knob(9396, "plain-HTTP port of /healthz, /readyz and /metrics",
                              lo=1, hi=65535)


@dataclass(frozen=True)
class NodeAgentConfig:
    resource_name: str = _knob("", "resource advertised to the kubelet; empty = resourceNames.gpu")
    device_plugin_dir: str = _knob("/var/lib/kubelet/device-plugins",
                                   "kubelet device-plugin folder")
    heartbeat_seconds: float = _knob(30.0, "how often the inventory heartbeat is written", lo=1)
    metrics_port: int = _knob(9394, "plain-HTTP port of /healthz and /metrics", lo=1, hi=65535)
    hami_core_path: str = _knob("", "host path of HAMi-core's libvgpu.so; empty = not mounted")
    shared_cache_dir: str = _knob("/tmp/vgpu", "folder holding each container's shared cache file")
    health_quiet_seconds: float = _knob(
        60.0, "how long a GPU must stay free of faults before it is healthy again", lo=0
    )
    allocate_wait_seconds: float = _knob(
        5.0, "how long Allocate waits for the in-flight pod to reach the local pod watch",
        lo=0, hi=60
    )


@dataclass(frozen=True)
class Config:
    """Cluster-wide settings. Defaults match HAMi's so existing pods behave the same."""

    resource_names: ResourceNames = _section(ResourceNames, "resource names users write")
    device_split_count: int = _knob(10, "tasks per physical GPU", lo=1, hi=1024)
    device_memory_scaling: float = _knob(
        1.0, "device memory multiplier; above 1 oversubscribes memory", lo=0.01, hi=100
    )
    default_mem: int = _knob(0, "MiB per vGPU when a container gives none; 0 = whole GPU", lo=0)
    default_cores: int = _knob(0, "compute percent per vGPU when a container gives none",
                               lo=0, hi=100)
    disable_core_limit: bool = _knob(False, "do not hand a compute limit to containers")
    scheduler_name: str = _knob("vgpu-scheduler", "spec.schedulerName of GPU pods")
    default_gpu_policy: str = _knob(policy.DEFAULT_GPU_POLICY, "GPU choice policy",
                                    choices=policy.GPU_POLICIES)
    default_node_policy: str = _knob(policy.DEFAULT_NODE_POLICY, "node ranking policy",
                                     choices=policy.NODE_POLICIES)
    node_heartbeat_expiry_seconds: float = _knob(
        180.0, "a node whose inventory heartbeat is older is not scheduled onto", lo=1
    )
    webhook: WebhookConfig = _section(WebhookConfig, "admission webhook")
    scheduler: SchedulerConfig = _section(SchedulerConfig, "scheduler")
    nodeagent: NodeAgentConfig = _section(NodeAgentConfig, "node agent")


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _type_name(tp: Any) -> str:
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


_STRINGS = tuple[str, ...]


def _coerce_strings(path: str, value: Any, meta: Mapping[str, Any]) -> tuple[str, ...]:
    """A list of strings: a YAML/JSON list, or one comma-separated string (env, or a file)."""
    if isinstance(value, str):
        items: list[Any] = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list):
        items = value
    else:
        raise ConfigError(f"{path}: {value!r} is not valid; expected a list of strings")
    out: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ConfigError(f"{path}: {item!r} is not valid; expected a non-empty string")
        out.append(item.strip())
    choices = meta.get("choices")
    for item in out:
        if choices is not None and item not in choices:
            raise ConfigError(f"{path}: {item!r} is not allowed; allowed: {', '.join(choices)}")
    return tuple(out)


def _coerce(path: str, value: Any, tp: Any, meta: Mapping[str, Any], from_env: bool) -> Any:
    """Check one scalar value against its type and bounds; strings from env are converted."""
    if tp == _STRINGS:
        return _coerce_strings(path, value, meta)
    if from_env:
        value = _from_env_text(path, value, tp)
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok:
            value = float(value)
            # nan passes every bound check (all comparisons are false) and inf makes no
            # sense for a size or a duration; both come from YAML's .nan/.inf or the env.
            if not math.isfinite(value):
                raise ConfigError(f"{path}: {value!r} is not valid; expected a finite number")
    else:
        ok = isinstance(value, str)
    if not ok:
        raise ConfigError(f"{path}: {value!r} is not valid; expected {_type_name(tp)}")
    lo, hi, choices = meta.get("lo"), meta.get("hi"), meta.get("choices")
    if lo is not None and value < lo:
        raise ConfigError(f"{path}: {value!r} is too small; allowed: at least {lo}")
    if hi is not None and value > hi:
        raise ConfigError(f"{path}: {value!r} is too large; allowed: at most {hi}")
    if choices is not None and value not in choices:
        raise ConfigError(f"{path}: {value!r} is not allowed; allowed: {', '.join(choices)}")
    return value


def _from_env_text(path: str, text: str, tp: Any) -> Any:
    try:
        if tp is bool:
            lowered = text.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if tp is int:
            return int(text)
        if tp is float:
            return float(text)
    except ValueError:
        raise ConfigError(f"{path}: {text!r} is not valid; expected {_type_name(tp)}") from None
    return text


def _build(cls: Any, data: Mapping[str, Any], env: Mapping[str, str], path: str,
           env_path: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path or 'config'}: expected a mapping of keys, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {camel(f.name): f for f in dataclasses.fields(cls)}
    # key=str: YAML keys need not be strings (``1: a``), and ints do not sort with strs.
    unknown = sorted(set(data) - set(fields), key=str)
    if unknown:
        where = f"{path}." if path else ""
        raise ConfigError(
            f"{where}{unknown[0]}: unknown key; allowed here: {', '.join(sorted(fields))}"
        )
    kwargs: dict[str, Any] = {}
    for key, f in fields.items():
        tp = hints[f.name]
        key_path = f"{path}.{key}" if path else key
        env_key = f"{env_path}{f.name.upper()}"
        if dataclasses.is_dataclass(tp):
            kwargs[f.name] = _build(tp, data.get(key, {}), env, key_path, env_key + "__")
            continue
        if env_key in env:
            kwargs[f.name] = _coerce(f"{key_path} (from ${env_key})", env[env_key], tp,
                                     f.metadata, from_env=True)
        elif key in data:
            kwargs[f.name] = _coerce(key_path, data[key], tp, f.metadata, from_env=False)
    return cls(**kwargs)


def from_mapping(data: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Config:
    """Build a validated :class:`Config` from parsed file content and environment overrides."""
    unknown_env = _unknown_env(env or {})
    if unknown_env:
        raise ConfigError(f"${unknown_env}: unknown vgpu setting in the environment")
    config: Config = _build(Config, data, env or {}, "", _ENV_PREFIX)
    return config


def parse_text(text: str, source: str = "config",
               env: Mapping[str, str] | None = None) -> Config:
    """Parse YAML or JSON text (JSON is YAML, but JSON gets JSON's precise error messages)."""
    stripped = text.lstrip()
    data: Any
    # ValueError: an integer of more than 4300 digits (Python's int-from-text limit);
    # RecursionError: nesting deeper than the parsers' recursion allows.
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"{source}: not valid JSON: {exc}") from None
    else:
        try:
            data = yaml.safe_load(text)
        except (yaml.YAMLError, ValueError, RecursionError) as exc:
            raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    if data is None:
        data = {}
    try:
        return from_mapping(data, env)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def load(path: str | None, env: Mapping[str, str] | None = None) -> Config:
    """Read a config file (or none: defaults) and apply environment overrides."""
    if path is None:
        return from_mapping({}, env)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_text(text, path, env)


def to_mapping(config: Any) -> dict[str, Any]:
    """The camelCase mapping a file would hold; ``load`` of its dump gives the same config."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            value = to_mapping(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[camel(f.name)] = value
    return out


def _env_names(cls: Any, prefix: str) -> set[str]:
    names: set[str] = set()
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            names |= _env_names(tp, f"{prefix}{f.name.upper()}__")
        else:
            names.add(f"{prefix}{f.name.upper()}")
    return names


def _unknown_env(env: Mapping[str, str]) -> str | None:
    known = _env_names(Config, _ENV_PREFIX)
    # VGPU_CONFIG names the file itself and VGPU_LOG_* configure logging, not the cluster.
    ignored = ("VGPU_CONFIG", "VGPU_LOG_")
    for key in sorted(env):
        if key.startswith(_ENV_PREFIX) and key not in known and not key.startswith(ignored):
            return key
    return None


def describe() -> list[tuple[str, str, str]]:
    """(key, default, doc) for every setting, for ``vgpu config defaults --explain``."""
    rows: list[tuple[str, str, str]] = []

    def walk(cls: Any, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            key = prefix + camel(f.name)
            if dataclasses.is_dataclass(hints[f.name]):
                walk(hints[f.name], key + ".")
            else:
                rows.append((key, json.dumps(f.default), str(f.metadata.get("doc", ""))))

    walk(Config, "")
    return rows


