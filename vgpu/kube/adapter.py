"""``KubeCluster``: :class:`vgpu.cluster.port.ClusterPort` over the Kubernetes REST API.

Objects cross the port as the API's own JSON, which is what the components' decisions
read; the ``kubernetes`` client's generated models are never built, because parsing into
models and back costs more than the decisions themselves. Every path, and the
``apiVersion``/``kind`` of every object written, comes from the port's resource table
(:mod:`vgpu.cluster.resources`); only ``pods/binding`` and events are spelt out here.

:func:`connect` picks one of the two transports of :mod:`vgpu.kube.transport`: the
service account's in a pod, which never imports ``kubernetes`` (the image leaves it out:
there a kubeconfig is a one-line :class:`~vgpu.errors.ConfigError`), else the kubeconfig's.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import quote

import orjson
import urllib3

from vgpu import meta
from vgpu.cluster.events import event_object
from vgpu.cluster.fence import Fence, OpenFence
from vgpu.cluster.port import ALL, Kind, ListResult, Obj, Selector, WatchEvent
from vgpu.cluster.resources import DEFAULT_NAMESPACE, Resource, check_selector, resource
from vgpu.errors import (
    ClusterError,
    ConfigError,
    ConflictError,
    InvalidError,
    NotFoundError,
    OutcomeUnknownError,
)
from vgpu.kube import deadlines, discovery, http1, paths, tokens
from vgpu.kube.ratelimit import TokenBucket
from vgpu.kube.transport import (
    SERVICE_ACCOUNT_DIR,
    ClientTransport,
    InClusterTransport,
    Timeout,
    Transport,
)

# The transports are reached through this module too (tests build an in-cluster one).
__all__ = ["ClientTransport", "InClusterTransport", "KubeCluster", "Transport", "connect"]

#: ``GET /version`` is looked up from a preemption: never long, and tried again later.
_VERSION_TIMEOUT = 5.0


class KubeCluster:
    def __init__(self, transport: Transport, qps: float = 200.0, burst: int = 400,
                 request_timeout: float = 30.0) -> None:
        self.transport = transport
        self._bucket = TokenBucket(qps, burst)
        self._timeout = request_timeout
        #: Checked immediately before each write is sent (a leader's
        #: :class:`vgpu.cluster.fence.Fence`); it raises to stop the write.
        self.fence: Fence = OpenFence()
        #: Each write's longest time in flight from its fence check (:mod:`.deadlines`).
        self.write_timeout: float | None = None
        # The older version a resource is served at on this server, once a list found it
        # (Resource.fallbacks); every later call for the kind uses it.
        self._served: dict[str, Resource] = {}
        self.discovery = discovery.Discovery(lambda: self.request_json(
            "GET", "/version", "get the server version", timeout=_VERSION_TIMEOUT))

    def _resource(self, kind: Kind) -> Resource:
        return self._served.get(kind) or resource(kind)

    # -- transport -------------------------------------------------------------------------

    def request_json(self, method: str, path: str, what: str, *,
                     query: list[tuple[str, str]] | None = None, body: Any = None,
                     content_type: str = "application/json",
                     timeout: Timeout | None = None) -> Obj:
        """One request for an API path outside the port, errors mapped as the port's: for
        tests and benches setting up what the port does not serve (namespaces, RBAC)."""
        self._bucket.acquire()
        write = method in paths.WRITES
        query, deadline = query or [], None
        if write:
            started = time.monotonic()  # so that a pause after the check counts too
            # After the rate limiter (it may hold a request): as close to the write as can be.
            self.fence.check(what)
            if self.write_timeout is not None:
                deadline = started + self.write_timeout
                query = deadlines.with_timeout(query, deadline)
        try:
            status, data = self.transport.call(
                method, path, query=query, body=body, content_type=content_type,
                timeout=timeout or self._timeout, deadline=deadline)
        except http1.AnswerLost as exc:
            raise OutcomeUnknownError(f"{what}: {exc}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ClusterError(f"{what}: {exc}") from None
        if write and status >= 500:
            # A server error says nothing of whether the write was carried out (etcd may
            # have committed it before the answer timed out): the caller reads back.
            raise OutcomeUnknownError(f"{what}: {paths.error(status, data, what)}")
        if status >= 300:
            raise paths.error(status, data, what)
        result: Obj = orjson.loads(data) if data else {}
        return result

    # -- the port --------------------------------------------------------------------------

    def list(self, kind: Kind, selector: Selector = ALL) -> ListResult:
        res = self._resource(kind)
        check_selector(res, selector)
        try:
            return self._list(res, selector)
        except NotFoundError:
            # A collection is never missing: the server does not serve this version.
            for version in res.fallbacks if kind not in self._served else ():
                older = dataclasses.replace(res, api_version=version)
                try:
                    result = self._list(older, selector)
                except NotFoundError:
                    continue
                self._served[kind] = older
                return result
            raise

    def _list(self, res: Resource, selector: Selector) -> ListResult:
        kind = res.plural
        query = paths.query(selector)
        items: list[Obj] = []
        cont = ""
        # Page through large lists so a 10,000-pod cluster is not one giant response.
        while True:
            paging = [("limit", "2000"), *([("continue", cont)] if cont else [])]
            page = self.request_json("GET", paths.path(res, namespace=selector.namespace),
                                     f"list {kind}", query=[*query, *paging])
            items.extend(page.get("items") or [])
            listed = meta.of(page)
            cont = listed.get("continue") or ""
            if not cont:
                return ListResult(items=items,
                                  resource_version=str(listed.get("resourceVersion")))

    def watch(self, kind: Kind, resource_version: str, selector: Selector = ALL,
              timeout_seconds: float = 30.0) -> Iterator[WatchEvent]:
        res = self._resource(kind)
        # Checked here, not when the stream is first read, as in the in-memory cluster.
        check_selector(res, selector)
        return self._stream(res, resource_version, selector, timeout_seconds)

    def _stream(self, res: Resource, resource_version: str, selector: Selector,
                timeout_seconds: float) -> Iterator[WatchEvent]:
        kind = res.plural
        query = [*paths.query(selector), ("watch", "true"), ("resourceVersion", resource_version),
                 ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(max(1, int(timeout_seconds))))]
        self._bucket.acquire()
        try:
            raw = self.transport.stream("GET", paths.path(res, namespace=selector.namespace),
                                        query=query, timeout=(10.0, timeout_seconds + 15))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ClusterError(f"watch {kind}: {exc}") from None
        try:
            if raw.status >= 300:
                raise paths.error(raw.status, raw.read(), f"watch {kind}")
            yield from paths.watch_events(raw.lines(), kind)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ClusterError(f"watch {kind}: {exc}") from None
        finally:
            raw.close()

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj:
        res = self._resource(kind)
        return self.request_json("GET", paths.path(res, name, namespace),
                                 f"get {res.singular} {name}")

    def create(self, kind: Kind, obj: Obj) -> Obj:
        res = self._resource(kind)
        namespace = meta.namespace(obj) or (DEFAULT_NAMESPACE if res.namespaced else None)
        return self.request_json("POST", paths.path(res, namespace=namespace),
                                 f"create {res.singular}", body=paths.typed(res, obj))

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        res = self._resource(kind)
        self.request_json("DELETE", paths.path(res, name, namespace),
                          f"delete {res.singular} {name}")

    def replace(self, kind: Kind, obj: Obj) -> Obj:
        res = self._resource(kind)
        name = meta.name(obj)
        if not name:
            # Without a name the path would be the collection's, and a PUT there a 405.
            raise InvalidError(f"replace {res.singular}: the object has no metadata.name")
        return self.request_json("PUT", paths.path(res, name, meta.namespace(obj) or None),
                                 f"replace {res.singular} {name}", body=paths.typed(res, obj))

    def patch_annotations(self, kind: Kind, name: str, annotations: Mapping[str, str | None],
                          namespace: str | None = None,
                          resource_version: str | None = None, *, uid: str = "",
                          status: bool = False,
                          conditions: Sequence[Mapping[str, str]] = ()) -> Obj:
        res = self._resource(kind)
        what = f"patch {res.singular} {name}"
        where = paths.path(res, name, namespace, "status" if status else None)
        body, content_type = paths.annotation_patch(annotations, resource_version, uid,
                                                    conditions)
        try:
            return self.request_json("PATCH", where, what, body=body,
                                     content_type=content_type)
        except InvalidError as exc:
            if uid and "metadata.uid" in str(exc):
                raise ConflictError(f"{what}: it is not the object of uid {uid} any more "
                                    f"(deleted and recreated): {exc}") from None
            raise

    # -- pod subresources and Events -------------------------------------------------------

    def bind(self, namespace: str, name: str, node: str,
             annotations: Mapping[str, str], *, uid: str = "") -> None:
        metadata: dict[str, Any] = {"name": name, "namespace": namespace,
                                    "annotations": dict(annotations)}
        if uid:
            metadata["uid"] = uid  # as kube-scheduler's DefaultBinder: a precondition
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": metadata,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        self.request_json("POST", paths.path(resource("pods"), name, namespace, "binding"),
                          f"bind pod {name}", body=body)

    def record_event(self, obj: Obj, event_type: Literal["Normal", "Warning"],
                     reason: str, message: str, component: str) -> None:
        event = event_object(obj, event_type, reason, message, component)
        namespace = event["metadata"]["namespace"]
        self.request_json("POST", f"/api/v1/namespaces/{quote(namespace, safe='')}/events",
                          "record event", body=event)

    def patch_status(self, kind: Kind, name: str, status: Mapping[str, Any],
                     namespace: str | None = None) -> Obj:
        res = resource(kind)
        return self.request_json("PATCH", paths.path(res, name, namespace, "status"),
                                 f"patch {res.singular} {name} status",
                                 body={"status": dict(status)}, content_type=paths.MERGE_PATCH)

    def pod_disruption_conditions(self) -> bool:
        return self.discovery.disruption_conditions()

    def evict(self, namespace: str, name: str, *, uid: str = "") -> None:
        target = paths.path(resource("pods"), name, namespace, "eviction")
        body: dict[str, Any] = {"metadata": {"name": name, "namespace": namespace}}
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        what = f"evict pod {namespace}/{name}"
        self.discovery.evict(lambda api: self.request_json(
            "POST", target, what, body={"apiVersion": api, "kind": "Eviction", **body}))


def connect(kubeconfig: str | None, *, qps: float = 200.0, burst: int = 400,
            pool_size: int = 32, required: bool = True) -> KubeCluster | None:
    """Connect with ``kubeconfig``, else in-cluster, else ``$KUBECONFIG``/~/.kube/config.

    With ``required=False`` and no configuration at all, returns ``None`` (the webhook runs
    without an inventory outside a cluster).
    """
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    if not kubeconfig and host:
        if not os.path.exists(os.path.join(SERVICE_ACCOUNT_DIR, "token")):
            raise ConfigError(f"in a cluster but {SERVICE_ACCOUNT_DIR}/token is missing: "
                              "mount the service account token (automountServiceAccountToken)")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        return KubeCluster(InClusterTransport(host, port, pool_size=pool_size), qps, burst)
    if not kubeconfig and not (os.environ.get("KUBECONFIG") or os.path.exists(
            os.path.expanduser("~/.kube/config"))):
        if required:
            raise ConfigError("no cluster configuration: pass --kubeconfig, set KUBECONFIG, "
                              "or run inside a cluster")
        return None
    try:
        import kubernetes  # noqa: PLC0415  (lazy: see the module docstring)
    except ImportError:
        raise ConfigError("a kubeconfig needs the 'kubernetes' package, which is not "
                          "installed (the vgpu image leaves it out: in a pod, vgpu uses the "
                          "service account)") from None

    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_kube_config(config_file=kubeconfig,
                                           client_configuration=configuration)
    except kubernetes.config.ConfigException as exc:
        raise ConfigError(f"cannot load kubeconfig {kubeconfig or ''}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig {kubeconfig}: {exc.strerror}") from None
    configuration.connection_pool_maxsize = pool_size
    if (token_file := tokens.kubeconfig_token_file(kubeconfig)) is not None:
        # The loader read the file once; client-go reads it again every 50 s.
        hook: Any = tokens.refresher(tokens.TokenFile(token_file))
        configuration.refresh_api_key_hook = hook
    return KubeCluster(ClientTransport(kubernetes.client.ApiClient(configuration)), qps, burst)
