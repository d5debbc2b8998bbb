"""A TCP proxy between kube-apiserver and etcd that delays every byte, both ways, by
:attr:`EtcdDelay.delay` seconds (changed at any time; 0: none): a slow etcd as the API
server sees it (a slow disk or a slow network to it), for ``bench/write_bound.py``.

Order is kept per direction: a chunk read at ``t`` leaves at ``t + delay`` or after the
chunk before it, whichever is later. Stays below etcd's gRPC keepalive timeout (the API
server's client pings every 30 s and gives up after 10 s), or the connection is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable


class EtcdDelay:
    """Listen on 127.0.0.1 (:attr:`port`); connect each client to ``upstream()``'s
    ``host:port``, asked when the client connects (etcd's port is known only then)."""

    def __init__(self, upstream: Callable[[], str]) -> None:
        self.delay = 0.0
        self._upstream = upstream
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="etcd-delay")
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result(10)
        self.port: int = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, _, port = self._upstream().removeprefix("http://").rpartition(":")
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer),
                             return_exceptions=True)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    break
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(send())
        try:
            while data := await reader.read(65536):
                queue.put_nowait((time.monotonic() + self.delay, data))
        finally:
            queue.put_nowait((0.0, b""))
            with contextlib.suppress(Exception):
                await sender
            writer.close()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
