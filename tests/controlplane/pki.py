"""The control plane's PKI: certificates, the files the apiserver reads, the admin kubeconfig.

Everything is generated with ``cryptography`` on each start, backdated a little and valid
for a week. ``make_ca`` and ``make_serving_cert`` also serve webhook servers under test.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.controlplane.daemons import KUBERNETES_SERVICE_IP

ADMIN_USER = "vgpu-e2e-admin"


@dataclass(frozen=True)
class KeyPair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org is not None:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _issue(
    subject: x509.Name,
    issuer: KeyPair | None,
    *,
    ca: bool = False,
    server_names: Sequence[str] = (),
    server_ips: Sequence[str] = (),
    client: bool = False,
) -> KeyPair:
    key = ec.generate_private_key(ec.SECP256R1())
    # Backdated a little: the apiserver and the client may see a clock a few
    # seconds apart from the one that signed.
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
    else:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server_names or server_ips:
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    signer = issuer.key if issuer else key
    return KeyPair(builder.sign(signer, hashes.SHA256()), key)


def make_ca(common_name: str) -> KeyPair:
    """A self-signed CA, e.g. for a webhook server under test."""
    return _issue(_name(common_name), None, ca=True)


def make_serving_cert(
    ca: KeyPair, common_name: str, *, names: Sequence[str] = (), ips: Sequence[str] = ()
) -> KeyPair:
    return _issue(_name(common_name), ca, server_names=names, server_ips=ips)


def make_client_cert(ca: KeyPair, user: str, group: str | None = None) -> KeyPair:
    """A client certificate; the apiserver reads CN as the user and O as the group."""
    return _issue(_name(user, group), ca, client=True)


def write_pki(wd: Path, extra_ips: Sequence[str] = ()) -> None:
    """The CA, the apiserver's serving certificate, the admin client certificate and the
    ServiceAccount signing key, written into ``wd`` (mode 600). ``extra_ips`` are more
    addresses the apiserver is reached at (a cluster's advertised address and Service IP)."""
    ca = make_ca("vgpu-e2e-ca")
    serving = make_serving_cert(
        ca,
        "kube-apiserver",
        names=[
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
        ips=["127.0.0.1", KUBERNETES_SERVICE_IP, *extra_ips],
    )
    admin = make_client_cert(ca, ADMIN_USER, "system:masters")
    sa_key = ec.generate_private_key(ec.SECP256R1())
    files: dict[str, bytes] = {
        "ca.crt": ca.cert_pem(),
        "ca.key": ca.key_pem(),
        "apiserver.crt": serving.cert_pem(),
        "apiserver.key": serving.key_pem(),
        "admin.crt": admin.cert_pem(),
        "admin.key": admin.key_pem(),
        "sa.key": sa_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        "sa.pub": sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    }
    for name, data in files.items():
        path = wd / name
        path.write_bytes(data)
        path.chmod(0o600)


def write_kubeconfig(path: Path, server: str, wd: Path) -> None:
    """An admin kubeconfig for ``server`` at ``path``, the certificates in ``wd`` inlined."""

    def b64(name: str) -> str:
        return base64.b64encode((wd / name).read_bytes()).decode()

    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "vgpu-e2e",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": b64("ca.crt"),
                },
            }
        ],
        "users": [
            {
                "name": ADMIN_USER,
                "user": {
                    "client-certificate-data": b64("admin.crt"),
                    "client-key-data": b64("admin.key"),
                },
            }
        ],
        "contexts": [
            {"name": "vgpu-e2e", "context": {"cluster": "vgpu-e2e", "user": ADMIN_USER}}
        ],
        "current-context": "vgpu-e2e",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
