from __future__ import annotations

import datetime as dt
import os
import socket
import ssl
import stat
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.ops.certs_support import DAY, NAMES, NOW, SETTINGS, subject, subjects
from vgpu import cli
from vgpu.errors import ConflictError, NotFoundError
from vgpu_certs import pki
from vgpu_certs.reconcile import Settings, reconcile, reconcile_retrying
from vgpu_certs.store import DirStore, StoredSecret, WebhookBundle


class MemorySecrets:
    def __init__(self) -> None:
        self.secret: StoredSecret | None = None
        self.writes = 0
        self.conflicts = 0

    def read(self) -> StoredSecret | None:
        return self.secret

    def write(self, data: Mapping[str, bytes], resource_version: str | None) -> None:
        if self.conflicts:
            self.conflicts -= 1
            raise ConflictError("someone else wrote first")
        current = self.secret.resource_version if self.secret else None
        if resource_version != current:
            raise ConflictError(f"stale {resource_version} != {current}")
        self.writes += 1
        self.secret = StoredSecret(dict(data), str(self.writes))


class MemoryWebhooks:
    def __init__(self, names: Sequence[str] = ("mutate.vgpu.io",), exists: bool = True) -> None:
        self.webhooks = [WebhookBundle(n, b"") for n in names]
        self.exists = exists
        self.writes = 0

    def read(self) -> Sequence[WebhookBundle]:
        if not self.exists:
            raise NotFoundError("mutatingwebhookconfiguration vgpu-webhook not found")
        return list(self.webhooks)

    def write(self, changes: Sequence[tuple[int, WebhookBundle]]) -> None:
        for i, w in changes:
            assert self.webhooks[i].name == w.name
            self.webhooks[i] = w
        self.writes += 1


# --- pki ---------------------------------------------------------------------------------

def test_dns_names_of_a_service() -> None:
    assert NAMES == ("vgpu-webhook", "vgpu-webhook.vgpu-system", "vgpu-webhook.vgpu-system.svc",
                     "vgpu-webhook.vgpu-system.svc.cluster.local")
    assert pki.dns_names("s", "n", ["s", "x.example"])[-1] == "x.example"


def test_issue_makes_a_p256_ca_and_a_serving_certificate() -> None:
    m = pki.issue(NAMES, NOW, 365 * DAY)
    ca = x509.load_pem_x509_certificate(m.ca_crt)
    cert = x509.load_pem_x509_certificate(m.tls_crt)
    cert.verify_directly_issued_by(ca)
    for c in (ca, cert):
        key = c.public_key()
        assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
        assert c.not_valid_before_utc == NOW - pki.BACKDATE
        assert c.not_valid_after_utc == NOW + 365 * DAY
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert pki.serving_names(cert) == list(NAMES)
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert b"PRIVATE KEY" in m.tls_key and b"PRIVATE KEY" not in m.ca_crt + m.tls_crt


def test_issue_needs_a_name() -> None:
    with pytest.raises(ValueError, match="DNS name"):
        pki.issue((), NOW, DAY)


FRESH = pki.issue(NAMES, NOW, 365 * DAY)
OTHER = pki.issue(NAMES, NOW, 365 * DAY)
SHORT_CA = pki.issue(NAMES, NOW, 20 * DAY)


@pytest.mark.parametrize(("material", "names", "now", "reason"), [
    (FRESH, NAMES, NOW, None),
    (FRESH, tuple(reversed(NAMES)), NOW, None),                   # order does not matter
    (FRESH, NAMES, NOW + 334 * DAY, None),                         # 31 days left
    (None, NAMES, NOW, "no certificate stored yet"),
    (FRESH, NAMES, NOW + 336 * DAY, "serving certificate expires"),
    (FRESH, NAMES, NOW + 400 * DAY, "serving certificate expires"),
    (FRESH, (*NAMES, "extra.example"), NOW, "DNS names changed"),
    (FRESH, NAMES[:2], NOW, "DNS names changed"),
    (pki.Material(OTHER.ca_crt, FRESH.tls_crt, FRESH.tls_key), NAMES, NOW, "not signed"),
    (pki.Material(FRESH.ca_crt, FRESH.tls_crt, OTHER.tls_key), NAMES, NOW, "does not match"),
    (pki.Material(b"garbage", FRESH.tls_crt, FRESH.tls_key), NAMES, NOW, "unreadable"),
    (pki.Material(FRESH.ca_crt, FRESH.tls_crt, b""), NAMES, NOW, "unreadable"),
    (FRESH, NAMES, NOW - DAY, "not valid before"),
    (SHORT_CA, NAMES, NOW, "CA expires"),
])
def test_plan(material: pki.Material | None, names: tuple[str, ...], now: dt.datetime,
              reason: str | None) -> None:
    plan = pki.plan(material, names, now, 30 * DAY)
    if reason is None:
        assert plan.keep, plan.renew
    else:
        assert not plan.keep and any(reason in r for r in plan.renew), plan.renew


def test_bundle_of_a_fresh_configuration_is_the_ca() -> None:
    assert pki.bundle(b"", FRESH.ca_crt, NOW) == FRESH.ca_crt
    assert pki.bundle(FRESH.ca_crt, FRESH.ca_crt, NOW) == FRESH.ca_crt


def test_rotation_keeps_the_ca_in_use_and_is_then_stable() -> None:
    rotated = pki.bundle(FRESH.ca_crt, OTHER.ca_crt, NOW, in_use=FRESH.ca_crt)
    assert subjects(rotated) == [subject(OTHER.ca_crt), subject(FRESH.ca_crt)]
    # The next run (the new CA now in use) leaves it byte for byte.
    assert pki.bundle(rotated, OTHER.ca_crt, NOW, in_use=OTHER.ca_crt) is rotated
    # Once the old CA expired it drops out.
    later = NOW + 366 * DAY
    newer = pki.issue(NAMES, later, 365 * DAY)
    assert subjects(pki.bundle(rotated, newer.ca_crt, later)) == [subject(newer.ca_crt)]


def test_bundle_drops_garbage_and_is_bounded() -> None:
    assert pki.bundle(b"not pem", FRESH.ca_crt, NOW) == FRESH.ca_crt
    many = b"".join(pki.issue(NAMES, NOW + i * DAY, 365 * DAY).ca_crt for i in range(6))
    assert len(subjects(pki.bundle(many, FRESH.ca_crt, NOW + 10 * DAY, limit=4))) == 4


# --- reconcile ---------------------------------------------------------------------------

def test_first_run_creates_then_nothing_changes() -> None:
    secrets, hooks = MemorySecrets(), MemoryWebhooks(("a.vgpu.io", "b.vgpu.io"))
    first = reconcile(secrets, hooks, SETTINGS, NOW)
    assert first.secret_written and first.webhooks_patched == ("a.vgpu.io", "b.vgpu.io")
    assert secrets.secret is not None
    ca = secrets.secret.data["ca.crt"]
    assert [w.ca_bundle for w in hooks.webhooks] == [ca, ca]
    for later in (NOW, NOW + DAY, NOW + 300 * DAY):
        again = reconcile(secrets, hooks, SETTINGS, later)
        assert not again.changed and not again.renewed
    assert (secrets.writes, hooks.writes, secrets.secret.resource_version) == (1, 1, "1")


def test_expiring_certificate_is_renewed_and_old_ca_stays_trusted() -> None:
    secrets, hooks = MemorySecrets(), MemoryWebhooks()
    reconcile(secrets, hooks, SETTINGS, NOW)
    assert secrets.secret is not None
    old = secrets.secret.data
    soon = NOW + 340 * DAY
    renewed = reconcile(secrets, hooks, SETTINGS, soon)
    assert renewed.secret_written and "expires" in renewed.renewed[0]
    new = secrets.secret.data
    assert new["ca.crt"] != old["ca.crt"] and new["tls.key"] != old["tls.key"]
    assert subjects(hooks.webhooks[0].ca_bundle) == [subject(new["ca.crt"]),
                                                      subject(old["ca.crt"])]
    assert renewed.not_after == soon + 365 * DAY
    assert not reconcile(secrets, hooks, SETTINGS, soon).changed


def test_changed_names_renew() -> None:
    secrets, hooks = MemorySecrets(), MemoryWebhooks()
    reconcile(secrets, hooks, SETTINGS, NOW)
    more = Settings((*NAMES, "webhook.example"), SETTINGS.validity, SETTINGS.renew_before)
    outcome = reconcile(secrets, hooks, more, NOW)
    assert outcome.secret_written and "DNS names changed" in outcome.renewed[0]
    assert secrets.secret is not None
    cert = x509.load_pem_x509_certificate(secrets.secret.data["tls.crt"])
    assert "webhook.example" in pki.serving_names(cert)


def test_missing_webhook_configuration_still_writes_the_secret() -> None:
    secrets, hooks = MemorySecrets(), MemoryWebhooks(exists=False)
    outcome = reconcile(secrets, hooks, SETTINGS, NOW)
    assert outcome.secret_written and outcome.webhook_missing
    hooks.exists = True
    after = reconcile(secrets, hooks, SETTINGS, NOW)
    assert not after.secret_written and after.webhooks_patched == ("mutate.vgpu.io",)


def test_a_conflict_is_retried_and_a_persistent_one_raised() -> None:
    secrets = MemorySecrets()
    secrets.conflicts = 1
    assert reconcile_retrying(secrets, None, SETTINGS, NOW).secret_written
    secrets = MemorySecrets()
    secrets.conflicts = 5
    with pytest.raises(ConflictError):
        reconcile_retrying(secrets, None, SETTINGS, NOW, attempts=3)


def test_an_incomplete_secret_is_reissued() -> None:
    secrets = MemorySecrets()
    secrets.secret = StoredSecret({"ca.crt": FRESH.ca_crt}, "0")
    secrets.writes = 0
    assert reconcile(secrets, None, SETTINGS, NOW).renewed == ("no certificate stored yet",)


# --- the material works for TLS ----------------------------------------------------------

def test_a_client_trusting_the_bundle_accepts_the_webhook(tmp_path: Path) -> None:
    secrets, hooks = MemorySecrets(), MemoryWebhooks()
    now = dt.datetime.now(dt.UTC)
    reconcile(secrets, hooks, SETTINGS, now)
    assert secrets.secret is not None
    DirStore(tmp_path).write(secrets.secret.data, None)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client_ctx = ssl.create_default_context(cadata=hooks.webhooks[0].ca_bundle.decode())

    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)
        port = listener.getsockname()[1]

        def serve() -> None:
            for _ in range(2):
                conn, _ = listener.accept()
                try:
                    with server_ctx.wrap_socket(conn, server_side=True) as tls:
                        tls.sendall(b"ok")
                except (ssl.SSLError, OSError):
                    conn.close()  # the client refused our certificate

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        for host, ok in (("vgpu-webhook.vgpu-system.svc", True), ("elsewhere.example", False)):
            raw = socket.create_connection(("127.0.0.1", port), timeout=10)
            if ok:
                with client_ctx.wrap_socket(raw, server_hostname=host) as tls:
                    assert tls.recv(2) == b"ok"
            else:
                with pytest.raises(ssl.SSLCertVerificationError):
                    client_ctx.wrap_socket(raw, server_hostname=host)
                raw.close()
        thread.join(10)


# --- the command in --out-dir mode ------------------------------------------------------

def test_out_dir_writes_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "certs"
    assert cli.main(["certs", "--out-dir", str(out), "--namespace", "ns"]) == 0
    assert "issued a new certificate" in capsys.readouterr().out
    assert stat.S_IMODE(os.stat(out / "tls.key").st_mode) == 0o600
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}
    assert sorted(before) == ["ca.crt", "tls.crt", "tls.key"]
    assert cli.main(["certs", "--out-dir", str(out), "--namespace", "ns"]) == 0
    assert "unchanged" in capsys.readouterr().out
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()} == before
    cert = x509.load_pem_x509_certificate(before["tls.crt"][0])
    assert "vgpu-webhook.ns.svc" in pki.serving_names(cert)
    # A new name renews.
    assert cli.main(["certs", "--out-dir", str(out), "--namespace", "ns",
                     "--dns-name", "localhost"]) == 0
    assert "DNS names changed" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "message"), [
    (["--validity-days", "0"], "--validity-days"),
    (["--renew-before-days", "400"], "--renew-before-days"),
    (["--renew-before-days", "-1"], "--renew-before-days"),
])
def test_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                       message: str) -> None:
    assert cli.main(["certs", "--out-dir", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_unwritable_out_dir_is_a_clear_error(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert cli.main(["certs", "--out-dir", str(blocker / "sub")]) == 2
    err = capsys.readouterr().err
    assert "Not a directory" in err and "Traceback" not in err
