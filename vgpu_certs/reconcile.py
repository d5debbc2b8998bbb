"""One run of ``vgpu certs``: bring the Secret and the webhook's ``caBundle`` in line.

Idempotent: with nothing to renew and the bundle already right it writes nothing at all.
On a renewal the new CA is published in the ``caBundle`` (next to the one in use) before
the Secret changes, so the API server trusts the webhook's replicas before, during and
after they reload the new certificate.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from vgpu import logs
from vgpu.errors import ConflictError, NotFoundError
from vgpu_certs import pki
from vgpu_certs.store import (
    CA_CRT,
    KEYS,
    TLS_CRT,
    TLS_KEY,
    SecretStore,
    WebhookBundle,
    WebhookStore,
)

log = logs.get("certs")


@dataclass(frozen=True)
class Settings:
    names: tuple[str, ...]
    validity: dt.timedelta = dt.timedelta(days=365)
    renew_before: dt.timedelta = dt.timedelta(days=30)


@dataclass(frozen=True)
class Outcome:
    renewed: tuple[str, ...]            # why the material was reissued; empty: kept
    secret_written: bool
    webhooks_patched: tuple[str, ...]
    not_after: dt.datetime
    webhook_missing: bool = False

    @property
    def changed(self) -> bool:
        return self.secret_written or bool(self.webhooks_patched)


def _from_secret(data: dict[str, bytes] | None) -> pki.Material | None:
    if data is None or any(k not in data for k in KEYS):
        return None
    return pki.Material(data[CA_CRT], data[TLS_CRT], data[TLS_KEY])


def reconcile(secrets: SecretStore, webhooks: WebhookStore | None, settings: Settings,
              now: dt.datetime) -> Outcome:
    """One pass; raises ``ConflictError`` when another writer got in between (run again)."""
    stored = secrets.read()
    current = _from_secret(dict(stored.data)) if stored else None
    plan = pki.plan(current, settings.names, now, settings.renew_before)
    material = current if plan.keep and current is not None else pki.issue(
        settings.names, now, settings.validity)
    if not plan.keep:
        log.info("renewing webhook certificate", reasons=list(plan.renew))
    in_use = current.ca_crt if current is not None else None

    patched: tuple[str, ...] = ()
    missing = False
    if webhooks is not None:
        try:
            entries = webhooks.read()
        except NotFoundError:
            missing = True
        else:
            changes = _bundle_changes(entries, material.ca_crt, in_use, now)
            if changes:
                webhooks.write(changes)
                patched = tuple(w.name for _, w in changes)
                log.info("published CA bundle", webhooks=list(patched))

    written = False
    if not plan.keep:
        secrets.write({CA_CRT: material.ca_crt, TLS_CRT: material.tls_crt,
                       TLS_KEY: material.tls_key},
                      stored.resource_version if stored else None)
        written = True
    return Outcome(plan.renew, written, patched, pki.not_after(material.tls_crt), missing)


def _bundle_changes(entries: Sequence[WebhookBundle], ca_crt: bytes, in_use: bytes | None,
                    now: dt.datetime) -> list[tuple[int, WebhookBundle]]:
    changes = []
    for i, entry in enumerate(entries):
        wanted = pki.bundle(entry.ca_bundle, ca_crt, now, in_use=in_use)
        if wanted != entry.ca_bundle:
            changes.append((i, WebhookBundle(entry.name, wanted)))
    return changes


def reconcile_retrying(secrets: SecretStore, webhooks: WebhookStore | None,
                       settings: Settings, now: dt.datetime, attempts: int = 3) -> Outcome:
    """:func:`reconcile`, run again when a concurrent writer (a second Job pod, a person
    running it by hand) caused a conflict: the next pass sees what that writer stored."""
    for attempt in range(1, attempts + 1):
        try:
            return reconcile(secrets, webhooks, settings, now)
        except ConflictError as exc:
            if attempt == attempts:
                raise
            log.info("conflict, retrying", error=str(exc), attempt=attempt)
    raise AssertionError("unreachable")  # pragma: no cover
