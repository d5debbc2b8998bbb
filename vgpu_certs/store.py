"""Where ``vgpu certs`` keeps what it issues: the narrow interface and the folder store.

One Secret and one webhook configuration, named when the store is made, so the cluster
store needs rights on those two objects only (RBAC ``resourceNames``). The logic in
:mod:`vgpu_certs.reconcile` sees nothing but these interfaces, so it is tested without a
cluster; :mod:`vgpu_certs.cluster` is the implementation over the cluster port.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from vgpu.errors import ConfigError

CA_CRT = "ca.crt"
TLS_CRT = "tls.crt"
TLS_KEY = "tls.key"
KEYS = (CA_CRT, TLS_CRT, TLS_KEY)


@dataclass(frozen=True)
class StoredSecret:
    data: Mapping[str, bytes]
    resource_version: str


@dataclass(frozen=True)
class WebhookBundle:
    """One webhook of the configuration and the CA bundle it trusts now (PEM)."""

    name: str
    ca_bundle: bytes


class SecretStore(Protocol):
    def read(self) -> StoredSecret | None:
        """The Secret's data, or None when there is none."""
        ...

    def write(self, data: Mapping[str, bytes], resource_version: str | None) -> None:
        """Create the Secret (``resource_version`` None) or replace it; a stale version or
        an existing Secret on create raises ``ConflictError``."""
        ...


class WebhookStore(Protocol):
    def read(self) -> Sequence[WebhookBundle]:
        """The configuration's webhooks in order; ``NotFoundError`` when it does not exist."""
        ...

    def write(self, changes: Sequence[tuple[int, WebhookBundle]]) -> None:
        """Set the bundles of the webhooks at these positions, failing (``ConflictError``)
        when the configuration changed since :meth:`read`, and at the least when a
        position no longer holds the webhook of that name."""
        ...


class DirStore:
    """The material as three files in a folder, for local runs and tests.

    Files are replaced atomically (written aside, then renamed), so a webhook reloading
    them never reads half a key; the key is readable by its owner only.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def read(self) -> StoredSecret | None:
        data: dict[str, bytes] = {}
        for key in KEYS:
            try:
                data[key] = (self.folder / key).read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise ConfigError(f"{self.folder / key}: cannot read: {exc.strerror}") from None
        if not data:
            return None
        digest = hashlib.sha256(b"".join(data.get(k, b"") for k in KEYS)).hexdigest()[:16]
        return StoredSecret(data, digest)

    def write(self, data: Mapping[str, bytes], resource_version: str | None) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # The key goes last: a reader that sees the new key also sees the new cert.
            for key in sorted(data, key=lambda k: k == TLS_KEY):
                fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{key}.")
                try:
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(data[key])
                    os.chmod(tmp, 0o600 if key == TLS_KEY else 0o644)
                    os.replace(tmp, self.folder / key)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                    raise
        except OSError as exc:
            raise ConfigError(f"{self.folder}: cannot write: {exc.strerror}") from None
