"""JSONPatch (RFC 6902) operations for the admission response.

The API server applies the patch to the object it sent us, so every path must point at
something that exists (or be an ``add`` of a member of an object that exists). The
helpers here escape resource and annotation names (``nvidia.com/gpu`` →
``nvidia.com~1gpu``) and turn "these keys of this mapping should now read so" into the
operations that get there, creating the mapping when it is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Op = dict[str, Any]


def escape(token: str) -> str:
    """One JSON-Pointer reference token (RFC 6901 §4): ``~`` first, then ``/``."""
    return token.replace("~", "~0").replace("/", "~1")


def add(path: str, value: Any) -> Op:
    # "add" on an existing object member replaces it (RFC 6902 §4.1), so it serves for
    # both "set" and "create" of a member.
    return {"op": "add", "path": path, "value": value}


def remove(path: str) -> Op:
    return {"op": "remove", "path": path}


def update_mapping(path: str, current: Any, desired: Mapping[str, Any]) -> list[Op]:
    """Operations turning the mapping at ``path`` (``current``) into ``desired``.

    ``current`` is what the object holds there: a mapping, or ``None``/absent, in which
    case the whole mapping is added in one operation (patching a member into a missing
    object would fail on the API server).
    """
    if not isinstance(current, Mapping):
        return [add(path, dict(desired))] if desired else []
    ops = [remove(f"{path}/{escape(key)}") for key in current if key not in desired]
    ops.extend(
        add(f"{path}/{escape(key)}", value)
        for key, value in desired.items()
        if key not in current or current[key] != value
    )
    return ops
