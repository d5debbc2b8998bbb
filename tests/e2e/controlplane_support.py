"""Pods, bindings and raw watches for the tests that pin the apiserver's behaviour.

Shared by the ``test_controlplane*`` modules: a unique name, a pod for ``vgpu-scheduler``
that no kubelet will run, a Binding POST as the scheduler makes it, and a watch read as
raw JSON events.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, cast

import urllib3
from kubernetes.client import (
    CoreV1Api,
    V1Binding,
    V1Container,
    V1ObjectMeta,
    V1ObjectReference,
    V1Pod,
    V1PodSpec,
)

SCHEDULER = "vgpu-scheduler"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def gpu_pod(name: str, annotations: dict[str, str] | None = None) -> V1Pod:
    return V1Pod(
        metadata=V1ObjectMeta(name=name, annotations=annotations),
        spec=V1PodSpec(
            scheduler_name=SCHEDULER,
            automount_service_account_token=False,
            containers=[V1Container(name="main", image="busybox")],
        ),
    )


def bind(
    core: CoreV1Api, namespace: str, pod: str, node: str, annotations: dict[str, str]
) -> urllib3.BaseHTTPResponse:
    body = V1Binding(
        metadata=V1ObjectMeta(name=pod, annotations=annotations),
        target=V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    # The server answers a Binding POST with a Status, not a Binding; the
    # generated client would try to parse it as the latter.
    resp = core.create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)
    return cast(urllib3.BaseHTTPResponse, resp)


def watch_pods(
    core: CoreV1Api, namespace: str, resource_version: str, want: int, timeout: int = 10
) -> list[dict[str, Any]]:
    """Raw watch events (type + object as JSON) from ``resource_version``, at most ``want``."""
    resp = cast(
        urllib3.BaseHTTPResponse,
        core.list_namespaced_pod(
            namespace,
            watch=True,
            resource_version=resource_version,
            timeout_seconds=timeout,
            _preload_content=False,
        ),
    )
    events: list[dict[str, Any]] = []
    buf = b""
    try:
        for chunk in resp.stream(4096, decode_content=True):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    events.append(json.loads(line))
                if len(events) >= want:
                    return events
    finally:
        resp.release_conn()
    return events
