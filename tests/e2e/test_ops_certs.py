"""`vgpu certs` against a real API server: the Secret, the caBundle, and the API server
actually trusting a webhook that serves the certificate.

The webhook here is a small HTTPS AdmissionReview responder on loopback (the API
server reaches it by URL, there being no pods or Services that run), serving exactly the
tls.crt/tls.key `vgpu certs` stored in the Secret. Its configuration's objectSelector
keeps it off every other test's pods.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from cryptography import x509

from tests.controlplane.cluster import ControlPlane
from tests.e2e.ops_support import vgpu


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        patch = [{"op": "add", "path": "/metadata/annotations", "value": {"hooked": "yes"}}]
        answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "response": {"uid": review["request"]["uid"], "allowed": True,
                               "patchType": "JSONPatch",
                               "patch": base64.b64encode(json.dumps(patch).encode()).decode()}}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Webhook:
    """The responder; ``serve(crt, key)`` swaps the certificate for new connections."""

    def __init__(self) -> None:
        self.ctx: ssl.SSLContext | None = None
        self.port = 0

    def serve(self, crt: bytes, key: bytes, folder: Path) -> None:
        (folder / "tls.crt").write_bytes(crt)
        (folder / "tls.key").write_bytes(key)
        assert self.ctx is not None
        self.ctx.load_cert_chain(folder / "tls.crt", folder / "tls.key")


@contextlib.contextmanager
def webhook_server() -> Iterator[Webhook]:
    hook = Webhook()
    hook.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    hook.port = server.server_address[1]
    ctx = hook.ctx

    # Wrap per connection, so a certificate loaded later is used by later handshakes.
    def get_request() -> tuple[socket.socket, Any]:
        conn, addr = server.socket.accept()
        return ctx.wrap_socket(conn, server_side=True), addr

    server.get_request = get_request  # type: ignore[method-assign]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_pod(core: kubernetes.client.CoreV1Api, namespace: str,
               label: str) -> dict[str, str] | None:
    """Create a pod the hook selects; its annotations, or None when admission refused it."""
    pod = kubernetes.client.V1Pod(
        metadata=kubernetes.client.V1ObjectMeta(name=unique("pod"), labels={"certs-e2e": label}),
        spec=kubernetes.client.V1PodSpec(
            automount_service_account_token=False,
            containers=[kubernetes.client.V1Container(name="main", image="busybox")]))
    try:
        created = core.create_namespaced_pod(namespace, pod)
    except kubernetes.client.ApiException as exc:
        assert exc.status == 500 and "failed calling webhook" in str(exc.body), exc.body
        return None
    assert created.metadata is not None
    return created.metadata.annotations or {}


def eventually(check: Any, want: Any, seconds: float = 20.0) -> Any:
    """The API server learns of webhook configuration changes through an informer."""
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.25)


def read_secret(core: kubernetes.client.CoreV1Api, namespace: str) -> tuple[str, dict[str, bytes]]:
    raw = core.read_namespaced_secret("vgpu-webhook-tls", namespace, _preload_content=False)
    obj = json.loads(raw.data)
    assert obj["type"] == "kubernetes.io/tls"
    return obj["metadata"]["resourceVersion"], {k: base64.b64decode(v)
                                                for k, v in obj["data"].items()}


def read_config(admission: kubernetes.client.AdmissionregistrationV1Api,
                name: str) -> tuple[str, bytes]:
    """The mutating configuration's version and bundle; the validating one of the same name
    must carry the same bundle (`vgpu certs` keeps both)."""
    raw = admission.read_mutating_webhook_configuration(name, _preload_content=False)
    obj = json.loads(raw.data)
    bundle = base64.b64decode(obj["webhooks"][0]["clientConfig"].get("caBundle", ""))
    other = json.loads(admission.read_validating_webhook_configuration(
        name, _preload_content=False).data)
    assert base64.b64decode(other["webhooks"][0]["clientConfig"].get("caBundle", "")) == bundle
    return obj["metadata"]["resourceVersion"], bundle


def cas(bundle: bytes) -> list[x509.Name]:
    return [c.subject for c in x509.load_pem_x509_certificates(bundle)]


@pytest.fixture
def hook_config(api_client: kubernetes.client.ApiClient) -> Iterator[tuple[str, str, Webhook]]:
    admission = kubernetes.client.AdmissionregistrationV1Api(api_client)
    name, label = unique("vgpu-certs-e2e"), unique("sel")
    with webhook_server() as hook:
        config = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": "certs-e2e.vgpu.io",
                # No caBundle yet: `vgpu certs` sets it.
                "clientConfig": {"url": f"https://localhost:{hook.port}/mutate"},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                           "apiVersions": ["v1"], "resources": ["pods"]}],
                "objectSelector": {"matchLabels": {"certs-e2e": label}},
                "failurePolicy": "Fail", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "timeoutSeconds": 5,
            }],
        }
        model = kubernetes.client.V1MutatingWebhookConfiguration.from_dict(config)
        assert model is not None
        admission.create_mutating_webhook_configuration(model)
        # /validate's configuration of the same name: `vgpu certs` keeps both bundles. Its
        # selector matches no pod, so only the mutating hook is ever called here.
        validating = {**config, "kind": "ValidatingWebhookConfiguration", "webhooks": [{
            **config["webhooks"][0], "name": "certs-e2e-validate.vgpu.io",
            "objectSelector": {"matchLabels": {"certs-e2e": unique("none")}}}]}
        validating["webhooks"][0].pop("reinvocationPolicy", None)
        vmodel = kubernetes.client.V1ValidatingWebhookConfiguration.from_dict(validating)
        assert vmodel is not None
        admission.create_validating_webhook_configuration(vmodel)
        try:
            yield name, label, hook
        finally:
            admission.delete_mutating_webhook_configuration(name)
            admission.delete_validating_webhook_configuration(name)


def test_vgpu_certs_makes_the_api_server_trust_the_webhook(
        control_plane: ControlPlane, core_v1: kubernetes.client.CoreV1Api, namespace: str,
        hook_config: tuple[str, str, Webhook], tmp_path: Path) -> None:
    name, label, hook = hook_config
    admission = kubernetes.client.AdmissionregistrationV1Api(core_v1.api_client)

    def certs(*extra: str) -> str:
        proc = vgpu("certs", "--kubeconfig", str(control_plane.kubeconfig),
                    "--namespace", namespace, "--webhook-config", name,
                    "--dns-name", "localhost", *extra)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    # Before: the hook serves a certificate nobody trusts, so admission fails.
    placeholder = vgpu("certs", "--out-dir", str(tmp_path / "placeholder"),
                       "--dns-name", "localhost")
    assert placeholder.returncode == 0, placeholder.stderr
    hook.serve((tmp_path / "placeholder" / "tls.crt").read_bytes(),
               (tmp_path / "placeholder" / "tls.key").read_bytes(), tmp_path)
    assert eventually(lambda: create_pod(core_v1, namespace, label), None) is None

    # First run: Secret created, caBundle patched; the hook serving the Secret's
    # certificate is trusted.
    out = certs("--validity-days", "10", "--renew-before-days", "5")
    assert "issued a new certificate" in out and "caBundle updated" in out
    rv, data = read_secret(core_v1, namespace)
    config_rv, bundle = read_config(admission, name)
    assert bundle == data["ca.crt"]
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    assert f"vgpu-webhook.{namespace}.svc" in [
        str(n.value) for n in cert.extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value]
    hook.serve(data["tls.crt"], data["tls.key"], tmp_path)
    assert eventually(lambda: create_pod(core_v1, namespace, label), {"hooked": "yes"}) == \
        {"hooked": "yes"}

    # Second run: nothing changes.
    out = certs("--validity-days", "10", "--renew-before-days", "5")
    assert "unchanged" in out and "caBundle unchanged" in out
    assert read_secret(core_v1, namespace)[0] == rv
    assert read_config(admission, name)[0] == config_rv

    # The certificate has 10 days left; with a 30-day threshold it is renewed. The new
    # CA joins the bundle next to the old one, so the replica still serving the old
    # certificate stays trusted, and so does one serving the new certificate.
    out = certs("--validity-days", "365", "--renew-before-days", "30")
    assert "issued a new certificate" in out and "expires" in out
    new_rv, new = read_secret(core_v1, namespace)
    assert new_rv != rv and new["ca.crt"] != data["ca.crt"]
    _, bundle = read_config(admission, name)
    assert cas(bundle) == cas(new["ca.crt"] + data["ca.crt"])
    assert create_pod(core_v1, namespace, label) == {"hooked": "yes"}  # still the old cert
    hook.serve(new["tls.crt"], new["tls.key"], tmp_path)
    assert eventually(lambda: create_pod(core_v1, namespace, label), {"hooked": "yes"}) == \
        {"hooked": "yes"}
    # ... and then it is stable again.
    config_rv = read_config(admission, name)[0]
    out = certs("--validity-days", "365", "--renew-before-days", "30")
    assert "unchanged" in out and "caBundle unchanged" in out
    assert read_secret(core_v1, namespace)[0] == new_rv
    assert read_config(admission, name)[0] == config_rv


def test_vgpu_certs_without_the_webhook_configuration_fails_clearly(
        control_plane: ControlPlane, core_v1: kubernetes.client.CoreV1Api,
        namespace: str) -> None:
    proc = vgpu("certs", "--kubeconfig", str(control_plane.kubeconfig), "--namespace",
                namespace, "--webhook-config", unique("missing"))
    assert proc.returncode == 2
    assert "not found" in proc.stderr and "Traceback" not in proc.stderr
    # The Secret is written all the same, so the webhook's pods can start.
    assert read_secret(core_v1, namespace)[1]["tls.crt"]
