"""JSONPatch (RFC 6902) operations for the admission response.

The API server applies the patch to the object it sent us, so every path must point at
something that exists (or be an ``add`` of a member of an object that exists). The
helpers here escape resource and annotation names (``nvidia.com/gpu`` →
``nvidia.com~1gpu``) and turn "these keys of this mapping should now read so" into the
operations that get there, creating the mapping when it is missing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

Op = dict[str, Any]
#: One encoder for every record line: json.dumps with arguments builds a new one per call,
#: which was most of the record's cost (a GPU pod's patch has a dozen operations).
_COMPACT = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


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


def _step(token: str) -> str:
    token = token.replace("~1", "/").replace("~0", "~")
    return f"[{token}]" if "/" in token or "." in token else f".{token}"


def describe(ops: list[Op], spec: Mapping[str, Any]) -> list[str]:
    """One line per operation, for the ``vgpu.io/admission`` record: the path as a person
    reads it (containers by name, not position) and the value written."""
    lines = []
    for op in ops:
        tokens = op["path"].lstrip("/").split("/")
        if (len(tokens) > 2 and tokens[0] == "spec"
                and tokens[1] in ("containers", "initContainers") and tokens[2].isdigit()):
            items = spec.get(tokens[1]) or []
            index = int(tokens[2])
            name = items[index].get("name", index) if index < len(items) else index
            where = f"{tokens[1]}[{name}]" + "".join(_step(t) for t in tokens[3:])
        else:
            where = "".join(_step(t) for t in tokens).lstrip(".")
        if op["op"] == "remove":
            lines.append(f"{where}: removed")
            continue
        value = _COMPACT.encode(op["value"])
        lines.append(f"{where}: {value if len(value) <= 80 else value[:77] + '...'}")
    return lines
