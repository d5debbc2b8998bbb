"""A stack's webhook registrations: the product's manifests, pointed at a local URL.

Each configuration of ``manifests/webhook`` (``/mutate`` and ``/validate``) is registered
by URL with the stack's CA, the system-namespace selector kept and one term added so that
only the stack's namespaces are sent; ``matchConditions`` is taken out (1.20 drops it).
``/node-scope`` is left out: it sees every Node and pod status write of the shared control
plane, which no stack may hold up (the install suite runs it on a cluster of its own).
"""

from __future__ import annotations

import base64
import contextlib
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.harness_pods import STACK_LABEL
from tests.e2e.harness_processes import ROOT
from vgpu.errors import ClusterError
from vgpu.kube.adapter import KubeCluster

WEBHOOK = ROOT / "manifests" / "webhook"
#: (resource, manifest, path served) of each configuration a stack registers.
CONFIGURATIONS = (
    ("mutatingwebhookconfigurations", WEBHOOK / "mutatingwebhookconfiguration.yaml",
     "/mutate"),
    ("validatingwebhookconfigurations", WEBHOOK / "validatingwebhookconfiguration.yaml",
     "/validate"),
)
API = "/apis/admissionregistration.k8s.io/v1"


def registration(manifest: Path, path: str, *, name: str, port: int, ca_pem: bytes,
                 tag: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(manifest.read_text())
    doc["metadata"]["name"] = name
    doc["webhooks"] = [h for h in doc["webhooks"] if h["name"] != "node-scope.vgpu.io"]
    for hook in doc["webhooks"]:
        hook["clientConfig"] = {"url": f"https://localhost:{port}{path}",
                                "caBundle": base64.b64encode(ca_pem).decode()}
        hook.pop("matchConditions", None)
        hook["namespaceSelector"]["matchExpressions"].append(
            {"key": STACK_LABEL, "operator": "In", "values": [tag]})
    return doc


def register(cluster: KubeCluster, *, name: str, port: int, ca_pem: bytes, tag: str) -> None:
    for resource, manifest, path in CONFIGURATIONS:
        cluster.request_json("POST", f"{API}/{resource}", "register the webhook",
                             body=registration(manifest, path, name=name, port=port,
                                               ca_pem=ca_pem, tag=tag))


def unregister(cluster: KubeCluster, name: str) -> None:
    for resource, _, _ in CONFIGURATIONS:
        with contextlib.suppress(ClusterError):
            cluster.request_json("DELETE", f"{API}/{resource}/{name}", "delete webhook")
