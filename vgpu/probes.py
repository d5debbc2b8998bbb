"""The operations port every long-running component exposes: ``/metrics`` and probes.

How it serves is a :class:`vgpu.serving.Serving`: HTTPS with ``/metrics`` for callers the
API server authenticates and authorizes (the probes stay open, as kube-scheduler's
``--authorization-always-allow-paths``), or plain HTTP on the loopback address. Either
way a connection is bounded: one request per connection, a deadline from accept to the
last byte (the TLS handshake included), and at most ``max_connections`` at once (more are
closed at once), so a slow or flooding client costs a thread for ``timeout`` seconds at
most and cannot starve the kubelet's probes for longer.

The standard library's threading server is enough for a probe every few seconds and a
scrape every few more; it runs in its own threads and never touches a component's main
loop. Each component passes its registry and its checks (``/healthz``, ``/readyz``, ...),
so this is the one place that speaks HTTP for them.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from vgpu import logs
from vgpu.serving import LOOPBACK, PLAIN, Serving

_log = logs.get("vgpu.probes")

Check = Callable[[], tuple[bool, str]]
"""A probe: (healthy, text for the response body)."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 serving: Serving) -> None:
        self.serving = serving
        self._slots = threading.BoundedSemaphore(serving.max_connections)
        self.refused = 0
        if not address[0] and socket.has_dualstack_ipv6():
            self.address_family = socket.AF_INET6
            super().__init__(address, handler, bind_and_activate=False)
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            self.server_bind()
            self.server_activate()
        else:
            super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client gone or too slow: its own business, not a traceback on stderr.
        _log.debug("connection ended early", peer=str(client_address))

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            # Full: closed at once, so a flood holds no thread and no memory.
            self.refused += 1
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        # A deadline for the whole connection: per-read timeouts alone let a client that
        # sends a byte at a time keep its thread for ever. The TLS socket takes over the
        # raw one's descriptor, so the timer cuts whichever is current.
        current = [request]
        timer = threading.Timer(self.serving.timeout, lambda: _cut(current[0]))
        timer.daemon = True
        timer.start()
        try:
            request.settimeout(self.serving.timeout)
            if self.serving.tls is not None:
                request = current[0] = self.serving.tls.wrap_socket(
                    request, server_side=True, do_handshake_on_connect=False)
                request.do_handshake()
            super().process_request_thread(request, client_address)
        except (OSError, ValueError):
            self.shutdown_request(request)  # a failed handshake, a cut connection
        finally:
            timer.cancel()
            self._slots.release()


def _cut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class ProbeServer:
    """Serves ``/metrics`` and each check's path on ``host:port`` (port 0: a free one).

    Plain serving binds the loopback address whatever ``host`` says."""

    def __init__(self, registry: CollectorRegistry, checks: Mapping[str, Check], port: int,
                 host: str = "", name: str = "vgpu-http", *, serving: Serving = PLAIN,
                 before_scrape: Callable[[], None] | None = None) -> None:
        host = LOOPBACK if serving.plain else host
        handler = _handler(registry, dict(checks), serving, before_scrape)
        self._httpd = _Server((host, port), handler, serving)
        self.port = int(self._httpd.server_address[1])
        self.secure = not serving.plain
        self._name = name
        self._paths = ["/metrics", *checks]
        self._thread: threading.Thread | None = None

    @property
    def refused(self) -> int:
        """Connections closed unserved because ``max_connections`` were open."""
        return self._httpd.refused

    def start(self) -> None:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        name=self._name)
        self._thread.start()
        _log.info("serving", paths=self._paths, port=self.port,
                  scheme="https" if self.secure else "http (loopback)")

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _handler(registry: CollectorRegistry, checks: dict[str, Check], serving: Serving,
             before_scrape: Callable[[], None] | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            check = checks.get(path)
            if check is not None:
                # Probes are never asked about: the kubelet sends no token.
                ok, text = check()
                self._send(200 if ok else 503, (text + "\n").encode())
            elif path == "/metrics":
                self._metrics(path)
            else:
                self._send(404, b"not found\n")

        def _only_get(self) -> None:
            self.send_response(405)
            self.send_header("Allow", "GET")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_PUT = do_PATCH = do_DELETE = _only_get

        def _metrics(self, path: str) -> None:
            if serving.guard is not None:
                decision = serving.guard.decide(self.headers.get("Authorization"), path)
                if not decision.allowed:
                    self._send(decision.status, (decision.reason + "\n").encode())
                    return
            if before_scrape is not None:
                before_scrape()
            self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)

        def _send(self, status: int, body: bytes,
                  content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # probes every few seconds would drown the component's own logs

    return Handler
