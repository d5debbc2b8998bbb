"""The transports under :class:`vgpu.kube.adapter.KubeCluster`: how a request reaches the
API server and is authenticated.

In a pod (the deployed components) a small urllib3 transport reads the service account's
token and CA directly: importing the ``kubernetes`` package loads thousands of model
classes (about 19 MB), which the node agent, running on every GPU node, cannot afford.
With a kubeconfig (an operator's laptop, the tests) the ``kubernetes`` client's own
``ApiClient`` carries the requests, so every auth method its loader knows (exec plugins,
OIDC, client certificates) works.
"""

from __future__ import annotations

import os
import time
from typing import Any, Protocol
from urllib.parse import urlencode

import orjson
import urllib3

Timeout = float | tuple[float, float]


class Transport(Protocol):
    def request(self, method: str, path: str, *, query: list[tuple[str, str]], body: Any,
                content_type: str, timeout: Timeout) -> Any:
        """Send one request; returns a urllib3 response whose body is not read yet."""
        ...


def _urllib3_timeout(timeout: Timeout) -> urllib3.Timeout:
    if isinstance(timeout, tuple):
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return urllib3.Timeout(total=timeout)


class ClientTransport:
    """Requests through a configured ``kubernetes.client.ApiClient`` (kubeconfig auth)."""

    def __init__(self, api_client: Any) -> None:
        self.api = api_client

    def request(self, method: str, path: str, *, query: list[tuple[str, str]], body: Any,
                content_type: str, timeout: Timeout) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        method, url, headers, body, _ = self.api.param_serialize(
            method=method, resource_path=path, query_params=query,
            header_params=headers, body=body, auth_settings=["BearerToken"])
        return self.api.call_api(method, url, header_params=headers, body=body,
                                 _request_timeout=timeout).response


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class InClusterTransport:
    """Requests with the pod's service account, without importing ``kubernetes``.

    The token is re-read every minute: bound service-account tokens are rotated by the
    kubelet and an old one stops working after an hour.
    """

    def __init__(self, host: str, port: str, account_dir: str = SERVICE_ACCOUNT_DIR,
                 pool_size: int = 32) -> None:
        self.base = f"https://{host}:{port}" if ":" not in host else f"https://[{host}]:{port}"
        self._token_file = os.path.join(account_dir, "token")
        self._token = ""
        self._token_read = 0.0
        self._pool = urllib3.PoolManager(maxsize=pool_size, cert_reqs="CERT_REQUIRED",
                                         ca_certs=os.path.join(account_dir, "ca.crt"))

    def _bearer(self) -> str:
        now = time.monotonic()
        if not self._token or now - self._token_read > 60:
            with open(self._token_file, encoding="utf-8") as handle:
                self._token = handle.read().strip()
            self._token_read = now
        return self._token

    def request(self, method: str, path: str, *, query: list[tuple[str, str]], body: Any,
                content_type: str, timeout: Timeout) -> Any:
        url = self.base + path + (f"?{urlencode(query)}" if query else "")
        headers = {"Accept": "application/json", "Content-Type": content_type,
                   "Authorization": f"Bearer {self._bearer()}"}
        return self._pool.request(method, url, body=None if body is None else orjson.dumps(body),
                                  headers=headers, timeout=_urllib3_timeout(timeout),
                                  preload_content=False)
