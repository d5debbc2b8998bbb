"""vgpu/kube/http1.py sends a request twice only when the server cannot act on it twice.

Against a scripted server that can read a request and drop the connection without an
answer (as an API server that bound the pod and then went away), answer half, stall, or
close connections while they sit idle. Go's transport is the reference: a request is
resent only on a kept-alive connection, and only when none of it was written or it is a
GET, HEAD, OPTIONS or TRACE that met the end of the connection before any answer
(``net/http``: ``persistConn.shouldRetryRequest``, ``Request.isReplayable``).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_http1 import _read_request
from vgpu.errors import OutcomeUnknownError
from vgpu.kube import adapter, http1
from vgpu.kube.pool import REPLAYABLE, Pool

ANSWER, DROP, HALF, STALL = "answer", "drop", "half", "stall"
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


class ScriptedServer:
    """Per request, as read: ``plan[(id, nth time this id came)]`` says what to do
    (answer by default); ``received`` counts each request id the server read whole."""

    def __init__(self, plan: dict[tuple[str, int], str] | None = None) -> None:
        self.plan = plan or {}
        self.received: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._open.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    request = _read_request(conn)
                except OSError:
                    return
                if not request:
                    return
                rid = request.split(b" ")[1].decode()
                with self._lock:
                    self.received[rid] += 1
                    action = self.plan.get((rid, self.received[rid]), ANSWER)
                try:
                    if action == ANSWER:
                        conn.sendall(OK)
                        continue
                    if action == HALF:
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok")
                    elif action == STALL:
                        threading.Event().wait(0.3)
                except OSError:
                    pass
                return  # DROP, HALF and STALL end the connection with no whole answer

    def close_idle(self) -> None:
        for conn in self._open:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._sock.close()
        self.close_idle()


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    started = ScriptedServer()
    yield started
    started.close()


def pool_for(server: ScriptedServer) -> Pool:
    return Pool(http1.Endpoint("127.0.0.1", server.port))


def warm(pool: Pool) -> None:
    assert pool.request("GET", "/warm", {}, b"", 5) == (200, b"{}")


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_a_write_the_server_read_and_dropped_is_not_sent_again(
        server: ScriptedServer, method: str) -> None:
    server.plan[("/pods/p/binding", 1)] = DROP
    pool = pool_for(server)
    warm(pool)  # a kept-alive connection: the case the old code resent
    with pytest.raises(http1.AnswerLost, match="before answering"):
        pool.request(method, "/pods/p/binding", {}, b"{}", 5)
    assert server.received["/pods/p/binding"] == 1


def test_a_read_the_server_dropped_is_sent_again(server: ScriptedServer) -> None:
    server.plan[("/pods", 1)] = DROP
    pool = pool_for(server)
    warm(pool)
    assert pool.request("GET", "/pods", {}, b"", 5) == (200, b"{}")
    assert server.received["/pods"] == 2


def test_a_write_cut_inside_its_answer_or_timed_out_is_of_unknown_outcome(
        server: ScriptedServer) -> None:
    server.plan[("/half", 1)] = HALF
    server.plan[("/slow", 1)] = STALL
    pool = pool_for(server)
    with pytest.raises(http1.AnswerLost):
        pool.request("POST", "/half", {}, b"{}", 5)
    with pytest.raises(http1.AnswerLost):
        pool.request("POST", "/slow", {}, b"{}", (5.0, 0.1))
    assert server.received == Counter({"/half": 1, "/slow": 1})


def test_a_write_none_of_which_was_written_is_sent_on_a_new_connection(
        server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = pool_for(server)
    warm(pool)
    real = http1.Connection.send
    failed: list[bool] = []

    def first_fails(self: http1.Connection, head: bytes, body: bytes, timeout: float,
                    deadline: float | None = None) -> None:
        if not failed:
            failed.append(True)
            raise http1.NothingWritten("broken pipe before the first byte")
        real(self, head, body, timeout, deadline)

    monkeypatch.setattr(http1.Connection, "send", first_fails)
    assert pool.request("POST", "/once", {}, b"{}", 5) == (200, b"{}")
    assert server.received["/once"] == 1


def test_the_adapter_says_the_outcome_is_unknown(server: ScriptedServer) -> None:
    server.plan[("/api/v1/namespaces/default/pods/p/binding", 1)] = DROP

    class Transport:
        def __init__(self) -> None:
            self.pool = pool_for(server)

        def call(self, method: str, path: str, **_: object) -> tuple[int, bytes]:
            return self.pool.request(method, path, {}, b"{}", 5)

        def stream(self, *args: object, **kwargs: object) -> http1.Stream:
            raise AssertionError("not used")

    kube = adapter.KubeCluster(Transport(), qps=0)
    kube.request_json("GET", "/warm", "warm up")
    with pytest.raises(OutcomeUnknownError, match="bind pod p"):
        kube.bind("default", "p", "n1", {})
    assert server.received["/api/v1/namespaces/default/pods/p/binding"] == 1


METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
step = st.tuples(st.sampled_from(METHODS),
                 st.sampled_from((ANSWER, ANSWER, DROP, HALF)),  # the first try
                 st.sampled_from((ANSWER, DROP)),  # a second one, were there one
                 st.booleans())  # the server closes idle connections before it


@settings(max_examples=60, deadline=None)
@given(st.lists(step, min_size=1, max_size=12))
def test_no_write_ever_reaches_the_server_twice(steps: list[tuple[str, str, str, bool]]
                                                ) -> None:
    server = ScriptedServer()
    try:
        pool = pool_for(server)
        outcomes: dict[str, str] = {}
        for i, (method, first, second, close_idle) in enumerate(steps):
            rid = f"/r/{i}"
            server.plan[(rid, 1)], server.plan[(rid, 2)] = first, second
            if close_idle:
                server.close_idle()
                threading.Event().wait(0.005)
            try:
                pool.request(method, rid, {}, b"{}" if method != "GET" else b"", 5)
                outcomes[rid] = "answered"
            except http1.AnswerLost:
                outcomes[rid] = "unknown"
            except OSError:
                outcomes[rid] = "failed"
        for i, (method, *_rest) in enumerate(steps):
            rid = f"/r/{i}"
            seen = server.received[rid]
            if method in REPLAYABLE:
                assert seen <= 2, (rid, method, seen)
                continue
            assert seen <= 1, f"{method} {rid} reached the server {seen} times"
            if outcomes[rid] == "answered":
                assert seen == 1
            elif seen:
                # Read by the server and no answer: the caller is told it may have acted.
                assert outcomes[rid] == "unknown", (rid, method, outcomes[rid])
    finally:
        server.close()
