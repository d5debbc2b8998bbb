"""The validating webhook in ``bench/bind.py``'s cluster, registered as the manifests do.

``vgpu webhook`` runs as a process with a fresh certificate, and the ValidatingWebhookConfiguration
of ``manifests/webhook`` is registered by URL with the k8s-1.20 overlay's forms (the test
control plane is 1.20.2: no ``matchConditions``, so every pod CREATE and UPDATE outside
kube-system and vgpu-system reaches ``/validate``; ``failurePolicy: Ignore``). The agents'
stand-in is the one writer of vgpu's annotations (``webhook.annotationWriters``: the
admin user it runs as); the pods are created as a tenant (impersonated, with a Role to
create pods), so each creation is looked at, as a team's would be.
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from _support import ROOT, free_port

from tests.controlplane.pki import ADMIN_USER
from tests.webhook import certs
from vgpu.kube.adapter import KubeCluster

MANIFEST = ROOT / "manifests" / "webhook" / "validatingwebhookconfiguration.yaml"
OVERLAY = ROOT / "manifests" / "overlays" / "k8s-1.20" / "validating-fail-open.yaml"
API = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
TENANT = "bench-tenant"


def registration(port: int, ca_pem: bytes) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    # /validate only: /node-scope checks the node agents' own tokens, and the agents'
    # stand-in writes as the admin (tests/e2e/harness_webhook.py leaves it out too).
    index = next(i for i, h in enumerate(doc["webhooks"]) if h["name"] == "validate.vgpu.io")
    hook = doc["webhooks"][index]
    doc["webhooks"] = [hook]
    for op in yaml.safe_load(OVERLAY.read_text()):  # the overlay's JSON patch, by hand
        _, _, at, field = op["path"].split("/")
        if int(at) != index:
            continue
        if op["op"] == "remove":
            hook.pop(field)
        else:
            hook[field] = op["value"]
    hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}/validate",
                            "caBundle": base64.b64encode(ca_pem).decode()}
    return doc


@contextlib.contextmanager
def validating_webhook(kube: KubeCluster, kubeconfig: str, workdir: Path,
                       scheduler_name: str) -> Iterator[int]:
    """Serve and register the validating webhook; yields the webhook's pid."""
    ca = certs.authority()
    ca_file = ca.write(workdir / "webhook-ca.crt")
    certs.serving(ca, workdir / "webhook.crt", workdir / "webhook.key")
    config = workdir / "webhook-config.yaml"
    config.write_text(yaml.safe_dump({"schedulerName": scheduler_name,
                                      "webhook": {"annotationWriters": [ADMIN_USER]}}))
    port, metrics = free_port(), free_port()
    log = (workdir / "webhook.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vgpu.cli", "webhook", "--cert-file", str(workdir / "webhook.crt"),
         "--key-file", str(workdir / "webhook.key"), "--port", str(port), "--metrics-port",
         str(metrics), "--address", "127.0.0.1", "--kubeconfig", kubeconfig,
         "--config", str(config)], cwd=ROOT, stdout=log, stderr=log,
        env={**os.environ, "VGPU_LOG_LEVEL": "warning",
             "VGPU_METRICS_SERVER__INSECURE": "true"})
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the webhook exited:\n{(workdir / 'webhook.log').read_text()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(
                    f"http://127.0.0.1:{metrics}/readyz", timeout=2):
                break
            if time.monotonic() > deadline:
                raise SystemExit("the webhook did not become ready")
            time.sleep(0.1)
        body = registration(port, ca_file.read_bytes())
        name = body["metadata"]["name"]
        with contextlib.suppress(Exception):  # one left by an interrupted run
            kube.request_json("DELETE", f"{API}/{name}", "delete webhook")
        kube.request_json("POST", API, "register the webhook", body=body)
        try:
            yield proc.pid
        finally:
            kube.request_json("DELETE", f"{API}/{name}", "delete webhook")
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def tenant(kube: KubeCluster, namespace: str) -> None:
    """A Role to create pods in ``namespace`` for :data:`TENANT`, and ``kube`` acting as
    it (impersonation: the admin may)."""
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    kube.request_json("POST", f"{rbac}/roles", "create role", body={
        "metadata": {"name": "bench-pods"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]})
    kube.request_json("POST", f"{rbac}/rolebindings", "create rolebinding", body={
        "metadata": {"name": "bench-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "bench-pods"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": TENANT}]})
    api = getattr(kube.transport, "api", None)
    if api is None:
        raise SystemExit("the creating client must use a kubeconfig to act as the tenant")
    api.set_default_header("Impersonate-User", TENANT)
