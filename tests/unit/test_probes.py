"""The operations port (vgpu/probes.py) as a real server: HTTPS with the probes open and
/metrics behind the guard, plain HTTP only on the loopback address, and every connection
bounded in number and in time."""

from __future__ import annotations

import select
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from tests.unit.test_metrics_auth import Reviewer
from vgpu.config.metrics_section import MetricsServerConfig
from vgpu.errors import ConfigError
from vgpu.metrics_auth import DelegatedGuard
from vgpu.probes import ProbeServer
from vgpu.serving import PLAIN, Serving, serving

UNVERIFIED = ssl.create_default_context()
UNVERIFIED.check_hostname, UNVERIFIED.verify_mode = False, ssl.CERT_NONE


def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Counter("vgpu_test_things", "things", registry=reg).inc()
    return reg


@pytest.fixture
def secure() -> Iterator[ProbeServer]:
    config = MetricsServerConfig(max_connections=3, request_timeout_seconds=1.0)
    server = ProbeServer(registry(), {"/healthz": lambda: (True, "ok")}, 0, "127.0.0.1",
                         serving=serving(config, Reviewer(), name="test"))
    server.start()
    yield server
    server.stop()


def get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"}
                                     if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=UNVERIFIED) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_https_with_the_probes_open_and_metrics_for_who_may(secure: ProbeServer) -> None:
    base = f"https://127.0.0.1:{secure.port}"
    assert get(f"{base}/healthz") == (200, "ok\n")
    assert get(f"{base}/metrics")[0] == 403
    assert get(f"{base}/metrics", "tenant")[0] == 403
    assert get(f"{base}/metrics", "forged")[0] == 401
    status, text = get(f"{base}/metrics", "prom")
    assert status == 200 and "vgpu_test_things_total 1.0" in text
    assert get(f"{base}/nothing")[0] == 404
    # Not plain HTTP on the same port.
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{secure.port}/healthz", timeout=5).read()


def closed_at_once(port: int) -> bool:
    """Whether a new connection is closed before anything is said on it."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            return sock.recv(1) == b""
        except (ConnectionResetError, TimeoutError):
            return False


def test_connections_beyond_the_cap_are_closed_and_slow_ones_cut(secure: ProbeServer) -> None:
    idle = [socket.create_connection(("127.0.0.1", secure.port), timeout=30)
            for _ in range(3)]
    try:
        # Held by three clients that say nothing: a fourth is closed at once, unserved.
        deadline = time.monotonic() + 20
        while secure.refused == 0 and time.monotonic() < deadline:
            assert closed_at_once(secure.port) or secure.refused == 0
        assert secure.refused >= 1
        # Each idle client is cut at its deadline (1 s here), freeing its slot.
        for sock in idle:
            assert sock.recv(1) == b""
    finally:
        for sock in idle:
            sock.close()
    assert get(f"https://127.0.0.1:{secure.port}/healthz")[0] == 200


def test_a_client_sending_a_byte_at_a_time_is_cut_at_the_deadline(secure: ProbeServer) -> None:
    with socket.create_connection(("127.0.0.1", secure.port), timeout=30) as raw, \
            UNVERIFIED.wrap_socket(raw, server_hostname="localhost") as tls:
        started = time.monotonic()
        with pytest.raises((OSError, ssl.SSLError)):
            for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
                tls.sendall(bytes([byte]))
                time.sleep(0.2)
            tls.recv(1) or (_ for _ in ()).throw(OSError("closed"))
        # Cut at the deadline (1 s), before the 28 s this client would take.
        assert time.monotonic() - started < 25


def test_only_get_is_served(secure: ProbeServer) -> None:
    request = urllib.request.Request(f"https://127.0.0.1:{secure.port}/healthz", data=b"x")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10, context=UNVERIFIED)
    assert refused.value.code == 405


def test_plain_http_binds_the_loopback_address_whatever_the_host() -> None:
    server = ProbeServer(registry(), {"/healthz": lambda: (True, "ok")}, 0, "",
                         serving=PLAIN)
    try:
        server.start()
        assert server._httpd.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics",
                                    timeout=10) as response:
            assert "vgpu_test_things_total" in response.read().decode()
    finally:
        server.stop()


def test_certificate_files_are_used_and_a_half_pair_is_refused(tmp_path: Path) -> None:
    from tests.webhook import certs
    ca = certs.authority()
    ca_file = ca.write(tmp_path / "ca.crt")
    certs.serving(ca, tmp_path / "tls.crt", tmp_path / "tls.key")
    config = MetricsServerConfig(cert_file=str(tmp_path / "tls.crt"),
                                 key_file=str(tmp_path / "tls.key"))
    made = serving(config, Reviewer(), name="test")
    server = ProbeServer(registry(), {"/healthz": lambda: (True, "ok")}, 0, "127.0.0.1",
                         serving=made)
    server.start()
    try:
        trusted = ssl.create_default_context(cafile=str(ca_file))
        trusted.check_hostname = False
        with urllib.request.urlopen(f"https://127.0.0.1:{server.port}/healthz", timeout=10,
                                    context=trusted) as response:
            assert response.status == 200
    finally:
        server.stop()
    with pytest.raises(ConfigError, match="go together"):
        serving(MetricsServerConfig(cert_file="x"), None, name="test")
    with pytest.raises(ConfigError, match=r"metricsServer\.certFile"):
        serving(MetricsServerConfig(cert_file="/nonexistent", key_file="/nonexistent"),
                None, name="test")


def test_insecure_is_plain_and_unguarded() -> None:
    made = serving(MetricsServerConfig(insecure=True), Reviewer(), name="test")
    assert made.plain and made.guard is None
    assert isinstance(serving(MetricsServerConfig(), Reviewer(), name="t").guard,
                      DelegatedGuard)
    assert Serving().plain


def test_a_handshake_that_never_ends_is_cut_at_the_deadline(secure: ProbeServer) -> None:
    with socket.create_connection(("127.0.0.1", secure.port), timeout=30) as raw:
        started = time.monotonic()
        # A handshake record 16 KiB long, sent a byte at a time: it never completes, and
        # no single read waits long enough to time out.
        raw.sendall(b"\x16\x03\x01\x40\x00")
        for _ in range(100):
            try:
                raw.sendall(b"\x01")
            except OSError:
                break
            if select.select([raw], [], [], 0.2)[0] and raw.recv(1) == b"":
                break
        assert time.monotonic() - started < 15
