"""``/healthz``, ``/readyz`` and ``/metrics`` on the scheduler's plain-HTTP port.

The standard library's threading server is enough for a probe every few seconds and a
scrape every few more; it runs in its own threads and never touches the scheduling loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from vgpu import logs

_log = logs.get("vgpu.scheduler.server")

Check = Callable[[], tuple[bool, str]]


class HealthServer:
    """Serves on ``host:port`` (port 0 picks a free one, see :attr:`port`)."""

    def __init__(self, registry: CollectorRegistry, healthz: Check, readyz: Check, port: int,
                 host: str = "") -> None:
        self._httpd = ThreadingHTTPServer((host, port), _handler(registry, healthz, readyz))
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        name="vgpu-scheduler-http")
        self._thread.start()
        _log.info("serving /healthz, /readyz and /metrics", port=self.port)

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _handler(registry: CollectorRegistry, healthz: Check,
             readyz: Check) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, CONTENT_TYPE_LATEST, generate_latest(registry))
            elif path in ("/healthz", "/readyz"):
                ok, text = (healthz if path == "/healthz" else readyz)()
                self._send(200 if ok else 503, "text/plain; charset=utf-8",
                           (text + "\n").encode())
            else:
                self._send(404, "text/plain; charset=utf-8", b"not found\n")

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # probes every few seconds would drown the scheduler's own logs

    return Handler
