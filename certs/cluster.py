"""The certificate stores over the Kubernetes API.

Secrets and webhook configurations are not part of the cluster port the components share:
only ``vgpu certs`` touches them. They are reached through the same adapter transport as
everything else (``KubeCluster.request_json``), so auth, TLS, rate limiting and the
mapping of HTTP errors onto the vgpu error tree are the adapter's, not redone here.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from certs.store import StoredSecret, WebhookBundle
from vgpu.errors import ConfigError, ConflictError, InvalidError, NotFoundError
from vgpu.kube.adapter import KubeCluster

TLS_TYPE = "kubernetes.io/tls"
_WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


class SecretApi:
    """The one ``kubernetes.io/tls`` Secret holding the webhook's certificate."""

    def __init__(self, cluster: KubeCluster, namespace: str, name: str) -> None:
        self._cluster = cluster
        self.namespace = namespace
        self.name = name
        self._collection = f"/api/v1/namespaces/{quote(namespace, safe='')}/secrets"

    @property
    def _what(self) -> str:
        return f"secret {self.namespace}/{self.name}"

    def read(self) -> StoredSecret | None:
        try:
            obj = self._cluster.request_json(
                "GET", f"{self._collection}/{quote(self.name, safe='')}", f"reading {self._what}")
        except NotFoundError:
            return None
        if obj.get("type") != TLS_TYPE:
            # The type of a Secret cannot change; deleting someone's Secret is not ours to do.
            raise ConfigError(f"{self._what} exists with type {obj.get('type')!r}, not "
                              f"{TLS_TYPE!r}; delete it or choose another --secret")
        data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        return StoredSecret(data, str(obj["metadata"]["resourceVersion"]))

    def write(self, data: Mapping[str, bytes], resource_version: str | None) -> None:
        meta: dict[str, Any] = {
            "name": self.name, "namespace": self.namespace,
            "labels": {"app.kubernetes.io/name": "vgpu", "app.kubernetes.io/component": "webhook",
                       "app.kubernetes.io/managed-by": "vgpu-certs"}}
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Secret", "type": TLS_TYPE, "metadata": meta,
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}
        if resource_version is None:
            self._cluster.request_json("POST", self._collection, f"writing {self._what}",
                                       body=body)
        else:
            # Conditional on the version read: a concurrent writer makes this a 409.
            meta["resourceVersion"] = resource_version
            self._cluster.request_json("PUT", f"{self._collection}/{quote(self.name, safe='')}",
                                       f"writing {self._what}", body=body)


class WebhookApi:
    """The one MutatingWebhookConfiguration whose ``caBundle`` fields trust the webhook."""

    def __init__(self, cluster: KubeCluster, name: str) -> None:
        self._cluster = cluster
        self.name = name
        self._path = f"{_WEBHOOKS}/{quote(name, safe='')}"

    def read(self) -> Sequence[WebhookBundle]:
        obj = self._cluster.request_json("GET", self._path,
                                         f"reading mutatingwebhookconfiguration {self.name}")
        return [WebhookBundle(str(w.get("name", "")),
                              base64.b64decode((w.get("clientConfig") or {}).get("caBundle", "")))
                for w in obj.get("webhooks") or []]

    def write(self, changes: Sequence[tuple[int, WebhookBundle]]) -> None:
        # A JSON patch addresses webhooks by position; the `test` of each name makes the
        # patch fail as a whole if the list changed since it was read.
        ops: list[dict[str, Any]] = []
        for i, w in changes:
            ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": w.name})
            ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle",
                        "value": base64.b64encode(w.ca_bundle).decode()})
        try:
            self._cluster.request_json("PATCH", self._path,
                                       f"patching mutatingwebhookconfiguration {self.name}",
                                       body=ops, content_type="application/json-patch+json")
        except InvalidError:
            # A failed `test` op: someone edited the list in between; read again.
            raise ConflictError(f"mutatingwebhookconfiguration {self.name} changed while "
                                f"being patched") from None
