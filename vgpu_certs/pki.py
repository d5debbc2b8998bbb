"""The webhook's certificates: what to issue, and when what exists must be replaced.

Pure functions over PEM bytes and a ``now``; no files, no cluster. Every run of
``vgpu certs`` asks :func:`plan` whether the stored material still serves the wanted DNS
names long enough, and only then issues a new CA and serving certificate.

The CA's private key is used once, to sign the serving certificate, and then dropped: it
is never stored, so nobody who can read the Secret (or the webhook's pod) can mint
certificates the API server would trust. Renewal therefore makes a new CA too, and the
webhook configuration's ``caBundle`` keeps the previous CA next to the new one until it
expires, so webhook replicas still serving the old certificate stay trusted while the
kubelet refreshes their mounted Secret.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Certificates are dated a little into the past: the API server's clock may trail ours.
BACKDATE = dt.timedelta(minutes=5)


def dns_names(service: str, namespace: str, extra: Sequence[str] = ()) -> tuple[str, ...]:
    """The names a client may use for a Service: short, namespaced and fully qualified."""
    names = [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
             f"{service}.{namespace}.svc.cluster.local", *extra]
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class Material:
    """What the Secret holds (PEM): the CA certificate and the serving pair."""

    ca_crt: bytes
    tls_crt: bytes
    tls_key: bytes


@dataclass(frozen=True)
class Plan:
    """``renew`` is empty when the stored material is good; else why it is not."""

    renew: tuple[str, ...]

    @property
    def keep(self) -> bool:
        return not self.renew


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _usage(*, digital_signature: bool, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=cert_sign,
        crl_sign=cert_sign, encipher_only=False, decipher_only=False)


def issue(names: Sequence[str], now: dt.datetime, validity: dt.timedelta,
          ca_name: str = "vgpu-webhook-ca") -> Material:
    """A fresh CA (ECDSA P-256) and a serving certificate for ``names`` signed by it.

    The serving certificate's common name is its first DNS name; clients check only the
    subject alternative names.
    """
    if not names:
        raise ValueError("a serving certificate needs at least one DNS name")
    start = now - BACKDATE
    end = now + validity
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                               f"{ca_name}@{int(now.timestamp())}")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (x509.CertificateBuilder()
          .subject_name(ca_subject).issuer_name(ca_subject)
          .public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(_usage(digital_signature=True, cert_sign=True), critical=True)
          .add_extension(ca_ski, critical=False)
          .sign(ca_key, hashes.SHA256()))

    key = ec.generate_private_key(ec.SECP256R1())
    serving = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
               .issuer_name(ca_subject)
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(_usage(digital_signature=True, cert_sign=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                              critical=False)
               .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                              critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(
                   ca_ski), critical=False)
               .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return Material(ca.public_bytes(pem), serving.public_bytes(pem), _key_pem(key))


def _expires_soon(cert: x509.Certificate, now: dt.datetime, renew_before: dt.timedelta) -> bool:
    return cert.not_valid_after_utc - now < renew_before


def plan(current: Material | None, names: Sequence[str], now: dt.datetime,
         renew_before: dt.timedelta) -> Plan:
    """Whether ``current`` must be replaced, and why.

    It must when anything is missing or unreadable, the serving certificate is not signed
    by the CA or does not belong to the key, its DNS names differ from ``names`` (as a
    set), it is not valid yet, or it or the CA expires within ``renew_before``.
    """
    if current is None:
        return Plan(("no certificate stored yet",))
    try:
        ca = x509.load_pem_x509_certificate(current.ca_crt)
        cert = x509.load_pem_x509_certificate(current.tls_crt)
        key = serialization.load_pem_private_key(current.tls_key, password=None)
    except (ValueError, TypeError) as exc:
        return Plan((f"stored material unreadable: {exc}",))
    reasons: list[str] = []
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        reasons.append("serving certificate not signed by the stored CA")
    pub = key.public_key()
    if pub.public_bytes(serialization.Encoding.DER,
                        serialization.PublicFormat.SubjectPublicKeyInfo) != \
            cert.public_key().public_bytes(serialization.Encoding.DER,
                                           serialization.PublicFormat.SubjectPublicKeyInfo):
        reasons.append("private key does not match the serving certificate")
    have = set(serving_names(cert))
    if have != set(names):
        reasons.append(f"DNS names changed: stored {sorted(have)}, wanted {sorted(set(names))}")
    if cert.not_valid_before_utc > now:
        reasons.append(f"serving certificate not valid before {cert.not_valid_before_utc}")
    for what, c in (("serving certificate", cert), ("CA", ca)):
        if _expires_soon(c, now, renew_before):
            reasons.append(f"{what} expires {c.not_valid_after_utc:%Y-%m-%d %H:%M} UTC, "
                           f"less than {renew_before.days} days away")
    return Plan(tuple(reasons))


def serving_names(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return [str(n) for n in san.value.get_values_for_type(x509.DNSName)]


def bundle(current: bytes, ca_crt: bytes, now: dt.datetime, in_use: bytes | None = None,
           limit: int = 4) -> bytes:
    """The ``caBundle`` to publish.

    ``ca_crt`` first; then ``in_use``, the CA of the certificate the webhook serves right
    now (during a rotation its replicas still serve it until they reload); then the other
    still-valid CAs of ``current``, newest first, up to ``limit`` in all. Unreadable and
    expired entries drop out. A bundle that already has this shape is returned unchanged,
    byte for byte, so a run with nothing to do writes nothing.
    """
    wanted = x509.load_pem_x509_certificate(ca_crt)
    old = _certs(current)
    rest = sorted((c for c in old if c.not_valid_after_utc > now),
                  key=lambda c: c.not_valid_before_utc, reverse=True)
    first = _certs(in_use) if in_use else []
    ordered = [wanted, *(c for c in first if c.not_valid_after_utc > now), *rest]
    unique = list(dict.fromkeys(ordered))[:limit]
    pem = serialization.Encoding.PEM
    out = b"".join(c.public_bytes(pem) for c in unique)
    return current if _certs(current) == unique else out


def _certs(pem: bytes) -> list[x509.Certificate]:
    if not pem.strip():
        return []
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        return []


def not_after(pem: bytes) -> dt.datetime:
    return x509.load_pem_x509_certificate(pem).not_valid_after_utc
