"""How every component serves its operations port (``/metrics``, ``/healthz``,
``/readyz``): :mod:`vgpu.serving`. Each component's port is its own section's
``metricsPort``."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.config.knobs import knob as _knob


@dataclass(frozen=True)
class MetricsServerConfig:
    insecure: bool = _knob(
        False, "plain HTTP on 127.0.0.1 only, with no authentication (development); false = "
        "HTTPS on every address, /metrics for callers the API server authenticates "
        "(TokenReview) and authorizes (SubjectAccessReview: get on the path), as "
        "kube-scheduler's secure port; the probes stay open")
    cert_file: str = _knob(
        "", "PEM certificate (chain) of the HTTPS port; empty = a self-signed one made at "
        "start")
    key_file: str = _knob("", "PEM private key of certFile")
    max_connections: int = _knob(
        64, "connections served at once; more are closed at once", lo=1, hi=10000)
    request_timeout_seconds: float = _knob(
        10.0, "how long one connection may take, handshake to answer; then it is closed",
        lo=0.1, hi=600)
    auth_cache_seconds: float = _knob(
        10.0, "how long an answer of the API server about a token or an access is reused "
        "(kube-scheduler's delegated authentication and authorization: 10 s)", lo=0, hi=3600)
