"""``/healthz``, ``/readyz`` and ``/metrics`` on the scheduler's operations port."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from vgpu.probes import Check, ProbeServer
from vgpu.serving import PLAIN, Serving

__all__ = ["Check", "HealthServer"]


class HealthServer(ProbeServer):
    """Serves on ``host:port`` (port 0 picks a free one, see :attr:`port`)."""

    def __init__(self, registry: CollectorRegistry, healthz: Check, readyz: Check, port: int,
                 host: str = "", *, serving: Serving = PLAIN) -> None:
        super().__init__(registry, {"/healthz": healthz, "/readyz": readyz}, port, host,
                         name="vgpu-scheduler-http", serving=serving)
