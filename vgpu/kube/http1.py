"""HTTP/1.1 requests on kept-alive connections, for the API calls a burst makes per pod.

A binding or an Event is a small request with a small answer. Through urllib3 (alone or
under the ``kubernetes`` client) one cost the scheduler 300-390 µs of CPU on the test API
server, through ``http.client`` 150-200 µs (it parses headers with the ``email`` package),
and written here in one write with the answer parsed by httptools (the llhttp parser
of Node.js, which uvicorn uses) 60-80 µs: at two requests per pod, a third of the
scheduler's CPU per pod in ``bench/bind.py``. A watch is read the same way, as a
:class:`Stream` of lines.

Only what the API server's answers need: a status, a body (by length or chunked), and
whether the connection stays open.

Connections are kept alive and shared by :class:`vgpu.kube.pool.Pool`, which also decides
when a request may be sent again (never when the server could act on it twice).
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import struct
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import httptools

Timeout = float | tuple[float, float]


class ProtocolError(OSError):
    """The peer's answer was not HTTP/1.1, or the connection ended inside it."""


class ClosedEarly(ProtocolError):
    """The connection ended before any byte of an answer."""


class NothingWritten(ProtocolError):
    """Writing the request failed before its first byte reached the connection."""


class AnswerLost(ProtocolError):
    """A request that is not safe to send twice went out (some or all of it) and no whole
    answer came back: the server may have carried it out."""


class DeadlinePassed(ProtocolError):
    """The request's deadline passed: before it was sent (then as :class:`NothingWritten`)
    or while its answer was awaited."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    #: None: plain TCP (an ``http://`` server).
    tls: ssl.SSLContext | None = None
    #: The name the certificate must carry (a kubeconfig's ``tls-server-name``).
    server_hostname: str | None = None

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def _check_header(name: str, value: str) -> None:
    if any(c in name or c in value for c in "\r\n\0"):
        raise ProtocolError(f"header {name!r} has a line break or NUL in it")


def request_head(method: str, target: str, authority: str, headers: Mapping[str, str],
                 length: int) -> bytes:
    """The request line and headers, ready to send."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}"]
    for name, value in headers.items():
        _check_header(name, value)
        lines.append(f"{name}: {value}")
    if length or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def interim(status: int) -> bool:
    """An interim answer (100, 102, 103): no body, the real one follows; skipped, as Go's
    transport does. 101 switches protocols: an answer of its own (refused where read)."""
    return 100 <= status < 200 and status != 101


class Answer:
    """httptools' callbacks: the body's pieces, whether the message is complete, and
    whether the connection stays open (the parser forgets it once the message ends).
    ``interim``: an interim answer is being read past, alone in its packet or not."""

    __slots__ = ("body", "complete", "framed", "headers_done", "interim", "keep_alive",
                 "parser")

    def __init__(self) -> None:
        self.body: list[bytes] = []
        self.complete = False
        self.keep_alive = False
        #: The headers gave the body's length or chunked it (else it ends with the stream).
        self.framed = False
        self.headers_done = False
        self.interim = False
        self.parser = httptools.HttpResponseParser(self)

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        self.interim = interim(self.parser.get_status_code())
        self.headers_done = not self.interim

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = self.framed = False
            return
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()


def times(timeout: Timeout) -> tuple[float, float]:
    return timeout if isinstance(timeout, tuple) else (timeout, timeout)


def left(deadline: float | None, timeout: float) -> float:
    """``timeout``, cut to what is left before ``deadline`` (``time.monotonic``; None: no
    deadline); :class:`DeadlinePassed` when nothing is."""
    if deadline is None:
        return timeout
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise DeadlinePassed(f"its deadline passed {-remaining:.3f} s ago")
    return min(timeout, remaining)


class Connection:
    def __init__(self, endpoint: Endpoint, connect_timeout: float) -> None:
        sock = socket.create_connection((endpoint.host, endpoint.port), timeout=connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if endpoint.tls is not None:
                sock = endpoint.tls.wrap_socket(
                    sock, server_hostname=endpoint.server_hostname or endpoint.host)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self.used = False
        # The request in hand's: every wait for its answer ends by then.
        self._deadline: float | None = None
        self._read_timeout = connect_timeout

    def stale(self) -> bool:
        """Whether the server closed it (or sent something unasked) while it sat idle."""
        sock = self._sock
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        try:
            ready, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(ready)

    def send(self, head: bytes, body: bytes, read_timeout: float,
             deadline: float | None = None) -> None:
        """Write one request; with a ``deadline`` (``time.monotonic``), nothing is written
        once it has passed, and no wait for the answer outlasts it."""
        self.used = True
        sock = self._sock
        self._deadline, self._read_timeout = deadline, read_timeout
        try:
            sock.settimeout(left(deadline, read_timeout))
        except DeadlinePassed as exc:
            raise NothingWritten(f"the request was not sent: {exc}") from exc
        # One write for a small request; a large body is not copied behind its head.
        sent = 0
        for piece in (head, body) if len(body) >= 65536 else (head + body,):
            view = memoryview(piece)
            while view:
                try:
                    written = sock.send(view)
                except OSError as exc:
                    if sent:
                        raise
                    raise NothingWritten(f"the request could not be sent: {exc}") from exc
                sent += written
                view = view[written:]

    def receive(self, answer: Answer) -> bool:
        """Feed what the socket has to ``answer``'s parser; False at the end of the stream."""
        if self._deadline is not None:
            self._sock.settimeout(left(self._deadline, self._read_timeout))
        data = self._sock.recv(262144)
        if not data:
            return False
        try:
            answer.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            raise ProtocolError("the server switched protocols") from None
        except httptools.HttpParserError as exc:
            raise ProtocolError(f"malformed answer: {exc}") from None
        return True

    def start(self, head: bytes, body: bytes, read_timeout: float,
              deadline: float | None = None) -> Answer:
        """Send one request and read its answer up to the end of the headers."""
        self.send(head, body, read_timeout, deadline)
        answer = Answer()
        received = False
        while not answer.headers_done:
            if not self.receive(answer):
                if not received:
                    raise ClosedEarly("the server closed the connection before answering")
                raise ProtocolError("the connection ended inside the answer's headers")
            received = True
        return answer

    def finish(self, answer: Answer) -> None:
        """Read the rest of ``answer``."""
        while not answer.complete:
            if not self.receive(answer):
                if not answer.framed:
                    return  # neither a length nor chunks: the body ends with the stream
                raise ProtocolError("the connection ended inside the answer")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()

    def abort(self) -> None:
        """Close with a reset: what the kernel still holds of the request is dropped, not
        sent on for as long as TCP retransmits (minutes, across a partition), and the
        server learns at once that nobody waits for the answer (Go's server then cancels
        the request's context)."""
        with contextlib.suppress(OSError):
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                  struct.pack("ii", 1, 0))
        self.close()


class Stream:
    """An answer read as it arrives (a watch): its status, then its body line by line.
    The connection is closed with the stream, never reused."""

    def __init__(self, conn: Connection, answer: Answer) -> None:
        self._conn = conn
        self._answer = answer
        self.status = answer.parser.get_status_code()

    def lines(self) -> Iterator[bytes]:
        """The body's lines (without their ends) as they arrive."""
        answer, pending = self._answer, b""
        while True:
            if answer.body:
                data = pending + b"".join(answer.body)
                answer.body.clear()
                *complete, pending = data.split(b"\n")
                yield from complete
            if answer.complete:
                break
            if not self._conn.receive(answer):
                if answer.framed:
                    raise ProtocolError("the connection ended inside the answer")
                break
        if pending:
            yield pending

    def read(self) -> bytes:
        """The rest of the body."""
        self._conn.finish(self._answer)
        data = b"".join(self._answer.body)
        self._answer.body.clear()
        return data

    def close(self) -> None:
        self._conn.close()
