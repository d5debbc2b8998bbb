"""Reading fields of API objects that may be malformed: the type checks every parser
shares, each failure a :class:`vgpu.errors.RequestError` naming the path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu.errors import RequestError


def as_list(value: Any, where: str) -> list[Any]:
    """A list field; None reads as empty."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise RequestError(f"{where} must be a list")
    return value


def as_map(value: Any, where: str) -> Mapping[str, Any]:
    """A mapping field; None reads as empty."""
    if type(value) is dict:  # decoded JSON: skip the ABC check (yappi: hot in a burst)
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RequestError(f"{where} must be a mapping")
    return value
