"""A stand-in for the one kube-state-metrics series the dashboards read,
``kube_resourcequota``.

kube-state-metrics exports, for every ResourceQuota and every resource it names, the hard
limit and what is used: ``kube_resourcequota{namespace, resourcequota, resource, type}``
with ``type`` ``hard`` or ``used`` and the quantity as a number. This serves exactly that,
read from the cluster at each scrape, so that the e2e Prometheus test evaluates the quota
row against series of the shape it meets in a cluster; nothing else of kube-state-metrics
is imitated.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from vgpu import meta
from vgpu.cluster.port import ClusterPort
from vgpu.errors import QuantityError
from vgpu.quantity import parse_quantity


def render(quotas: list[Mapping[str, Any]]) -> str:
    lines = ["# HELP kube_resourcequota Information about resource quota.",
             "# TYPE kube_resourcequota gauge"]
    for quota in quotas:
        status = meta.mapping(quota.get("status"))
        for kind in ("hard", "used"):
            for resource, value in sorted(meta.mapping(status.get(kind)).items()):
                try:
                    number = float(parse_quantity(value))
                except QuantityError:
                    continue
                labels = (f'namespace="{meta.namespace(quota)}",resourcequota='
                          f'"{meta.name(quota)}",resource="{resource}",type="{kind}"')
                lines.append(f"kube_resourcequota{{{labels}}} {number}")
    return "\n".join(lines) + "\n"


class QuotaExporter:
    """``/metrics`` on a free loopback port while in its ``with`` block."""

    def __init__(self, cluster: ClusterPort) -> None:
        self.cluster = cluster
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = render(exporter.cluster.list("resourcequotas").items).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> QuotaExporter:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
