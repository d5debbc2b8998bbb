"""Where a kubeconfig's requests go on the fast path (vgpu/kube/http1.py), or that they stay
on urllib3 (a proxy)."""

from __future__ import annotations

import ssl

import kubernetes
import pytest

from vgpu.kube import transport


def configuration(host: str, **settings: object) -> kubernetes.client.Configuration:
    config = kubernetes.client.Configuration()
    config.host = host
    for name, value in settings.items():
        setattr(config, name, value)
    return config


@pytest.mark.parametrize(("host", "authority", "prefix", "tls"), [
    ("https://10.0.0.1:6443", "10.0.0.1:6443", "", True),
    ("https://api.example.com", "api.example.com:443", "", True),
    ("http://127.0.0.1:8080/", "127.0.0.1:8080", "", False),
    ("https://rancher.example.com/k8s/clusters/c-1", "rancher.example.com:443",
     "/k8s/clusters/c-1", True),
    ("https://[fd00::1]:6443", "[fd00::1]:6443", "", True),
])
def test_the_endpoint_and_path_prefix(host: str, authority: str, prefix: str,
                                      tls: bool) -> None:
    found = transport._client_endpoint(configuration(host))
    assert found is not None
    endpoint, got_prefix = found
    assert (endpoint.authority, got_prefix, endpoint.tls is not None) == (authority, prefix, tls)


def test_a_proxy_keeps_urllib3_unless_the_host_bypasses_it() -> None:
    assert transport._client_endpoint(
        configuration("https://10.0.0.1:6443", proxy="http://proxy:3128")) is None
    assert transport._client_endpoint(
        configuration("https://10.0.0.1:6443", proxy="http://proxy:3128",
                      no_proxy="10.0.0.1")) is not None


def test_tls_settings_follow_the_kubeconfig() -> None:
    found = transport._client_endpoint(configuration(
        "https://10.0.0.1:6443", verify_ssl=False, tls_server_name="kubernetes"))
    assert found is not None
    endpoint = found[0]
    assert endpoint.tls is not None and endpoint.tls.verify_mode == ssl.CERT_NONE
    assert endpoint.server_hostname == "kubernetes"
