"""The transports under :class:`vgpu.kube.adapter.KubeCluster`: how a request reaches the
API server and is authenticated.

In a pod (the deployed components) a small transport reads the service account's token
and CA directly: importing the ``kubernetes`` package loads thousands of model
classes (about 19 MB), which the node agent, running on every GPU node, cannot afford.
With a kubeconfig (an operator's laptop, the tests) the ``kubernetes`` client's own
``ApiClient`` carries the requests, so every auth method its loader knows (exec plugins,
OIDC, client certificates) works.

Both send requests and watches through :mod:`vgpu.kube.http1` connections kept in a
:class:`vgpu.kube.pool.Pool`; a kubeconfig that names
a proxy keeps them on the ``kubernetes`` client's urllib3, which knows proxies.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit

import orjson

from vgpu.kube import http1, pool, tokens

Timeout = http1.Timeout


class Answer(Protocol):
    """An answer read as it arrives (:class:`vgpu.kube.http1.Stream`)."""

    status: int

    def lines(self) -> Iterator[bytes]: ...

    def read(self) -> bytes: ...

    def close(self) -> None: ...


class Transport(Protocol):
    def call(self, method: str, path: str, *, query: list[tuple[str, str]], body: Any,
             content_type: str, timeout: Timeout,
             deadline: float | None = None) -> tuple[int, bytes]:
        """Send one request and read its whole answer: (status, body); with a
        ``deadline`` (``time.monotonic``), not sent once it passed and not waited for
        past it."""
        ...

    def stream(self, method: str, path: str, *, query: list[tuple[str, str]],
               timeout: Timeout) -> Answer:
        """Send one request; its answer is read as it arrives (a watch)."""
        ...


class _Urllib3Answer:
    def __init__(self, response: Any) -> None:
        self._response = response
        self.status: int = response.status

    def lines(self) -> Iterator[bytes]:
        for line in self._response:
            yield line.rstrip(b"\n")

    def read(self) -> bytes:
        data: bytes = self._response.data
        return data

    def close(self) -> None:
        self._response.release_conn()


def _target(path: str, query: list[tuple[str, str]]) -> str:
    return path + (f"?{urlencode(query)}" if query else "")


def _body(body: Any) -> bytes:
    return b"" if body is None else orjson.dumps(body)


def _within(timeout: Timeout, deadline: float | None) -> Timeout:
    """``timeout`` cut to ``deadline``, for urllib3, which knows no deadline (its read
    timeout is per read: close to the deadline for the small answers of writes)."""
    if deadline is None:
        return timeout
    connect, read = http1.times(timeout)
    try:
        return (http1.left(deadline, connect), http1.left(deadline, read))
    except http1.DeadlinePassed as exc:
        raise http1.NothingWritten(f"the request was not sent: {exc}") from exc


def _client_endpoint(configuration: Any) -> tuple[http1.Endpoint, str] | None:
    """Where a ``kubernetes.client.Configuration`` sends requests, and the path prefix
    of its server URL; None when it goes through a proxy."""
    url = urlsplit(configuration.host)
    if url.scheme not in ("http", "https") or not url.hostname:
        return None
    proxy = getattr(configuration, "proxy", None)
    if proxy:
        from kubernetes.client.rest import should_bypass_proxies  # noqa: PLC0415

        if not should_bypass_proxies(configuration.host, configuration.no_proxy or ""):
            return None
    tls = None
    if url.scheme == "https":
        tls = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
        if not configuration.verify_ssl:
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
        elif configuration.assert_hostname is False:
            tls.check_hostname = False
        if configuration.cert_file:
            tls.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    port = url.port or (443 if url.scheme == "https" else 80)
    endpoint = http1.Endpoint(url.hostname, port, tls, configuration.tls_server_name or None)
    return endpoint, url.path.rstrip("/")


class ClientTransport:
    """Requests through a configured ``kubernetes.client.ApiClient`` (kubeconfig auth)."""

    def __init__(self, api_client: Any) -> None:
        self.api = api_client
        configuration = api_client.configuration
        found = _client_endpoint(configuration)
        self._prefix = "" if found is None else found[1]
        self._fast = None if found is None else pool.Pool(
            found[0], configuration.connection_pool_maxsize or 4)

    def request(self, method: str, path: str, *, query: list[tuple[str, str]], body: Any,
                content_type: str, timeout: Timeout) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        method, url, headers, body, _ = self.api.param_serialize(
            method=method, resource_path=path, query_params=query,
            header_params=headers, body=body, auth_settings=["BearerToken"])
        return self.api.call_api(method, url, header_params=headers, body=body,
                                 _request_timeout=timeout).response

    def call(self, method: str, path: str, *, query: list[tuple[str, str]], body: Any,
             content_type: str, timeout: Timeout,
             deadline: float | None = None) -> tuple[int, bytes]:
        if self._fast is None:
            response = self.request(method, path, query=query, body=body,
                                    content_type=content_type,
                                    timeout=_within(timeout, deadline))
            return response.status, response.data
        return self._fast.request(method, self._prefix + _target(path, query),
                                  self._headers(method, path, body, content_type),
                                  _body(body), timeout, deadline=deadline)

    def stream(self, method: str, path: str, *, query: list[tuple[str, str]],
               timeout: Timeout) -> Answer:
        if self._fast is None:
            return _Urllib3Answer(self.request(method, path, query=query, body=None,
                                               content_type="application/json",
                                               timeout=timeout))
        return self._fast.stream(method, self._prefix + _target(path, query),
                                 self._headers(method, path, None, "application/json"),
                                 timeout)

    def _headers(self, method: str, path: str, body: Any, content_type: str) -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": content_type,
                   **self.api.default_headers}
        # The kubeconfig's credentials, refreshed as the client refreshes them (exec
        # plugins, OIDC); client certificates are in the endpoint's TLS context.
        self.api.update_params_for_auth(headers, [], ["BearerToken"], path, method, body)
        return headers


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class InClusterTransport:
    """Requests with the pod's service account, without importing ``kubernetes``.

    The token is read again as client-go reads it (:class:`vgpu.kube.tokens.TokenFile`):
    bound service-account tokens are rotated by the kubelet and an old one stops working
    after an hour.
    """

    def __init__(self, host: str, port: str, account_dir: str = SERVICE_ACCOUNT_DIR,
                 pool_size: int = 32) -> None:
        self._token = tokens.TokenFile(os.path.join(account_dir, "token"))
        ca = os.path.join(account_dir, "ca.crt")
        self._pool = pool.Pool(http1.Endpoint(host, int(port),
                                               ssl.create_default_context(cafile=ca)), pool_size)

    def _bearer(self) -> str:
        return self._token.token()

    def call(self, method: str, path: str, *, query: list[tuple[str, str]], body: Any,
             content_type: str, timeout: Timeout,
             deadline: float | None = None) -> tuple[int, bytes]:
        return self._pool.request(method, _target(path, query), self._headers(content_type),
                                  _body(body), timeout, deadline=deadline)

    def stream(self, method: str, path: str, *, query: list[tuple[str, str]],
               timeout: Timeout) -> Answer:
        return self._pool.stream(method, _target(path, query),
                                 self._headers("application/json"), timeout)

    def _headers(self, content_type: str) -> dict[str, str]:
        return {"Accept": "application/json", "Content-Type": content_type,
                "Authorization": f"Bearer {self._bearer()}"}
