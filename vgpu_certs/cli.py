"""``vgpu certs``: create or renew the webhook's certificates.

In the cluster (the base's Job, or by hand with a kubeconfig) it keeps a
``kubernetes.io/tls`` Secret and the ``caBundle`` of the Mutating- and
ValidatingWebhookConfiguration (``/mutate`` and ``/validate`` of one server) in line;
with ``--out-dir`` it only writes ``ca.crt``, ``tls.crt`` and ``tls.key`` to a folder.
Running it again changes nothing until the certificate nears its end or the names change.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time

from vgpu.errors import ConfigError, NotFoundError
from vgpu_certs import pki
from vgpu_certs.reconcile import Outcome, Settings, reconcile_retrying
from vgpu_certs.store import DirStore, SecretStore, WebhookStore

#: The line `vgpu --help` shows; vgpu.cli reads it from this file without importing
#: the module, so it stays a plain one-line literal.
HELP = "create or renew the webhook's certificates"

DEFAULT_NAMESPACE = "vgpu-system"
DEFAULT_SERVICE = "vgpu-webhook"
DEFAULT_SECRET = "vgpu-webhook-tls"
DEFAULT_WEBHOOK_CONFIG = "vgpu-webhook"
_CONFIGS = "mutating and validating webhook configurations"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE", DEFAULT_NAMESPACE),
                        help="namespace of the webhook Service and the Secret "
                        f"(default: $POD_NAMESPACE, else {DEFAULT_NAMESPACE})")
    parser.add_argument("--service", default=DEFAULT_SERVICE,
                        help=f"the webhook Service, whose DNS names the certificate carries "
                        f"(default {DEFAULT_SERVICE})")
    parser.add_argument("--dns-name", action="append", default=[], metavar="NAME",
                        help="an extra DNS name for the certificate (repeatable)")
    parser.add_argument("--secret", default=DEFAULT_SECRET,
                        help=f"the kubernetes.io/tls Secret to keep (default {DEFAULT_SECRET})")
    parser.add_argument("--webhook-config", default=DEFAULT_WEBHOOK_CONFIG, metavar="NAME",
                        help="the Mutating- and ValidatingWebhookConfiguration (one name) "
                        "whose caBundles to patch; "
                        f"empty: none (default {DEFAULT_WEBHOOK_CONFIG})")
    parser.add_argument("--validity-days", type=int, default=365,
                        help="lifetime of a new certificate (default 365)")
    parser.add_argument("--renew-before-days", type=int, default=30,
                        help="renew when less than this many days are left (default 30)")
    parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                        help="how long to wait for the webhook configuration to exist "
                        "(it may be created in the same apply as the Job; default 0)")
    parser.add_argument("--out-dir", default=None, metavar="DIR",
                        help="only write ca.crt, tls.crt and tls.key into DIR; no cluster")


def settings_of(args: argparse.Namespace) -> Settings:
    if args.validity_days < 1:
        raise ConfigError(f"--validity-days: {args.validity_days} must be at least 1")
    if not 0 <= args.renew_before_days < args.validity_days:
        raise ConfigError(f"--renew-before-days: {args.renew_before_days} must be at least 0 "
                          f"and below --validity-days ({args.validity_days}), or every run "
                          f"would renew")
    return Settings(names=pki.dns_names(args.service, args.namespace, args.dns_name),
                    validity=dt.timedelta(days=args.validity_days),
                    renew_before=dt.timedelta(days=args.renew_before_days))


def run(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    secrets: SecretStore
    webhooks: WebhookStore | None = None
    if args.out_dir:
        secrets = DirStore(args.out_dir)
        where = args.out_dir
    else:
        from vgpu.kube.adapter import connect  # noqa: PLC0415
        from vgpu_certs.cluster import (  # noqa: PLC0415 (only for a cluster)
            ClusterSecretStore,
            WebhookConfigurations,
        )

        cluster = connect(args.kubeconfig)
        if cluster is None:
            raise ConfigError("no cluster configuration")
        secrets = ClusterSecretStore(cluster, args.namespace, args.secret)
        where = f"secret {args.namespace}/{args.secret}"
        if args.webhook_config:
            webhooks = WebhookConfigurations(cluster, args.webhook_config)
    deadline = time.monotonic() + args.wait
    while True:
        outcome = reconcile_retrying(secrets, webhooks, settings, dt.datetime.now(dt.UTC))
        report(outcome, where, args.webhook_config if webhooks else None)
        if not outcome.webhook_missing:
            return 0
        if time.monotonic() >= deadline:
            raise NotFoundError(f"{_CONFIGS} {args.webhook_config}: not found; their caBundle "
                                f"was not set (apply manifests/base, or pass "
                                f"--webhook-config '' to skip them)")
        time.sleep(2.0)


def report(outcome: Outcome, where: str, webhook_config: str | None) -> None:
    until = f"valid until {outcome.not_after:%Y-%m-%d %H:%M} UTC"
    if outcome.secret_written:
        print(f"{where}: issued a new certificate ({'; '.join(outcome.renewed)}), {until}")
    else:
        print(f"{where}: unchanged, {until}")
    if webhook_config is None:
        return
    if outcome.webhook_missing:
        print(f"{_CONFIGS} {webhook_config}: not found yet")
    elif outcome.webhooks_patched:
        print(f"{_CONFIGS} {webhook_config}: caBundle updated for "
              f"{', '.join(outcome.webhooks_patched)}")
    else:
        print(f"{_CONFIGS} {webhook_config}: caBundle unchanged")
