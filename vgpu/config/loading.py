"""From a file (YAML or JSON) and ``VGPU_*`` environment variables to a validated
:class:`~vgpu.config.sections.Config`, and back to the mapping a file would hold (its
``version`` first: :mod:`vgpu.config.version`)."""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Mapping
from typing import Any

import yaml

from vgpu.config import version
from vgpu.config.sections import Config
from vgpu.errors import ConfigError

_ENV_PREFIX = "VGPU_"


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
    if not path:
        data = version.settings_of(data)
    # key=str: YAML keys need not be strings (``1: a``), and ints do not sort with strs.
    unknown = sorted(set(data) - set(fields), key=str)
    if unknown:
        where = f"{path}." if path else ""
        # The top level also takes the file's version, which is no setting.
        allowed = sorted([*fields, *([] if path else [version.KEY])])
        raise ConfigError(
            f"{where}{unknown[0]}: unknown key; allowed here: {', '.join(allowed)}"
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


def to_mapping(config: Config) -> dict[str, Any]:
    """The camelCase mapping a file would hold, its version first; ``load`` of its dump
    gives the same config."""
    return {version.KEY: version.CURRENT, **_settings(config)}


def _settings(section: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            value = _settings(value)
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
    """(key, default, doc) for the file's version and every setting, for
    ``vgpu config defaults --explain``."""
    rows: list[tuple[str, str, str]] = [(version.KEY, json.dumps(version.CURRENT), version.DOC)]

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
