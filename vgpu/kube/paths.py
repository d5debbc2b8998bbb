"""REST paths, error mapping and watch lines of the Kubernetes API, from the port's
resource table."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import orjson

from vgpu.cluster.port import Obj, Selector, WatchEvent
from vgpu.cluster.resources import DEFAULT_NAMESPACE, Resource
from vgpu.errors import (
    ClusterError,
    ConflictError,
    EvictionRefusedError,
    GoneError,
    InvalidError,
    NotFoundError,
)

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
#: Requests that change something: fenced, and in doubt when their answer is lost or 5xx.
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def path(res: Resource, name: str | None = None, namespace: str | None = None,
          sub: str | None = None) -> str:
    """The REST path of a collection (no ``name``) or of one object.

    A namespaced collection without a namespace is the all-namespaces one; a namespaced
    object without one is in ``default``, as in the in-memory cluster; a cluster-scoped
    resource ignores the namespace.
    """
    path = "/api/v1" if not res.group else f"/apis/{res.api_version}"
    if res.namespaced and (namespace or name):
        path += f"/namespaces/{quote(namespace or DEFAULT_NAMESPACE, safe='')}"
    path += f"/{res.plural}"
    if name:
        path += f"/{quote(name, safe='')}"
    if sub:
        path += f"/{sub}"
    return path


def typed(res: Resource, obj: Obj) -> Obj:
    """``obj`` with the ``apiVersion`` and ``kind`` the API server decodes a body by."""
    return {"apiVersion": res.api_version, "kind": res.kind, **obj}


def query(selector: Selector) -> list[tuple[str, str]]:
    if selector.node_name is not None:
        return [("fieldSelector", f"spec.nodeName={selector.node_name}")]
    if selector.involved_name is not None:
        return [("fieldSelector", f"involvedObject.name={selector.involved_name}")]
    return []


def error(status: int, body: bytes, what: str) -> ClusterError:
    message = body.decode("utf-8", "replace")[:500]
    with contextlib.suppress(ValueError, AttributeError):
        message = str(json.loads(body).get("message", message))
    text = f"{what}: {message} (HTTP {status})"
    if status == 404:
        return NotFoundError(text)
    if status == 409:
        return ConflictError(text)
    if status == 410:
        return GoneError(text)
    if status == 422:
        return InvalidError(text)
    if status == 429:
        # The eviction API's answer when a PodDisruptionBudget allows no disruption now.
        return EvictionRefusedError(text)
    return ClusterError(text)


def watch_events(lines: Iterable[bytes], kind: str) -> Iterator[WatchEvent]:
    """The events of a watch's answer, one JSON object per line; bookmarks skipped, an
    ``ERROR`` event raised as the error it carries."""
    for line in lines:
        if not line.strip():
            continue
        # orjson: decoding the watch's objects (managedFields and all) with the json
        # module was 17 % of the scheduler's CPU in a burst (py-spy).
        event = orjson.loads(line)
        etype = event.get("type")
        obj = event.get("object") or {}
        if etype == "ERROR":
            raise error(int(obj.get("code") or 500), orjson.dumps(obj), f"watch {kind}")
        if etype in ("ADDED", "MODIFIED", "DELETED"):
            yield WatchEvent(etype, obj)


def annotation_patch(annotations: Mapping[str, str | None], resource_version: str | None,
                     uid: str, conditions: Sequence[Mapping[str, str]],
                     ) -> tuple[dict[str, Any], str]:
    """The body and content type of a patch of ``metadata.annotations`` (and of the
    ``conditions`` of a status)."""
    metadata: dict[str, Any] = {"annotations": dict(annotations)}
    if resource_version:
        # A patch carrying resourceVersion is a conditional write: 409 if stale.
        metadata["resourceVersion"] = resource_version
    if uid:
        # The uid is immutable: on another object of the name the patch would change it,
        # which the server refuses (422 "field is immutable"), so it acts as a
        # precondition; the adapter says it as the conflict it is.
        metadata["uid"] = uid
    body: dict[str, Any] = {"metadata": metadata}
    if not conditions:
        return body, MERGE_PATCH
    # A strategic merge patch merges conditions by type: a merge patch would replace the
    # list, and the kubelet's conditions with it.
    body["status"] = {"conditions": [dict(c) for c in conditions]}
    return body, STRATEGIC_PATCH
