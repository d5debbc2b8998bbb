"""Times on the wire: the one parser and formatter of RFC 3339 timestamps.

The API server writes ``Time`` (``2024-05-01T10:00:00Z``) and ``MicroTime``
(``...T10:00:00.123456Z``); vgpu's own annotations use the MicroTime form. Every reader of
such a field goes through :func:`parse` (strict, for annotations whose meaning depends on
the time) or :func:`epoch` (lenient, for fields the API server wrote, where an unreadable
value reads as absent).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from vgpu.errors import CodecError


def parse(text: Any, key: str = "time") -> dt.datetime:
    """An RFC 3339 time (``Z`` or an offset; fractional seconds optional), timezone-aware;
    :class:`CodecError` naming ``key`` when it is not one."""
    if not isinstance(text, str):
        raise CodecError(f"{key}: expected an RFC 3339 time string")
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise CodecError(f"{key}: {text!r} is not an RFC 3339 time") from None
    if when.tzinfo is None:
        raise CodecError(f"{key}: {text!r} has no time zone; RFC 3339 needs one")
    return when


def epoch(text: Any) -> float | None:
    """Epoch seconds of an RFC 3339 time; None when absent or unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return parse(text).timestamp()
    except CodecError:
        return None


def format_time(when: dt.datetime) -> str:
    """``Time``: UTC to the second, as the API server serves ``creationTimestamp`` and an
    Event's ``firstTimestamp``/``lastTimestamp``."""
    if when.tzinfo is None:
        raise ValueError("time must be timezone-aware")
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro(when: dt.datetime) -> str:
    """``MicroTime``: UTC with microseconds, as the API server serves it."""
    if when.tzinfo is None:
        raise ValueError("time must be timezone-aware")
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
