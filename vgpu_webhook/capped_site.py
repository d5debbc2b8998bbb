"""The admission listener's bounds: at most ``max_connections`` open connections (more are
closed as they arrive) and a TLS handshake that must end within ``timeout``.

A connection that never completes a request is closed by the request handler's keep-alive
timer (aiohttp arms it at connection, and it fires while a request's headers are still
being read: ``webhook.idleTimeoutSeconds``); a request body read and answered slower than
the deadline is ended by the server (:class:`vgpu_webhook.admission_server.WebhookServer`).
So a flood costs no more than the cap, and a slow client no longer than the deadline.
"""

from __future__ import annotations

import asyncio
import socket
import ssl

from aiohttp import web


class _Refused(asyncio.Protocol):
    """A connection over the cap: closed as soon as it is made."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class CappedSite(web.SockSite):
    __slots__ = ("_cap", "_handshake", "refused")

    def __init__(self, runner: web.BaseRunner, sock: socket.socket, *,
                 ssl_context: ssl.SSLContext | None, backlog: int, max_connections: int,
                 handshake_timeout: float) -> None:
        super().__init__(runner, sock, ssl_context=ssl_context, backlog=backlog)
        self._cap = max_connections
        self._handshake = handshake_timeout
        self.refused = 0

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None

        def protocol() -> asyncio.BaseProtocol:
            if len(server.connections) >= self._cap:
                self.refused += 1
                return _Refused()
            return server()

        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            protocol, sock=self._sock, ssl=self._ssl_context, backlog=self._backlog,
            ssl_handshake_timeout=self._handshake if self._ssl_context else None)
