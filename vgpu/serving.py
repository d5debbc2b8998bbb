"""How a component serves its operations port (``/metrics`` and the probes): HTTPS with
delegated authentication and authorization, as kube-scheduler's secure port, or plain
HTTP on the loopback address for development (``metricsServer.insecure``).

HTTPS uses ``metricsServer.certFile``/``keyFile`` when given, else a self-signed
certificate made at start (kube-scheduler does the same without ``--tls-cert-file``: a
scraper then checks the bearer token's answer, not the certificate, or is given the
certificate files to trust). Every connection is bounded in time and in number
(:class:`vgpu.probes.ProbeServer`).
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import ssl
import tempfile
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from vgpu.config.metrics_section import MetricsServerConfig
from vgpu.errors import ConfigError
from vgpu.metrics_auth import DelegatedGuard, Guard, Refuse, Reviewer

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Serving:
    """TLS context and guard (both, or neither: plain HTTP on the loopback address)."""

    tls: ssl.SSLContext | None = None
    guard: Guard | None = None
    max_connections: int = 64
    #: Seconds a connection may take, from accept to the last byte of the answer.
    timeout: float = 10.0

    @property
    def plain(self) -> bool:
        return self.tls is None


#: Plain HTTP on the loopback address: tests, and ``metricsServer.insecure``.
PLAIN = Serving()


def serving(section: MetricsServerConfig, reviewer: Reviewer | None, *,
            name: str) -> Serving:
    """The serving the configuration asks for; ``reviewer`` None: no API server to ask,
    so nobody reads ``/metrics`` over HTTPS (the probes stay open)."""
    if section.insecure:
        return Serving(max_connections=section.max_connections,
                       timeout=section.request_timeout_seconds)
    if bool(section.cert_file) != bool(section.key_file):
        raise ConfigError("metricsServer.certFile and metricsServer.keyFile go together")
    context = (_from_files(section.cert_file, section.key_file) if section.cert_file
               else _self_signed(name))
    guard: Guard = DelegatedGuard(reviewer, ttl=section.auth_cache_seconds) \
        if reviewer is not None else Refuse(
            "no API server to authenticate the caller with: run with a cluster, or set "
            "metricsServer.insecure to read /metrics on the loopback address")
    return Serving(context, guard, section.max_connections, section.request_timeout_seconds)


def _context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _from_files(cert_file: str, key_file: str) -> ssl.SSLContext:
    context = _context()
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"metricsServer.certFile {cert_file} / keyFile {key_file}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    return context


def _self_signed(name: str) -> ssl.SSLContext:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}@{int(now.timestamp())}")])
    names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.DNSName(socket.gethostname())]
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    context = _context()
    # ssl loads a chain only from files: a private folder, removed at once.
    with tempfile.TemporaryDirectory(prefix="vgpu-tls-") as folder:
        cert_path, key_path = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
        with open(cert_path, "wb") as handle:
            handle.write(cert.public_bytes(serialization.Encoding.PEM))
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        context.load_cert_chain(cert_path, key_path)
    return context
