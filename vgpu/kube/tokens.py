"""Bearer tokens read from a file and read again, as client-go reads them.

client-go's ``transport.NewCachedFileTokenSource`` keeps a token file's content for a
minute less ten seconds of leeway, then reads the file again, and keeps the token it has
when a read fails. Both files vgpu takes a token from rotate: a pod's service-account
token (the kubelet renews it) and a kubeconfig's ``tokenFile`` (whatever writes it). The
``kubernetes`` package reads a ``tokenFile`` once, when the kubeconfig is loaded, so
:func:`kubeconfig_token_file` finds it and the transport asks a :class:`TokenFile`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from vgpu.errors import ConfigError

#: client-go's period and leeway: a token is read again 50 s after it was read.
PERIOD_SECONDS = 60.0
LEEWAY_SECONDS = 10.0
#: What a :class:`TokenFile` made without a clock reads the time from.
monotonic = time.monotonic


def _now() -> float:
    return monotonic()  # the module's, read at each call (tests set it)


class TokenFile:
    """The token in ``path``, read again once it is older than 50 seconds."""

    def __init__(self, path: str, clock: Callable[[], float] | None = None) -> None:
        self.path = path
        self._clock = clock if clock is not None else _now
        self._lock = threading.Lock()
        self._token = ""
        self._read = 0.0

    def token(self) -> str:
        """The token; a failed read keeps the last one (the first failing is a
        :class:`ConfigError`)."""
        now = self._clock()
        with self._lock:
            if self._token and now - self._read < PERIOD_SECONDS - LEEWAY_SECONDS:
                return self._token
            try:
                with open(self.path, encoding="utf-8") as handle:
                    token = handle.read().strip()
            except OSError as exc:
                if not self._token:
                    raise ConfigError(f"cannot read the token file {self.path}: "
                                      f"{exc.strerror}") from None
                return self._token  # as client-go: keep serving the one it has
            if token:
                self._token, self._read = token, now
            elif not self._token:
                raise ConfigError(f"the token file {self.path} is empty")
            return self._token


def kubeconfig_token_file(kubeconfig: str | None) -> str | None:
    """The ``tokenFile`` of the kubeconfig's current user (relative to the file that names
    it, as client-go reads it), or None: no such field, or the user authenticates by an
    auth provider or an exec plugin instead."""
    from kubernetes.config import kube_config  # noqa: PLC0415  (lazy, as in adapter.connect)

    # ConfigNode: `in` tests a key, [] wraps a mapping and keeps the file it came from.
    merged: Any = kube_config.KubeConfigMerger(
        kubeconfig or kube_config.KUBE_CONFIG_DEFAULT_LOCATION).config
    current = merged.safe_get("current-context")
    if not current or "contexts" not in merged or "users" not in merged:
        return None
    context = merged["contexts"].get_with_name(current, safe=True)
    if context is None or not isinstance(context.safe_get("context"), dict):
        return None
    name = context["context"].safe_get("user")
    found = merged["users"].get_with_name(name, safe=True) if name else None
    if found is None or not isinstance(found.safe_get("user"), dict):
        return None
    user = found["user"]
    if "auth-provider" in user or "exec" in user:
        return None
    path = user.safe_get("tokenFile")
    if not isinstance(path, str) or not path:
        return None
    if not os.path.isabs(path) and user.path:
        path = os.path.join(os.path.dirname(os.path.abspath(user.path)), path)
    return str(path)


def refresher(source: TokenFile) -> Callable[[Any], None]:
    """A ``kubernetes.client.Configuration.refresh_api_key_hook`` that sets the bearer token
    from ``source`` before each request (the loader's own hook would keep the first)."""

    def refresh(configuration: Any) -> None:
        configuration.api_key["BearerToken"] = f"Bearer {source.token()}"

    return refresh
