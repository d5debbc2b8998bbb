"""``KubeCluster``: :class:`vgpu.cluster.port.ClusterPort` over the Kubernetes REST API.

It sends requests through the ``kubernetes`` client's configured connection pool (TLS,
tokens, client certificates from kubeconfig or the in-cluster service account) but skips
its generated model classes: objects cross the port as the API's own JSON, which is what
the components' decisions read, and parsing into models and back costs more than the
decisions themselves.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Literal
from urllib.parse import quote

import kubernetes
import urllib3

from vgpu.cluster.port import ALL, Kind, ListResult, Obj, Selector, WatchEvent
from vgpu.errors import ClusterError, ConfigError, ConflictError, GoneError, NotFoundError
from vgpu.kube.ratelimit import TokenBucket

_MERGE_PATCH = "application/merge-patch+json"


def _path(kind: Kind, name: str | None = None, namespace: str | None = None,
          sub: str | None = None) -> str:
    if kind == "nodes":
        path = "/api/v1/nodes"
    elif namespace:
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods"
    else:
        path = "/api/v1/pods"
    if name:
        path += f"/{quote(name, safe='')}"
    if sub:
        path += f"/{sub}"
    return path


def _query(selector: Selector) -> list[tuple[str, str]]:
    if selector.node_name is not None:
        return [("fieldSelector", f"spec.nodeName={selector.node_name}")]
    return []


def _error(status: int, body: bytes, what: str) -> ClusterError:
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
    return ClusterError(text)


class KubeCluster:
    def __init__(self, api_client: Any, qps: float = 200.0, burst: int = 400,
                 request_timeout: float = 30.0) -> None:
        self.api = api_client
        self._bucket = TokenBucket(qps, burst)
        self._timeout = request_timeout

    # -- transport -------------------------------------------------------------------------

    def _send(self, method: str, path: str, *, query: list[tuple[str, str]] | None = None,
              body: Any = None, content_type: str = "application/json",
              timeout: float | tuple[float, float] | None = None) -> Any:
        self._bucket.acquire()
        headers = {"Accept": "application/json", "Content-Type": content_type}
        method, url, headers, body, _ = self.api.param_serialize(
            method=method, resource_path=path, query_params=query or [],
            header_params=headers, body=body, auth_settings=["BearerToken"])
        try:
            return self.api.call_api(method, url, header_params=headers, body=body,
                                     _request_timeout=timeout or self._timeout)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ClusterError(f"{method} {path}: {exc}") from None

    def _json(self, method: str, path: str, what: str, **kwargs: Any) -> Obj:
        response = self._send(method, path, **kwargs)
        data: bytes = response.read()
        if response.status >= 300:
            raise _error(response.status, data, what)
        result: Obj = json.loads(data) if data else {}
        return result

    # -- the port --------------------------------------------------------------------------

    def list(self, kind: Kind, selector: Selector = ALL) -> ListResult:
        query = _query(selector)
        items: list[Obj] = []
        cont = ""
        # Page through large lists so a 10,000-pod cluster is not one giant response.
        while True:
            page = self._json("GET", _path(kind, namespace=selector.namespace), f"list {kind}",
                              query=[*query, ("limit", "2000"), *(
                                  [("continue", cont)] if cont else [])])
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            cont = meta.get("continue") or ""
            if not cont:
                return ListResult(items=items, resource_version=str(meta.get("resourceVersion")))

    def watch(self, kind: Kind, resource_version: str, selector: Selector = ALL,
              timeout_seconds: float = 30.0) -> Iterator[WatchEvent]:
        query = [*_query(selector), ("watch", "true"), ("resourceVersion", resource_version),
                 ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(max(1, int(timeout_seconds))))]
        response = self._send("GET", _path(kind, namespace=selector.namespace), query=query,
                              timeout=(10.0, timeout_seconds + 15))
        raw = response.response
        if response.status >= 300:
            raise _error(response.status, response.read(), f"watch {kind}")
        try:
            for line in raw:
                if not line.strip():
                    continue
                event = json.loads(line)
                etype = event.get("type")
                obj = event.get("object") or {}
                if etype == "ERROR":
                    raise _error(int(obj.get("code") or 500), json.dumps(obj).encode(),
                                 f"watch {kind}")
                if etype == "BOOKMARK":
                    continue
                if etype in ("ADDED", "MODIFIED", "DELETED"):
                    yield WatchEvent(etype, obj)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ClusterError(f"watch {kind}: {exc}") from None
        finally:
            raw.release_conn()

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj:
        return self._json("GET", _path(kind, name, namespace), f"get {kind[:-1]} {name}")

    def create(self, kind: Kind, obj: Obj) -> Obj:
        namespace = (obj.get("metadata") or {}).get("namespace") or (
            "default" if kind == "pods" else None)
        body = dict(obj)
        body.setdefault("apiVersion", "v1")
        body.setdefault("kind", "Pod" if kind == "pods" else "Node")
        return self._json("POST", _path(kind, namespace=namespace), f"create {kind[:-1]}",
                          body=body)

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        self._json("DELETE", _path(kind, name, namespace), f"delete {kind[:-1]} {name}")

    def replace(self, kind: Kind, obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        return self._json("PUT", _path(kind, meta.get("name"), meta.get("namespace")),
                          f"replace {kind[:-1]} {meta.get('name')}", body=obj)

    def patch_annotations(self, kind: Kind, name: str, annotations: Mapping[str, str | None],
                          namespace: str | None = None,
                          resource_version: str | None = None) -> Obj:
        metadata: dict[str, Any] = {"annotations": dict(annotations)}
        if resource_version:
            # A merge patch carrying resourceVersion is a conditional write: 409 if stale.
            metadata["resourceVersion"] = resource_version
        return self._json("PATCH", _path(kind, name, namespace), f"patch {kind[:-1]} {name}",
                          body={"metadata": metadata}, content_type=_MERGE_PATCH)

    def bind(self, namespace: str, name: str, node: str,
             annotations: Mapping[str, str]) -> None:
        body = {
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations)},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self._json("POST", _path("pods", name, namespace, "binding"), f"bind pod {name}",
                   body=body)

    def record_event(self, obj: Obj, event_type: Literal["Normal", "Warning"], reason: str,
                     message: str, component: str) -> None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name', 'object')}.{uuid.uuid4().hex[:12]}",
                         "namespace": namespace},
            "involvedObject": {"apiVersion": "v1", "kind": obj.get("kind") or "Pod",
                               "name": meta.get("name"), "namespace": namespace,
                               "uid": meta.get("uid"),
                               "resourceVersion": meta.get("resourceVersion")},
            "type": event_type, "reason": reason, "message": message[:1024],
            "source": {"component": component}, "reportingComponent": component,
            "reportingInstance": os.environ.get("HOSTNAME", component),
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        self._json("POST", f"/api/v1/namespaces/{quote(namespace, safe='')}/events",
                   "record event", body=event)


def connect(kubeconfig: str | None, *, qps: float = 200.0, burst: int = 400,
            pool_size: int = 32, required: bool = True) -> KubeCluster | None:
    """Connect with ``kubeconfig``, else in-cluster config, else ``$KUBECONFIG``/~/.kube.

    With ``required=False`` and no configuration at all, returns ``None`` (the webhook runs
    without an inventory outside a cluster).
    """
    configuration = kubernetes.client.Configuration()
    try:
        if kubeconfig:
            kubernetes.config.load_kube_config(config_file=kubeconfig,
                                               client_configuration=configuration)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            kubernetes.config.load_incluster_config(client_configuration=configuration)
        elif os.environ.get("KUBECONFIG") or os.path.exists(
                os.path.expanduser("~/.kube/config")):
            kubernetes.config.load_kube_config(client_configuration=configuration)
        elif required:
            raise ConfigError("no cluster configuration: pass --kubeconfig, set KUBECONFIG, "
                              "or run inside a cluster")
        else:
            return None
    except kubernetes.config.ConfigException as exc:
        raise ConfigError(f"cannot load cluster configuration: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig {kubeconfig}: {exc.strerror}") from None
    configuration.connection_pool_maxsize = pool_size
    return KubeCluster(kubernetes.client.ApiClient(configuration), qps=qps, burst=burst)
