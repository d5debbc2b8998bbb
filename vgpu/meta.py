"""Object metadata, read the same way everywhere.

API objects arrive as plain dicts, possibly malformed; these accessors never raise. Each
is the one definition of its fact about ``metadata``: a missing or malformed field reads
as empty (``{}``, ``""``) or None, never as an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu import times


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else empty."""
    # The type test first: decoded JSON is dicts, and an ABC isinstance costs ten times as
    # much (these run some 80 times per pod in a burst; yappi).
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's ``metadata``; empty when missing or malformed."""
    return mapping(obj.get("metadata"))


def name(obj: Mapping[str, Any]) -> str:
    value = of(obj).get("name")
    return value if isinstance(value, str) else ""


def namespace(obj: Mapping[str, Any], default: str = "") -> str:
    """The namespace; ``default`` for a cluster-scoped object (pods pass ``"default"``,
    where the API server would have put one that names none)."""
    value = of(obj).get("namespace")
    return value if isinstance(value, str) and value else default


def uid(obj: Mapping[str, Any]) -> str:
    value = of(obj).get("uid")
    return value if isinstance(value, str) else ""


def resource_version(obj: Mapping[str, Any]) -> str:
    value = of(obj).get("resourceVersion")
    return str(value) if value is not None else ""


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """The object's labels as strings; empty when it has none."""
    found = of(obj).get("labels")
    if not isinstance(found, Mapping):
        return {}
    return {str(k): str(v) for k, v in found.items()}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's annotations; empty when it has none."""
    return mapping(of(obj).get("annotations"))


def owner_references(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    refs = of(obj).get("ownerReferences")
    if not isinstance(refs, list):
        return []
    return [ref for ref in refs if isinstance(ref, Mapping)]


def deleting(obj: Mapping[str, Any]) -> bool:
    """Whether the object is being deleted (``metadata.deletionTimestamp`` is set)."""
    return of(obj).get("deletionTimestamp") is not None


def created(obj: Mapping[str, Any]) -> float | None:
    """``metadata.creationTimestamp`` in epoch seconds; None when absent or unreadable."""
    return times.epoch(of(obj).get("creationTimestamp"))
