"""The certificate stores over the Kubernetes API (the ``kubernetes`` client).

Secrets and webhook configurations are not part of the cluster port the components share:
only ``vgpu certs`` touches them, so they are reached here with the client's typed API
classes. Responses are read as the API's JSON (``_preload_content=False``) and requests
are sent as plain dicts, so base64 and byte fields mean exactly what the API says.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

import kubernetes

from certs.store import StoredSecret, WebhookBundle
from vgpu.errors import ClusterError, ConfigError, ConflictError, NotFoundError

TLS_TYPE = "kubernetes.io/tls"


def _error(exc: Any, what: str) -> ClusterError:
    status = getattr(exc, "status", None)
    message = str(getattr(exc, "reason", "") or exc)
    body = getattr(exc, "body", None)
    if body:
        try:
            message = str(json.loads(body).get("message", message))
        except (ValueError, AttributeError):
            message = str(body)[:300]
    text = f"{what}: {message} (HTTP {status})"
    if status == 404:
        return NotFoundError(text)
    if status == 409:
        return ConflictError(text)
    return ClusterError(text)


def _json(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data)
    return data


class SecretApi:
    """The one ``kubernetes.io/tls`` Secret holding the webhook's certificate."""

    def __init__(self, api_client: Any, namespace: str, name: str) -> None:
        self._core = kubernetes.client.CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name

    @property
    def _what(self) -> str:
        return f"secret {self.namespace}/{self.name}"

    def read(self) -> StoredSecret | None:
        try:
            obj = _json(self._core.read_namespaced_secret(self.name, self.namespace,
                                                          _preload_content=False))
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return None
            raise _error(exc, f"reading {self._what}") from None
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
        if resource_version is not None:
            meta["resourceVersion"] = resource_version
        secret = kubernetes.client.V1Secret.from_dict(body)
        assert secret is not None  # from_dict answers None only for None
        try:
            if resource_version is None:
                self._core.create_namespaced_secret(self.namespace, secret,
                                                    _preload_content=False)
            else:
                self._core.replace_namespaced_secret(self.name, self.namespace, secret,
                                                     _preload_content=False)
        except kubernetes.client.ApiException as exc:
            raise _error(exc, f"writing {self._what}") from None


class WebhookApi:
    """The one MutatingWebhookConfiguration whose ``caBundle`` fields trust the webhook."""

    def __init__(self, api_client: Any, name: str) -> None:
        self._admission = kubernetes.client.AdmissionregistrationV1Api(api_client)
        self.name = name

    def read(self) -> Sequence[WebhookBundle]:
        try:
            obj = _json(self._admission.read_mutating_webhook_configuration(
                self.name, _preload_content=False))
        except kubernetes.client.ApiException as exc:
            raise _error(exc, f"reading mutatingwebhookconfiguration {self.name}") from None
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
            self._admission.patch_mutating_webhook_configuration(
                self.name, ops, _content_type="application/json-patch+json",
                _preload_content=False)
        except kubernetes.client.ApiException as exc:
            if exc.status == 422:
                # A failed `test` op: someone edited the list in between; read again.
                raise ConflictError(f"mutatingwebhookconfiguration {self.name} changed while "
                                    f"being patched") from None
            raise _error(exc, f"patching mutatingwebhookconfiguration {self.name}") from None
