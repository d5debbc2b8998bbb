"""A strict RFC 6902 applier for tests: it fails where the API server's would.

Only the operations the webhook may emit are supported (add, remove, replace); a path into
something that does not exist, a bad escape or an unknown operation raises.
"""

from __future__ import annotations

import copy
import json
from typing import Any


class PatchError(Exception):
    pass


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"{path!r}: a JSON pointer starts with /")
    tokens = []
    for raw in path[1:].split("/"):
        stripped = raw.replace("~0", "").replace("~1", "")
        if "~" in stripped:
            raise PatchError(f"{path!r}: bad escape in {raw!r}")
        tokens.append(raw.replace("~1", "/").replace("~0", "~"))
    return tokens


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"{path!r}: {token!r} does not exist")
            node = node[token]
        elif isinstance(node, list):
            if not token.isdigit() or int(token) >= len(node):
                raise PatchError(f"{path!r}: index {token!r} out of range")
            node = node[int(token)]
        else:
            raise PatchError(f"{path!r}: {token!r} is inside a scalar")
    return node


def apply(doc: Any, ops: list[dict[str, Any]]) -> Any:
    # The document as the API server holds it: decoded JSON, where no two members are one
    # object. A deepcopy keeps the sharing of the original (hypothesis hands out one ``{}``
    # for two containers' resources), so an add under one would show up under both.
    doc = json.loads(json.dumps(doc))
    for op in ops:
        kind, path = op["op"], op["path"]
        tokens = _tokens(path)
        if not tokens:
            raise PatchError("the webhook never replaces the whole object")
        parent = _parent(doc, tokens, path)
        last = tokens[-1]
        if kind == "add":
            value = copy.deepcopy(op["value"])
            if isinstance(parent, dict):
                parent[last] = value
            elif isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if index > len(parent):
                    raise PatchError(f"{path!r}: index out of range")
                parent.insert(index, value)
            else:
                raise PatchError(f"{path!r}: parent is not a container")
        elif kind in ("remove", "replace"):
            if isinstance(parent, dict):
                if last not in parent:
                    raise PatchError(f"{path!r}: nothing to {kind}")
                if kind == "remove":
                    del parent[last]
                else:
                    parent[last] = copy.deepcopy(op["value"])
            elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
                if kind == "remove":
                    del parent[int(last)]
                else:
                    parent[int(last)] = copy.deepcopy(op["value"])
            else:
                raise PatchError(f"{path!r}: nothing to {kind}")
        else:
            raise PatchError(f"unexpected operation {kind!r}")
    return doc
