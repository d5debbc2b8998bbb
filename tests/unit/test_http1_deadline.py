"""A request's deadline in vgpu/kube/http1.py and pool.py (issue 46): never sent once it
passed, never waited for past it, and a write given up is reset, not closed."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from tests.unit.test_http1 import Server, ok, pool, serve
from vgpu.kube import http1

__all__ = ["serve"]  # the fixture, used by name


def test_a_write_unanswered_by_its_deadline_is_lost(serve: Callable[..., Server]) -> None:
    event = threading.Event()
    server = serve([lambda _req: (event.wait(5), b"")[1]])
    started = time.monotonic()
    with pytest.raises(http1.AnswerLost, match="no whole answer"):
        # The read timeout (5 s) is longer: the deadline ends the wait.
        pool(server).request("POST", "/binding", {}, b"{}", 5, deadline=started + 0.3)
    assert 0.3 <= time.monotonic() - started < 3
    assert len(server.requests) == 1
    event.set()


def test_a_request_whose_deadline_passed_is_never_sent(serve: Callable[..., Server]) -> None:
    server = serve([ok(b"1"), ok(b"2")])
    p = pool(server)
    with pytest.raises(http1.NothingWritten, match="deadline passed"):
        p.request("POST", "/", {}, b"{}", 5, deadline=time.monotonic() - 0.1)
    assert server.connections == 0
    # On a kept-alive connection too.
    assert p.request("GET", "/", {}, b"", 5) == (200, b"1")
    with pytest.raises(http1.NothingWritten, match="deadline passed"):
        p.request("POST", "/", {}, b"{}", 5, deadline=time.monotonic() - 0.1)
    assert len(server.requests) == 1
    assert p.request("POST", "/", {}, b"{}", 5, deadline=time.monotonic() + 5) == (200, b"2")


def test_an_abandoned_write_resets_its_connection() -> None:
    """The server sees a reset, not an orderly close: what the kernel had not delivered is
    dropped, and a Go server cancels the request at once."""
    listener = socket.create_server(("127.0.0.1", 0))
    with listener:
        conn = http1.Connection(http1.Endpoint("127.0.0.1", listener.getsockname()[1]), 5)
        peer, _ = listener.accept()
        with peer:
            conn.send(b"POST / HTTP/1.1\r\n\r\n", b"", 5)
            assert peer.recv(100).startswith(b"POST")
            conn.abort()
            with pytest.raises(ConnectionResetError):
                peer.settimeout(5)
                peer.recv(100)
