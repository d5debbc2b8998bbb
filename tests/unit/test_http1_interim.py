"""Interim ``1xx`` answers are read past, in a packet of their own or with the answer
(vgpu/kube/http1.py; issue 24: one arriving alone was returned as the answer)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from vgpu.kube import http1, pool

FINAL = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n" \
        b'{"ok":true}'
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"


class Split:
    """Answers each request on one kept-alive connection with ``parts``, one packet each,
    a pause between them (so each arrives alone)."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts
        self.requests = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self._sock.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                self.requests += 1
                for part in self.parts:
                    conn.sendall(part)
                    time.sleep(0.05)

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def split() -> Iterator[list[Split]]:
    servers: list[Split] = []
    yield servers
    for server in servers:
        server.close()


@pytest.mark.parametrize("parts", [
    pytest.param([CONTINUE, FINAL], id="100-alone"),
    pytest.param([HINTS, FINAL], id="103-with-headers-alone"),
    pytest.param([CONTINUE, HINTS, FINAL[:40], FINAL[40:]], id="two-interims-then-a-split-answer"),
    pytest.param([CONTINUE + FINAL], id="100-and-the-answer-in-one-packet"),
    pytest.param([CONTINUE[:10], CONTINUE[10:] + FINAL], id="100-cut-across-packets"),
])
def test_the_answer_is_the_final_one(split: list[Split], parts: list[bytes]) -> None:
    server = Split(parts)
    split.append(server)
    conn = pool.Pool(http1.Endpoint("127.0.0.1", server.port))
    for _ in range(2):  # and the connection is left at the start of the next answer
        assert conn.request("POST", "/x", {}, b"{}", 5) == (201, b'{"ok":true}')
    assert server.requests == 2


def test_a_stream_after_an_interim_answer_reads_the_real_one(split: list[Split]) -> None:
    body = b'{"type":"ADDED"}\n'
    answer = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
              + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
    server = Split([CONTINUE, answer])
    split.append(server)
    stream = pool.Pool(http1.Endpoint("127.0.0.1", server.port)).stream("GET", "/w", {}, 5)
    assert stream.status == 200
    assert list(stream.lines()) == [body.rstrip(b"\n")]
    stream.close()


@pytest.mark.parametrize(("status", "skipped"), [(100, True), (102, True), (103, True),
                                                 (199, True), (101, False), (200, False),
                                                 (204, False), (99, False)])
def test_which_answers_are_interim(status: int, skipped: bool) -> None:
    assert http1.interim(status) is skipped
