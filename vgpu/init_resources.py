"""The GPU resources the webhook moved off a pod's init containers
(docs/contracts.md#init-resources-record).

Kubelets before 1.31 refuse a pod whose init container asks for an extended resource the
node does not advertise (``OutOfnvidia.com/gpumem``), and of the five vGPU resources the
node advertises only the count. So the webhook keeps the count on a GPU init container and
moves its memory, percentage, cores and priority into this annotation of the pod, which
every reader of the request adds back (:func:`vgpu.requests.parse_pod`). It is vgpu's
record, written in the webhook's own patch at creation and protected like every
``vgpu.io/`` annotation after it.

``{"version":1,"containers":{"<init container>":{"nvidia.com/gpumem":"3000"}}}``
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from vgpu.errors import RequestError

INIT_RESOURCES = "vgpu.io/init-resources"
VERSION = 1


def encode(moved: Mapping[str, Mapping[str, str]]) -> str:
    return json.dumps({"version": VERSION, "containers": moved}, separators=(",", ":"),
                      sort_keys=True)


def decode(annotations: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Per init container name, the resources moved off it; {} when there are none."""
    raw = annotations.get(INIT_RESOURCES)
    if raw is None:
        return {}
    where = f"annotation {INIT_RESOURCES}"
    try:
        value = json.loads(str(raw))
    except ValueError:
        raise RequestError(f"{where}: not JSON") from None
    if not isinstance(value, dict) or value.get("version") != VERSION:
        raise RequestError(f"{where}: expected an object of version {VERSION}")
    containers = value.get("containers")
    if not isinstance(containers, dict) or not all(
            isinstance(k, str) and isinstance(v, dict) for k, v in containers.items()):
        raise RequestError(f"{where}: containers must map names to resources")
    return containers
