"""Kept-alive HTTP/1.1 connections to one endpoint (:mod:`vgpu.kube.http1`), shared by
threads, and when a request may be sent again.

A request is sent again only when that cannot make the server act twice, by the rules of
Go's transport (``net/http``'s ``shouldRetryRequest`` and ``Request.isReplayable``): on a
kept-alive connection (a fresh one that fails says something about the server, not the
connection), when not one byte of it was written, or when it is a GET, HEAD, OPTIONS or
TRACE and the connection ended before the first byte of an answer (closed while idle, as
the request left). Any other request that went out and got no whole answer raises
:class:`~vgpu.kube.http1.AnswerLost`: the server may have acted on it (read it, bound the
pod, and dropped the connection), and only the caller can find out. A connection the
server closed while idle is noticed before it is used at all (it reads as ready).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import NoReturn

from vgpu.kube import http1

#: Methods a server carries out without effect, so they may be sent again (Go's
#: ``isReplayable``; PUT and DELETE are idempotent but not in it, and not here).
REPLAYABLE = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def _drop(conn: http1.Connection, method: str, target: str, exc: BaseException) -> NoReturn:
    """Close ``conn`` and raise for ``exc``, met after the request went out: as it is, or
    :class:`http1.AnswerLost` for a request that is not safe to send twice and failed on
    the connection (that connection is reset: what it had not delivered yet never is)."""
    if method in REPLAYABLE or not isinstance(exc, OSError) or isinstance(
            exc, (http1.NothingWritten, http1.AnswerLost)):
        conn.close()
        raise exc
    conn.abort()
    raise http1.AnswerLost(
        f"{method} {target.partition('?')[0]}: no whole answer: {exc}") from exc


class Pool:
    """Kept-alive connections to one endpoint, shared by threads (at most ``maxsize`` idle)."""

    def __init__(self, endpoint: http1.Endpoint, maxsize: int = 32) -> None:
        self.endpoint = endpoint
        self._maxsize = maxsize
        self._idle: list[http1.Connection] = []
        self._lock = threading.Lock()

    def _take(self, connect_timeout: float, deadline: float | None) -> http1.Connection:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                try:
                    connect_timeout = http1.left(deadline, connect_timeout)
                except http1.DeadlinePassed as exc:
                    raise http1.NothingWritten(f"the request was not sent: {exc}") from exc
                return http1.Connection(self.endpoint, connect_timeout)
            if not conn.stale():
                return conn
            conn.close()

    def _give(self, conn: http1.Connection) -> None:
        with self._lock:
            if len(self._idle) < self._maxsize:
                self._idle.append(conn)
                return
        conn.close()

    def _started(self, method: str, target: str, headers: Mapping[str, str], body: bytes,
                 timeout: http1.Timeout, *, deadline: float | None = None,
                 ) -> tuple[http1.Connection, http1.Answer]:
        connect_timeout, read_timeout = http1.times(timeout)
        head = http1.request_head(method, target, self.endpoint.authority, headers, len(body))
        replayable = method in REPLAYABLE
        for attempt in range(2):
            conn = self._take(connect_timeout, deadline)
            again = conn.used and not attempt
            try:
                return conn, conn.start(head, body, read_timeout, deadline)
            except http1.NothingWritten:
                conn.close()
                if not again:
                    raise
                # Not a byte went out: the server cannot have seen it.
            except http1.ClosedEarly as exc:
                conn.close()
                if replayable and again:
                    continue  # closed while idle, as the request left: harmless to resend
                if replayable:
                    raise
                raise http1.AnswerLost(f"{method} {target.partition('?')[0]}: {exc}") from exc
            except BaseException as exc:
                _drop(conn, method, target, exc)
        raise AssertionError("unreachable")  # pragma: no cover

    def request(self, method: str, target: str, headers: Mapping[str, str], body: bytes,
                timeout: http1.Timeout, *, deadline: float | None = None,
                ) -> tuple[int, bytes]:
        """Send a request (``target``: path and query) and read the whole answer, by
        ``deadline`` (``time.monotonic``) if one is given: a request not yet sent then is
        :class:`~vgpu.kube.http1.NothingWritten`, one sent and unanswered is lost as any
        other (:class:`~vgpu.kube.http1.AnswerLost` unless it may be sent again)."""
        conn, answer = self._started(method, target, headers, body, timeout,
                                     deadline=deadline)
        try:
            conn.finish(answer)
        except BaseException as exc:
            _drop(conn, method, target, exc)
        if answer.complete and answer.keep_alive:
            self._give(conn)
        else:
            conn.close()
        return answer.parser.get_status_code(), b"".join(answer.body)

    def stream(self, method: str, target: str, headers: Mapping[str, str],
               timeout: http1.Timeout) -> http1.Stream:
        """Send a request and return its answer once the headers are in."""
        conn, answer = self._started(method, target, headers, b"", timeout)
        return http1.Stream(conn, answer)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
