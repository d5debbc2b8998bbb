"""The pod subresources of the Kubernetes API: binding, status, eviction, and Events.

Mixed into :class:`vgpu.kube.adapter.KubeCluster`, which provides ``request_json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol
from urllib.parse import quote

from vgpu.cluster.events import event_object
from vgpu.cluster.port import Kind, Obj
from vgpu.cluster.resources import resource
from vgpu.errors import ClusterError, EvictionRefusedError, NotFoundError
from vgpu.kube.paths import MERGE_PATCH, path


class _Requests(Protocol):
    def request_json(self, method: str, path: str, what: str, **kwargs: Any) -> Obj: ...


class PodCalls:
    def bind(self: _Requests, namespace: str, name: str, node: str,
             annotations: Mapping[str, str]) -> None:
        body = {
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations)},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.request_json("POST", path(resource("pods"), name, namespace, "binding"),
                          f"bind pod {name}", body=body)

    def record_event(self: _Requests, obj: Obj, event_type: Literal["Normal", "Warning"],
                     reason: str, message: str, component: str) -> None:
        event = event_object(obj, event_type, reason, message, component)
        namespace = event["metadata"]["namespace"]
        self.request_json("POST", f"/api/v1/namespaces/{quote(namespace, safe='')}/events",
                          "record event", body=event)

    def patch_status(self: _Requests, kind: Kind, name: str, status: Mapping[str, Any],
                     namespace: str | None = None) -> Obj:
        res = resource(kind)
        return self.request_json("PATCH", path(res, name, namespace, "status"),
                                 f"patch {res.singular} {name} status",
                                 body={"status": dict(status)}, content_type=MERGE_PATCH)

    def evict(self: _Requests, namespace: str, name: str) -> None:
        target = path(resource("pods"), name, namespace, "eviction")
        meta = {"name": name, "namespace": namespace}
        try:
            self.request_json("POST", target, f"evict pod {namespace}/{name}",
                              body={"apiVersion": "policy/v1", "kind": "Eviction",
                                    "metadata": meta})
        except ClusterError as exc:
            # Before Kubernetes 1.22 the server knows only policy/v1beta1 Evictions, and
            # says so naming the version it does not know.
            if isinstance(exc, (NotFoundError, EvictionRefusedError)) or (
                    "policy/v1" not in str(exc)):
                raise
            self.request_json("POST", target, f"evict pod {namespace}/{name}",
                              body={"apiVersion": "policy/v1beta1", "kind": "Eviction",
                                    "metadata": meta})
