"""The certificate stores over the cluster port.

The Secret and the webhook configuration are read and written as any other object the
port serves, so auth, TLS, rate limiting and the mapping of API errors onto the vgpu error
tree are the adapter's, and the same reconcile runs on the in-memory cluster in the tests.
Every write is conditional on the resourceVersion read: a concurrent writer (a second
Job pod, a person running ``vgpu certs`` by hand) makes it a ``ConflictError``, which
:func:`vgpu_certs.reconcile.reconcile_retrying` answers by reading again.
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Mapping, Sequence
from typing import Any

from vgpu import meta
from vgpu.cluster.port import ClusterPort, Kind, Obj
from vgpu.errors import ConfigError, ConflictError, NotFoundError
from vgpu_certs.store import StoredSecret, WebhookBundle

TLS_TYPE = "kubernetes.io/tls"
_LABELS = {"app.kubernetes.io/name": "vgpu", "app.kubernetes.io/component": "webhook",
           "app.kubernetes.io/managed-by": "vgpu-certs"}


def _decode(value: Any, where: str) -> bytes:
    try:
        return base64.b64decode(value or "", validate=True)
    except (binascii.Error, TypeError, ValueError):
        # The API server only stores valid base64 here; anything else is not its answer.
        raise ConfigError(f"{where} is not base64") from None


class ClusterSecretStore:
    """The one ``kubernetes.io/tls`` Secret holding the webhook's certificate."""

    def __init__(self, port: ClusterPort, namespace: str, name: str) -> None:
        self._port = port
        self.namespace = namespace
        self.name = name

    @property
    def _what(self) -> str:
        return f"secret {self.namespace}/{self.name}"

    def read(self) -> StoredSecret | None:
        try:
            obj = self._port.get("secrets", self.name, self.namespace)
        except NotFoundError:
            return None
        if obj.get("type") != TLS_TYPE:
            # The type of a Secret cannot change; deleting someone's Secret is not ours to do.
            raise ConfigError(f"{self._what} exists with type {obj.get('type')!r}, not "
                              f"{TLS_TYPE!r}; delete it or choose another --secret")
        data = {k: _decode(v, f"{self._what} key {k}")
                for k, v in (obj.get("data") or {}).items()}
        return StoredSecret(data, meta.resource_version(obj))

    def write(self, data: Mapping[str, bytes], resource_version: str | None) -> None:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace,
                                    "labels": dict(_LABELS)}
        body: Obj = {"type": TLS_TYPE, "metadata": metadata,
                     "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}
        if resource_version is None:
            self._port.create("secrets", body)
        else:
            metadata["resourceVersion"] = resource_version
            self._port.replace("secrets", body)


#: The webhook configurations ``vgpu webhook`` serves, by resource: ``/mutate`` and
#: ``/validate`` (one Service, one certificate).
CONFIGURATIONS: tuple[Kind, ...] = ("mutatingwebhookconfigurations",
                                     "validatingwebhookconfigurations")


class ClusterWebhookStore:
    """One webhook configuration (``resource``: mutating, by default, or validating) whose
    ``caBundle`` fields trust the webhook.

    :meth:`write` replaces the object :meth:`read` returned, with only the bundles
    changed and its resourceVersion kept: if anything in the configuration changed in
    between (a webhook added, removed or reordered, another bundle written), the write is
    a ``ConflictError`` rather than a bundle set on the wrong webhook.
    """

    def __init__(self, port: ClusterPort, name: str,
                 resource: Kind = "mutatingwebhookconfigurations") -> None:
        self._port = port
        self.name = name
        self.resource = resource
        self._read: Obj | None = None

    @property
    def _what(self) -> str:
        return f"{self.resource[:-1]} {self.name}"

    def read(self) -> Sequence[WebhookBundle]:
        obj = self._port.get(self.resource, self.name)
        self._read = obj
        return [WebhookBundle(str(w.get("name", "")),
                              _decode((w.get("clientConfig") or {}).get("caBundle"),
                                      f"{self._what} webhook {w.get('name')!r} caBundle"))
                for w in obj.get("webhooks") or []]

    def write(self, changes: Sequence[tuple[int, WebhookBundle]]) -> None:
        if self._read is None:
            self.read()
        assert self._read is not None
        obj = copy.deepcopy(self._read)
        webhooks = obj.get("webhooks") or []
        for i, w in changes:
            if i >= len(webhooks) or webhooks[i].get("name") != w.name:
                # Only when the caller's positions are not from this store's last read.
                raise ConflictError(f"{self._what}: webhook {w.name!r} is no longer at "
                                    f"position {i}")
            webhooks[i].setdefault("clientConfig", {})["caBundle"] = (
                base64.b64encode(w.ca_bundle).decode())
        # A write is from one read; the next reconcile pass reads afresh.
        self._read = None
        self._port.replace(self.resource, obj)


class WebhookConfigurations:
    """The mutating and the validating configuration of one name as one store: their
    webhooks in that order. Missing when either is (the same apply creates both)."""

    def __init__(self, port: ClusterPort, name: str) -> None:
        self.name = name
        self._stores = [ClusterWebhookStore(port, name, r) for r in CONFIGURATIONS]
        self._sizes: list[int] = []

    def read(self) -> Sequence[WebhookBundle]:
        out: list[WebhookBundle] = []
        sizes = []
        for store in self._stores:
            found = store.read()
            sizes.append(len(found))
            out.extend(found)
        self._sizes = sizes
        return out

    def write(self, changes: Sequence[tuple[int, WebhookBundle]]) -> None:
        if not self._sizes:
            self.read()
        start = 0
        for store, size in zip(self._stores, self._sizes, strict=True):
            own = [(i - start, w) for i, w in changes if start <= i < start + size]
            if own:
                store.write(own)
            start += size
