"""What the certificate tests share: a fixed clock and the webhook Service's names."""

from __future__ import annotations

import datetime as dt

from cryptography import x509

from vgpu_certs import pki
from vgpu_certs.reconcile import Settings

NOW = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
NAMES = pki.dns_names("vgpu-webhook", "vgpu-system")
SETTINGS = Settings(NAMES, validity=365 * DAY, renew_before=30 * DAY)


def subjects(pem: bytes) -> list[x509.Name]:
    return [c.subject for c in x509.load_pem_x509_certificates(pem)] if pem else []


def subject(pem: bytes) -> x509.Name:
    return x509.load_pem_x509_certificate(pem).subject
