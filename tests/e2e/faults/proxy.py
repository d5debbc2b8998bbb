"""A TLS fault proxy between a component and the real kube-apiserver.

The component's kubeconfig names the proxy (its serving certificate is signed by the
control plane's CA, so the component trusts it as it trusts the API server); the proxy
reads each HTTP/1.1 request whole, asks its rules what to do with it, and then forwards
it upstream on a fresh TLS connection as the admin user (with ``Connection: close``, so
an answer ends where the upstream connection does, watches included). What the rules can
do to a request is what a network and a busy API server do in a bad week:

- ``FORWARD``: as is;
- ``DELAY``: forward after ``delay`` seconds;
- ``DROP``: close the client's connection, never send it (the client wrote every byte: it
  cannot tell this from a lost answer);
- ``LOSE_ANSWER``: send it, let the API server act, close the client's connection before
  any answer;
- ``LATE``: close the client's connection at once, and send the request upstream
  ``delay`` seconds later (a Binding that lands after its sender gave up on it);
- ``DUPLICATE``: send it twice, the second copy ``delay`` seconds after the first, and
  answer the client with the first answer;
- ``RESET``: reset the client's connection (RST) before any answer, not sending it.

Every request and what was done to it is kept in :attr:`FaultProxy.log`.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tests.controlplane.pki import KeyPair, make_serving_cert
from tests.e2e.faults.rules import Action, Fault, Request, Rule


@dataclass(frozen=True)
class Logged:
    #: When the proxy was done with the request (a watch: when it ended).
    at: float
    method: str
    target: str
    action: Action
    status: int | None
    #: When the proxy had read the whole request (``time.time()``).
    arrived: float = 0.0


class FaultProxy:
    """Serve TLS on 127.0.0.1; forward to ``upstream`` (``host:port``) as the client of
    ``client_cert``/``client_key``, trusting ``ca_cert``."""

    def __init__(self, upstream: str, pki_dir: Path, ca: KeyPair) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.rules: list[Rule] = []
        self.log: list[Logged] = []
        self._pending: set[asyncio.Task[None]] = set()
        serving = make_serving_cert(ca, "vgpu-fault-proxy", names=["localhost"],
                                    ips=["127.0.0.1"])
        folder = pki_dir / f"fault-proxy-{id(self):x}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tls.crt").write_bytes(serving.cert_pem())
        (folder / "tls.key").write_bytes(serving.key_pem())
        self._server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._server_ctx.load_cert_chain(folder / "tls.crt", folder / "tls.key")
        self._client_ctx = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
        self._client_ctx.load_cert_chain(pki_dir / "admin.crt", pki_dir / "admin.key")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="fault-proxy")
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._server_ctx),
            self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._pending):
                task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def faulted(self, action: Action | None = None) -> list[Logged]:
        return [e for e in self.log if e.action is not Action.FORWARD
                and (action is None or e.action is action)]

    # -- one client connection -------------------------------------------------------------

    def _fault(self, request: Request) -> Fault:
        for rule in list(self.rules):
            fault = rule(request)
            if fault is not None:
                return fault
        return Fault(Action.FORWARD)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pending.add(task)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                if not await self._handle(request, writer):
                    return
        except (OSError, asyncio.IncompleteReadError, ValueError, ssl.SSLError):
            return
        except asyncio.CancelledError:
            return  # the proxy is stopping: the connection just ends
        finally:
            self._pending.discard(task)
            _close(writer)

    async def _handle(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        """Carry out the request's fault; False when the client connection is done."""
        arrived = time.time()
        fault = self._fault(request)
        action = fault.action
        if action is Action.DELAY:
            await asyncio.sleep(fault.delay)
        if action in (Action.DROP, Action.RESET):
            self._record(request, action, None, arrived)
            if action is Action.RESET:
                _reset(writer)
            return False
        if action is Action.LATE:
            self._record(request, action, None, arrived)
            _close(writer)
            await asyncio.sleep(fault.delay)
            await self._exchange(request, None)
            return False
        if action is Action.LOSE_ANSWER:
            status = await self._exchange(request, None)
            self._record(request, action, status, arrived)
            return False
        status = await self._exchange(request, writer)
        self._record(request, action, status, arrived)
        if action is Action.DUPLICATE:
            await asyncio.sleep(fault.delay)
            await self._exchange(request, None)
        return False  # every answer says Connection: close

    def _record(self, request: Request, action: Action, status: int | None,
                arrived: float) -> None:
        self.log.append(Logged(time.time(), request.method, request.target, action, status,
                               arrived))

    async def _exchange(self, request: Request, client: asyncio.StreamWriter | None,
                        ) -> int | None:
        """Send ``request`` upstream on a fresh connection and copy the answer to
        ``client`` (None: read it and drop it); returns the answer's status."""
        try:
            up_reader, up_writer = await asyncio.open_connection(
                *self.upstream, ssl=self._client_ctx, server_hostname="localhost")
        except OSError:
            return None
        try:
            up_writer.write(_encode(request))
            await up_writer.drain()
            status: int | None = None
            while True:
                chunk = await up_reader.read(65536)
                if not chunk:
                    break
                if status is None:
                    status = _status(chunk)
                if client is not None:
                    client.write(chunk)
                    await client.drain()
            return status
        except (OSError, ssl.SSLError):
            return None
        finally:
            _close(up_writer)


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers = []
    length = 0
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        value = value.strip()
        if name.lower() == "content-length":
            length = int(value)
        if name.lower() == "transfer-encoding":
            raise ValueError("chunked request bodies are not proxied")
        headers.append((name, value))
    body = await reader.readexactly(length) if length else b""
    return Request(method, target, tuple(headers), body)


def _encode(request: Request) -> bytes:
    keep = [(n, v) for n, v in request.headers if n.lower() not in ("connection", "keep-alive")]
    head = [f"{request.method} {request.target} HTTP/1.1",
            *(f"{n}: {v}" for n, v in keep), "Connection: close", "", ""]
    return "\r\n".join(head).encode("latin-1") + request.body


def _status(chunk: bytes) -> int | None:
    try:
        return int(chunk.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
