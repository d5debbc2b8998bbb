"""Admission webhooks on 1.20: reached by a loopback URL, ``matchConditions`` dropped.

An HTTPS webhook of the test's own, registered by ``clientConfig.url`` with its CA, is
called for the pods it selects and its patch applied; the ``matchConditions`` the
product's registration carries are dropped on write (1.27+ only). Pinned against
Kubernetes 1.20.2.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import kubernetes.client
import urllib3
from kubernetes.client import CoreV1Api

from tests.controlplane.cluster import ControlPlane, make_ca, make_serving_cert
from tests.e2e.controlplane_support import gpu_pod, unique

# --- admission webhooks --------------------------------------------------------------


class _RecordingWebhook(BaseHTTPRequestHandler):
    """Allows every review and adds one annotation, recording what it saw."""

    seen: list[dict[str, Any]]

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(review)
        patch = [{"op": "add", "path": "/metadata/annotations", "value": {"hooked": "yes"}}]

        answer = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {
                "uid": review["request"]["uid"],
                "allowed": True,
                "patchType": "JSONPatch",
                "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
            },
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve_webhook(tmp_path: Path) -> Iterator[tuple[int, bytes, list[dict[str, Any]]]]:
    """An HTTPS admission webhook on loopback: yields (port, CA PEM, reviews seen)."""
    ca = make_ca("webhook-ca")
    serving = make_serving_cert(ca, "webhook", ips=["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem())
    (tmp_path / "tls.key").write_bytes(serving.key_pem())
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    seen: list[dict[str, Any]] = []

    class Handler(_RecordingWebhook):
        pass

    Handler.seen = seen
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], ca.cert_pem(), seen
    finally:
        server.shutdown()
        server.server_close()


def test_webhook_by_loopback_url_is_called_and_match_conditions_are_dropped(
    control_plane: ControlPlane,
    api_client: kubernetes.client.ApiClient,
    core_v1: CoreV1Api,
    namespace: str,
    tmp_path: Path,
) -> None:
    admission = kubernetes.client.AdmissionregistrationV1Api(api_client)
    selector_value = unique("hook")
    name = unique("vgpu-e2e-hook")
    with serve_webhook(tmp_path) as (port, ca_pem, seen):
        config = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": "probe.vgpu.io",
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/mutate",
                        "caBundle": base64.b64encode(ca_pem).decode(),
                    },
                    "rules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["pods"],
                        }
                    ],
                    # Keeps this hook off every other test's pods.
                    "objectSelector": {"matchLabels": {"vgpu-e2e-hook": selector_value}},
                    # 1.20 does not know matchConditions (1.27+): dropped on write
                    # and so never evaluated.
                    "matchConditions": [
                        {"name": "never", "expression": "object.metadata.name == 'never'"}
                    ],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 5,
                }
            ],
        }
        model = kubernetes.client.V1MutatingWebhookConfiguration.from_dict(config)
        assert model is not None
        admission.create_mutating_webhook_configuration(model)
        try:
            stored = admission.read_mutating_webhook_configuration(name, _preload_content=False)
            stored_json = json.loads(cast(urllib3.BaseHTTPResponse, stored).data)
            assert "matchConditions" not in stored_json["webhooks"][0]

            # The apiserver learns of new webhook configurations through an
            # informer, so the first pods may be admitted before it knows.
            annotations: dict[str, str] | None = None
            for _ in range(40):
                pod = gpu_pod(unique("pod"))
                assert pod.metadata is not None
                pod.metadata.labels = {"vgpu-e2e-hook": selector_value}
                created = core_v1.create_namespaced_pod(namespace, pod)
                annotations = created.metadata.annotations if created.metadata else None
                if annotations:
                    break
                time.sleep(0.25)
            assert annotations == {"hooked": "yes"}
            assert seen and seen[-1]["request"]["kind"]["kind"] == "Pod"
        finally:
            admission.delete_mutating_webhook_configuration(name)
