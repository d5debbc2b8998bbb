"""The plain-HTTP port every long-running component exposes: ``/metrics`` and probes.

The standard library's threading server is enough for a probe every few seconds and a
scrape every few more; it runs in its own threads and never touches a component's main
loop. Each component passes its registry and its checks (``/healthz``, ``/readyz``, ...),
so this is the one place that speaks HTTP for them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from vgpu import logs

_log = logs.get("vgpu.probes")

Check = Callable[[], tuple[bool, str]]
"""A probe: (healthy, text for the response body)."""


class ProbeServer:
    """Serves ``/metrics`` and each check's path on ``host:port`` (port 0: a free one)."""

    def __init__(self, registry: CollectorRegistry, checks: Mapping[str, Check], port: int,
                 host: str = "", name: str = "vgpu-http") -> None:
        self._httpd = ThreadingHTTPServer((host, port), _handler(registry, dict(checks)))
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self._name = name
        self._paths = ["/metrics", *checks]
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        name=self._name)
        self._thread.start()
        _log.info("serving", paths=self._paths, port=self.port)

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _handler(registry: CollectorRegistry,
             checks: dict[str, Check]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            check = checks.get(path)
            if path == "/metrics":
                self._send(200, CONTENT_TYPE_LATEST, generate_latest(registry))
            elif check is not None:
                ok, text = check()
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
            return  # probes every few seconds would drown the component's own logs

    return Handler
