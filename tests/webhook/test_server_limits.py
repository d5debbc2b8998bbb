"""The admission port's bounds, on the real server: a connection cap, and a deadline for
a request's headers (the keep-alive timer) and for its body and answer (HTTP 408)."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.webhook import certs
from vgpu.config import Config, WebhookConfig
from vgpu_webhook.admission_server import WebhookServer
from vgpu_webhook.gpus import GpuView
from vgpu_webhook.tls import CertReloader


@pytest.fixture
async def bounded(tmp_path: Path) -> AsyncIterator[tuple[WebhookServer, ssl.SSLContext]]:
    ca = certs.authority()
    ca_file = ca.write(tmp_path / "ca.crt")
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    certs.serving(ca, cert_file, key_file)
    config = Config(webhook=WebhookConfig(max_connections=2, request_timeout_seconds=1.0,
                                          idle_timeout_seconds=1.0))
    server = WebhookServer(config, GpuView(), CertReloader(str(cert_file), str(key_file)),
                           host="127.0.0.1", port=0, metrics_port=0)
    await server.start()
    try:
        yield server, ssl.create_default_context(cafile=str(ca_file))
    finally:
        await server.stop()


async def connect(server: WebhookServer, tls: ssl.SSLContext,
                  ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.port, ssl=tls,
                                         server_hostname="localhost")


async def test_connections_beyond_the_cap_are_closed(
        bounded: tuple[WebhookServer, ssl.SSLContext]) -> None:
    server, tls = bounded
    held = [await connect(server, tls) for _ in range(2)]
    # The two are idle for less than their deadline; a third is closed unserved.
    reader, writer = await connect(server, tls)
    writer.write(b"GET /mutate HTTP/1.1\r\nHost: x\r\n\r\n")
    assert await asyncio.wait_for(reader.read(), 20) == b""
    assert server._site is not None and server._site.refused >= 1
    for _, w in held:
        w.close()


async def test_a_connection_whose_request_never_comes_is_closed(
        bounded: tuple[WebhookServer, ssl.SSLContext]) -> None:
    server, tls = bounded
    reader, writer = await connect(server, tls)
    writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\n")  # headers never end
    started = time.monotonic()
    await asyncio.wait_for(reader.read(), 30)
    assert time.monotonic() - started < 30
    writer.close()


async def test_a_body_slower_than_the_deadline_is_answered_408(
        bounded: tuple[WebhookServer, ssl.SSLContext]) -> None:
    server, tls = bounded
    reader, writer = await connect(server, tls)
    writer.write(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{")
    await writer.drain()
    answer = await asyncio.wait_for(reader.readline(), 30)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    writer.close()
