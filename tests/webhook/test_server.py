"""The real server over TLS on loopback: admission, errors, probes, metrics, rotation."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import time
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from tests.webhook import certs
from tests.webhook.pods import ctr, pod, review
from vgpu.config import Config
from vgpu_webhook import admission_server as server_module
from vgpu_webhook.admission_server import WebhookServer
from vgpu_webhook.gpus import GpuView
from vgpu_webhook.tls import CertReloader

GPU_POD = pod(ctr("c", {"nvidia.com/gpumem": "3000"}), name=None, generate_name="job-")


@dataclass
class Env:
    server: WebhookServer
    view: GpuView
    ca: certs.Authority
    ca_file: Path
    cert_file: Path
    key_file: Path
    client_tls: ssl.SSLContext

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.port}/mutate"

    @property
    def ops(self) -> str:
        return f"http://127.0.0.1:{self.server.metrics_port}"


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    ca = certs.authority()
    ca_file = ca.write(tmp_path / "ca.crt")
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    certs.serving(ca, cert_file, key_file)
    view = GpuView()
    server = WebhookServer(Config(), view, CertReloader(str(cert_file), str(key_file)),
                           host="127.0.0.1", port=0, metrics_port=0, reload_interval=0.02)
    await server.start()
    try:
        yield Env(server, view, ca, ca_file, cert_file, key_file,
                  ssl.create_default_context(cafile=str(ca_file)))
    finally:
        await server.stop()


async def post(session: aiohttp.ClientSession, env: Env, body: bytes) -> tuple[int, bytes]:
    async with session.post(env.url, data=body, ssl=env.client_tls,
                            headers={"Content-Type": "application/json"}) as response:
        return response.status, await response.read()


async def test_mutates_over_tls(env: Env) -> None:
    async with aiohttp.ClientSession() as session:
        status, body = await post(session, env, json.dumps(review(GPU_POD, uid="u-1")).encode())
    assert status == 200
    answer = json.loads(body)
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == "u-1" and response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu",
            "value": "1"} in patch


@pytest.mark.parametrize(("body", "fragment"), [
    (b"", "not JSON"),
    (b"{not json", "not JSON"),
    (b"\xff\xfe\x00garbage", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1", "request": {}}',
     "admissionReviewVersions: [v1]"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}', "no request"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {}}',
     "no uid"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": '
     b'{"uid": NaN}}', "not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
])
async def test_not_a_review_is_400_with_a_message(env: Env, body: bytes, fragment: str) -> None:
    async with aiohttp.ClientSession() as session:
        status, text = await post(session, env, body)
    assert status == 400
    assert fragment in text.decode()
    assert b"Traceback" not in text


async def test_wrong_method_and_oversized_body_are_not_500(env: Env) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(env.url, ssl=env.client_tls) as response:
            assert response.status == 405
        big = json.dumps(review(pod(ctr("c", {"cpu": "1"}, env=[
            {"name": "X", "value": "x" * (5 * 1024 * 1024)}])))).encode()
        status, _ = await post(session, env, big)
    assert status == 413


async def test_a_bug_is_a_denial_not_a_500(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> Any:
        raise KeyError("surprise")

    monkeypatch.setattr(server_module, "decide", broken)
    async with aiohttp.ClientSession() as session:
        status, body = await post(session, env, json.dumps(review(GPU_POD, uid="u-9")).encode())
    assert status == 200
    response = json.loads(body)["response"]
    assert response["uid"] == "u-9" and response["allowed"] is False
    assert "u-9" in response["status"]["message"]
    assert "surprise" not in response["status"]["message"]


async def test_tls_below_1_2_is_refused(env: Env) -> None:
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(str(env.ca_file))
    # Let this client offer TLS 1.0/1.1 at all (OpenSSL's default security level would
    # refuse on the client side, and the test would prove nothing about the server).
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    # The server answers a protocol_version alert or drops the connection.
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        _, writer = await asyncio.open_connection("127.0.0.1", env.server.port, ssl=old,
                                                  server_hostname="localhost")
        writer.close()

    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        modern = ssl.create_default_context(cafile=str(env.ca_file))
        modern.minimum_version = modern.maximum_version = version
        _, writer = await asyncio.open_connection("127.0.0.1", env.server.port, ssl=modern,
                                                  server_hostname="localhost")
        assert writer.get_extra_info("ssl_object").version() == version.name.replace(
            "TLSv1_", "TLSv1.")
        writer.close()


async def test_probes_and_metrics(env: Env) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(env.ops + "/healthz") as response:
            assert response.status == 200
        async with session.get(env.ops + "/readyz") as response:
            assert response.status == 503
            assert "nodes" in await response.text()
        env.view.mark_synced()
        async with session.get(env.ops + "/readyz") as response:
            assert response.status == 200

        await post(session, env, json.dumps(review(GPU_POD)).encode())
        await post(session, env, json.dumps(review(pod(ctr("c")))).encode())
        await post(session, env, json.dumps(review(pod(ctr("c", {"nvidia.com/gpu": "-1"})))
                                            ).encode())
        await post(session, env, b"nope")
        async with session.get(env.ops + "/metrics") as response:
            assert response.status == 200
            text = await response.text()
    for outcome in ("mutated", "skipped", "denied", "invalid"):
        assert f'vgpu_webhook_requests_total{{outcome="{outcome}"}} 1.0' in text
    assert "vgpu_webhook_request_duration_seconds_count 4.0" in text
    assert "vgpu_webhook_certificate_expiry_timestamp_seconds" in text
    # The operations port is plain HTTP; /mutate is not served there.
    async with aiohttp.ClientSession() as session, session.post(
            env.ops + "/mutate", data=b"{}") as response:
        assert response.status in (404, 405)


async def peer_serial(env: Env, version: ssl.TLSVersion | None = None) -> int:
    context = env.client_tls
    if version is not None:
        context = ssl.create_default_context(cafile=str(env.ca_file))
        context.minimum_version = context.maximum_version = version
    _, writer = await asyncio.open_connection("127.0.0.1", env.server.port, ssl=context,
                                              server_hostname="localhost")
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return int(x509.load_der_x509_certificate(der).serial_number)


async def wait_for(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def rotate(env: Env, tmp: Path) -> x509.Certificate:
    """Replace the files one after the other, each atomically, as a Secret update does."""
    new_cert = certs.serving(env.ca, tmp / "new.crt", tmp / "new.key")
    os.replace(tmp / "new.crt", env.cert_file)
    os.replace(tmp / "new.key", env.key_file)
    return new_cert


async def test_rotation_under_load_loses_no_request(env: Env, tmp_path: Path) -> None:
    old_serial = await peer_serial(env)
    body = json.dumps(review(GPU_POD)).encode()
    results: list[tuple[float, int]] = []
    rotated_at: list[float] = []
    stop = asyncio.Event()

    async def client(reuse: bool) -> None:
        # Half the clients keep one connection across the rotation, half open a new one
        # (a new TLS handshake) for every request.
        connector = aiohttp.TCPConnector(force_close=not reuse, limit=1)
        async with aiohttp.ClientSession(connector=connector) as session:
            deadline = time.monotonic() + 10
            while not stop.is_set() and time.monotonic() < deadline:
                status, data = await post(session, env, body)
                ok = status == 200 and json.loads(data)["response"]["allowed"] is True
                results.append((time.monotonic(), 200 if ok else status))

    async def rotator() -> None:
        await wait_for(lambda: len(results) >= 40)
        rotate(env, tmp_path)
        await wait_for(lambda: env.server.tls.reloads >= 1)
        rotated_at.append(time.monotonic())
        count = len(results)
        await wait_for(lambda: len(results) >= count + 40)
        stop.set()

    await asyncio.wait_for(asyncio.gather(rotator(), *(client(i % 2 == 0) for i in range(8))),
                           timeout=20)
    assert all(status == 200 for _, status in results), "a request failed during rotation"
    assert any(t < rotated_at[0] for t, _ in results)
    assert any(t > rotated_at[0] for t, _ in results)
    new_serial = await peer_serial(env)
    assert new_serial != old_serial


async def test_half_rotated_pair_keeps_the_old_certificate(env: Env, tmp_path: Path) -> None:
    old_serial = await peer_serial(env)
    new_cert = certs.serving(env.ca, tmp_path / "new.crt", tmp_path / "new.key")
    os.replace(tmp_path / "new.crt", env.cert_file)  # the key is not there yet
    await wait_for(lambda: env.server.metrics.reload_failed._value.get() >= 1)
    assert await peer_serial(env) == old_serial
    assert env.server.tls.reloads == 0

    os.replace(tmp_path / "new.key", env.key_file)
    await wait_for(lambda: env.server.tls.reloads == 1)
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        assert await peer_serial(env, version) == new_cert.serial_number
    assert env.server.tls.expires == new_cert.not_valid_after_utc


async def test_secret_volume_symlink_swap_is_seen(tmp_path: Path) -> None:
    """Kubelet updates a Secret volume by re-pointing a ``..data`` symlink."""
    ca = certs.authority()
    first, second = tmp_path / "v1", tmp_path / "v2"
    first.mkdir()
    second.mkdir()
    certs.serving(ca, first / "tls.crt", first / "tls.key")
    new_cert = certs.serving(ca, second / "tls.crt", second / "tls.key")
    (tmp_path / "..data").symlink_to(first)
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).symlink_to(tmp_path / "..data" / name)
    reloader = CertReloader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    assert not reloader.check()
    (tmp_path / "..tmp").symlink_to(second)
    os.replace(tmp_path / "..tmp", tmp_path / "..data")
    assert reloader.check()
    assert reloader.expires == new_cert.not_valid_after_utc


def test_unreadable_certificate_is_a_clear_error(tmp_path: Path) -> None:
    from vgpu.errors import ConfigError

    (tmp_path / "tls.crt").write_text("not a certificate")
    (tmp_path / "tls.key").write_text("not a key")
    with pytest.raises(ConfigError, match="cannot load the TLS certificate"):
        CertReloader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    with pytest.raises(ConfigError, match="cannot load the TLS certificate"):
        CertReloader(str(tmp_path / "missing.crt"), str(tmp_path / "tls.key"))
