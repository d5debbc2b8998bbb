"""The parse of a container's resources, remembered by what it reads: the pods of one
Deployment, Job or StatefulSet ask alike, and a scheduler starting on a cluster of 150,000
bound pods parsed the same few dozen resource stanzas 150,000 times (13 % of its cold
start at 15,000 nodes; issue 40).

Its users share one memo per config, each key a tuple whose first item names what it
remembers (``"container"``, ``"pod request"``, ``"node requests"``), so that keys of two
kinds never meet. One memo per config object, found by identity (hashing a config by
value would cost more than the parse) and checked through a weak reference, so that a
config created where a freed one lived never reads the other's entries."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

#: Entries kept; past it the memo starts again (a miss costs only the parse).
LIMIT = 4096

_PLAIN = (str, int, float)
_MISSING: Any = object()
V = TypeVar("V")


def resources_key(container: Mapping[str, Any]) -> Hashable | None:
    """What a container's ``resources`` say, as a key: its limits and requests, name by
    name in their order; None when they are not plain decoded JSON (the parse then reads
    them, and reports what is wrong, each time)."""
    resources = container.get("resources")
    if resources is None:
        return ()
    if type(resources) is not dict:
        return None
    parts: list[Hashable] = []
    for section in ("limits", "requests"):
        values = resources.get(section)
        if values is None:
            parts.append(None)
            continue
        if type(values) is not dict:
            return None
        items = tuple(values.items())
        for _, value in items:
            if type(value) not in _PLAIN:
                return None
        parts.append(items)
    return tuple(parts)


class Memo(Generic[V]):
    """A bounded map from key to a parse result (immutable values only)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._entries: dict[Hashable, V] = {}

    def through(self, key: Hashable, make: Callable[[], V]) -> V:
        """The value remembered for ``key``, else what ``make`` returns, remembered (what
        raises is not)."""
        found: V = self._entries.get(key, _MISSING)
        if found is _MISSING:
            found = make()
            if len(self._entries) >= self._limit:
                self._entries.clear()
            self._entries[key] = found
        return found


_MEMOS: dict[int, tuple[weakref.ref[Any], Memo[Any]]] = {}


def memo_for(owner: Any) -> Memo[Any]:
    """The memo of ``owner`` (a config: every answer depends on it)."""
    entry = _MEMOS.get(id(owner))
    if entry is None or entry[0]() is not owner:
        if len(_MEMOS) >= 64:
            _MEMOS.clear()
        entry = _MEMOS[id(owner)] = (weakref.ref(owner), Memo())
    return entry[1]
