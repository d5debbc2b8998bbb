"""The checks every annotation codec applies to its JSON (docs/contracts.md#conventions):
each failure a :class:`vgpu.errors.CodecError` whose message names the annotation and the
field, and values printed at most 60 characters long."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from vgpu.errors import CodecError


def load(text: Any, key: str) -> Any:
    if not isinstance(text, str):
        raise CodecError(f"{key}: expected a JSON string, got {type(text).__name__}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CodecError(f"{key}: not valid JSON: {exc.msg} at position {exc.pos}") from None
    except (ValueError, RecursionError) as exc:
        # An integer of more than 4300 digits, or nesting deeper than the parser recurses.
        raise CodecError(f"{key}: not valid JSON: {exc}") from None


def obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise CodecError(f"{where}: expected an object, got {json.dumps(value)[:60]}")
    return value


def integer(obj: Mapping[str, Any], name: str, where: str, *, lo: int | None = 0,
            hi: int) -> int:
    """An integer field in ``[lo, hi]``: every number read from an object has a ceiling
    (:mod:`vgpu.limits`), so none can overflow what reads it later."""
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(f"{where}.{name}: expected an integer, got {json.dumps(value)[:60]}")
    if lo is not None and value < lo:
        raise CodecError(f"{where}.{name}: {value} is below {lo}")
    if value > hi:
        raise CodecError(f"{where}.{name}: {str(value)[:30]} is above {hi}")
    return value


def string(obj: Mapping[str, Any], name: str, where: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value:
        raise CodecError(f"{where}.{name}: expected a non-empty string, got "
                         f"{json.dumps(value)[:60]}")
    return value


def boolean(obj: Mapping[str, Any], name: str, where: str) -> bool:
    value = obj.get(name)
    if not isinstance(value, bool):
        raise CodecError(f"{where}.{name}: expected true or false, got {json.dumps(value)[:60]}")
    return value


def dump(value: Any) -> str:
    """Compact, keys sorted: the form the components write."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
