"""The e2e environment works, and the apiserver behaves as the components assume.

Each test here pins one fact of Kubernetes 1.20.2 that vgpu's design relies on
(or works around); a failure means the environment or the assumption changed.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import kubernetes.client
import pytest
import urllib3
from kubernetes.client import (
    ApiException,
    CoreV1Api,
    V1Binding,
    V1Container,
    V1Node,
    V1ObjectMeta,
    V1ObjectReference,
    V1Pod,
    V1PodSpec,
)

from tests.controlplane.cluster import ControlPlane, make_ca, make_serving_cert

SCHEDULER = "vgpu-scheduler"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def gpu_pod(name: str, annotations: dict[str, str] | None = None) -> V1Pod:
    return V1Pod(
        metadata=V1ObjectMeta(name=name, annotations=annotations),
        spec=V1PodSpec(
            scheduler_name=SCHEDULER,
            automount_service_account_token=False,
            containers=[V1Container(name="main", image="busybox")],
        ),
    )


def bind(
    core: CoreV1Api, namespace: str, pod: str, node: str, annotations: dict[str, str]
) -> urllib3.BaseHTTPResponse:
    body = V1Binding(
        metadata=V1ObjectMeta(name=pod, annotations=annotations),
        target=V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    # The server answers a Binding POST with a Status, not a Binding; the
    # generated client would try to parse it as the latter.
    resp = core.create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)
    return cast(urllib3.BaseHTTPResponse, resp)


def watch_pods(
    core: CoreV1Api, namespace: str, resource_version: str, want: int, timeout: int = 10
) -> list[dict[str, Any]]:
    """Raw watch events (type + object as JSON) from ``resource_version``, at most ``want``."""
    resp = cast(
        urllib3.BaseHTTPResponse,
        core.list_namespaced_pod(
            namespace,
            watch=True,
            resource_version=resource_version,
            timeout_seconds=timeout,
            _preload_content=False,
        ),
    )
    events: list[dict[str, Any]] = []
    buf = b""
    try:
        for chunk in resp.stream(4096, decode_content=True):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    events.append(json.loads(line))
                if len(events) >= want:
                    return events
    finally:
        resp.release_conn()
    return events


# --- version and discovery ---------------------------------------------------------


def test_apiserver_reports_v1_20_2(api_client: kubernetes.client.ApiClient) -> None:
    info = kubernetes.client.VersionApi(api_client).get_code()
    assert info.git_version == "v1.20.2"
    assert (info.major, info.minor) == ("1", "20")


def test_kubectl_version_talks_to_the_server(control_plane: ControlPlane) -> None:
    out = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    assert out["clientVersion"]["gitVersion"] == "v1.20.2"
    assert out["serverVersion"]["gitVersion"] == "v1.20.2"


def test_pdb_is_only_policy_v1beta1(control_plane: ControlPlane) -> None:
    # Manifests for this cluster must use policy/v1beta1 PodDisruptionBudgets.
    versions = control_plane.kubectl("api-versions").stdout.split()
    assert "policy/v1beta1" in versions
    assert "policy/v1" not in versions
    assert "admissionregistration.k8s.io/v1" in versions


# --- nodes --------------------------------------------------------------------------


def test_node_annotations_round_trip_and_no_not_ready_taint(core_v1: CoreV1Api) -> None:
    name = unique("node")
    inventory = json.dumps({"version": 1, "devices": [{"uuid": "GPU-0", "memory_mib": 40960}]})
    core_v1.create_node(
        V1Node(metadata=V1ObjectMeta(name=name, annotations={"vgpu.io/node-gpus": inventory}))
    )
    try:
        node = core_v1.read_node(name)
        assert node.metadata is not None and node.metadata.annotations is not None
        assert node.metadata.annotations["vgpu.io/node-gpus"] == inventory
        # TaintNodesByCondition is disabled: with no node controller to lift it,
        # its not-ready taint would make every node unschedulable.
        assert not (node.spec and node.spec.taints)
    finally:
        core_v1.delete_node(name)


# --- binding ------------------------------------------------------------------------


def test_binding_sets_node_name_and_copies_annotations(core_v1: CoreV1Api, namespace: str) -> None:
    pod = unique("pod")
    core_v1.create_namespaced_pod(
        namespace, gpu_pod(pod, {"keep": "me", "vgpu.io/bind-phase": "stale"})
    )
    assignment = json.dumps(
        {"version": 1, "node": "n1", "containers": {"main": [{"uuid": "GPU-0"}]}}
    )
    annotations = {
        "vgpu.io/assignment": assignment,
        "vgpu.io/bind-phase": "allocating",
        "vgpu.io/bind-time": "2024-01-01T00:00:00Z",
    }
    resp = bind(core_v1, namespace, pod, "n1", annotations)
    assert resp.status == 201

    got = core_v1.read_namespaced_pod(pod, namespace)
    assert got.spec is not None and got.metadata is not None
    assert got.spec.node_name == "n1"
    # Binding annotations land on the pod in the same write as nodeName,
    # overwriting keys it already had and keeping the others.
    assert got.metadata.annotations == {"keep": "me", **annotations}
    conditions = {c.type: c.status for c in (got.status.conditions or [])} if got.status else {}
    assert conditions.get("PodScheduled") == "True"


def test_binding_response_is_a_status_the_model_cannot_parse(
    core_v1: CoreV1Api, namespace: str
) -> None:
    # Why bind() passes _preload_content=False: without it the client reads
    # the 201 Status as a Binding and raises, although the bind succeeded.
    pod = unique("pod")
    core_v1.create_namespaced_pod(namespace, gpu_pod(pod))
    body = V1Binding(
        metadata=V1ObjectMeta(name=pod),
        target=V1ObjectReference(api_version="v1", kind="Node", name="n1"),
    )
    with pytest.raises(ValueError):
        core_v1.create_namespaced_pod_binding(pod, namespace, body)
    got = core_v1.read_namespaced_pod(pod, namespace)
    assert got.spec is not None and got.spec.node_name == "n1"


def test_second_binding_is_a_conflict_and_changes_nothing(
    core_v1: CoreV1Api, namespace: str
) -> None:
    pod = unique("pod")
    core_v1.create_namespaced_pod(namespace, gpu_pod(pod))
    assert bind(core_v1, namespace, pod, "n1", {"vgpu.io/bind-phase": "allocating"}).status == 201

    with pytest.raises(ApiException) as err:
        bind(core_v1, namespace, pod, "n2", {"vgpu.io/bind-phase": "second"})
    assert err.value.status == 409

    got = core_v1.read_namespaced_pod(pod, namespace)
    assert got.spec is not None and got.metadata is not None
    assert got.spec.node_name == "n1"
    assert got.metadata.annotations == {"vgpu.io/bind-phase": "allocating"}


# --- optimistic concurrency and watches ------------------------------------------


def test_merge_patch_with_stale_resource_version_conflicts(
    core_v1: CoreV1Api, namespace: str
) -> None:
    pod = unique("pod")
    created = core_v1.create_namespaced_pod(namespace, gpu_pod(pod))
    assert created.metadata is not None
    stale = created.metadata.resource_version
    merge = "application/merge-patch+json"
    core_v1.patch_namespaced_pod(
        pod, namespace, {"metadata": {"annotations": {"a": "1"}}}, _content_type=merge
    )

    with pytest.raises(ApiException) as err:
        core_v1.patch_namespaced_pod(
            pod,
            namespace,
            {"metadata": {"resourceVersion": stale, "annotations": {"a": "2"}}},
            _content_type=merge,
        )
    assert err.value.status == 409
    got = core_v1.read_namespaced_pod(pod, namespace)
    assert got.metadata is not None and got.metadata.annotations == {"a": "1"}


def test_watch_resumes_from_a_resource_version(core_v1: CoreV1Api, namespace: str) -> None:
    start = core_v1.list_namespaced_pod(namespace).metadata
    assert start is not None and start.resource_version is not None
    pod = unique("pod")
    merge = "application/merge-patch+json"
    core_v1.create_namespaced_pod(namespace, gpu_pod(pod))
    for i in (1, 2):
        core_v1.patch_namespaced_pod(
            pod, namespace, {"metadata": {"annotations": {"step": str(i)}}}, _content_type=merge
        )

    events = watch_pods(core_v1, namespace, start.resource_version, want=3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "MODIFIED"]
    assert [e["object"]["metadata"].get("annotations", {}).get("step") for e in events] == [
        None,
        "1",
        "2",
    ]

    # Resuming from an event's resourceVersion replays only what came after it.
    resume_from = events[1]["object"]["metadata"]["resourceVersion"]
    core_v1.patch_namespaced_pod(
        pod, namespace, {"metadata": {"annotations": {"step": "3"}}}, _content_type=merge
    )
    later = watch_pods(core_v1, namespace, resume_from, want=2)
    assert [e["object"]["metadata"]["annotations"]["step"] for e in later] == ["2", "3"]


def test_watch_from_a_compacted_version_is_410_gone(tmp_path: Path) -> None:
    # The shared control plane cannot show this cheaply: its watch cache holds
    # every event since a fresh etcd was created (it grows rather than evicts
    # events younger than 75 s), so no watch there is ever too old. Without
    # the cache, watches read etcd, and compaction makes old versions 410.
    with ControlPlane(extra_apiserver_args=["--watch-cache=false"]) as cp:
        pids = cp.pids
        cp.ensure_namespace("e2e")
        with cp.api_client() as api_client:
            core = CoreV1Api(api_client)
            created = core.create_namespaced_pod("e2e", gpu_pod(unique("pod")))
            assert created.metadata is not None and created.metadata.resource_version
            old = created.metadata.resource_version
            # Two later writes: compaction keeps the newest revision, so a
            # watch from `old` must need one before it.
            for _ in range(2):
                core.create_namespaced_pod("e2e", gpu_pod(unique("pod")))

            assert [e["type"] for e in watch_pods(core, "e2e", old, want=1)] == ["ADDED"]
            assert cp.etcd_compact() > int(old) + 1
            events = watch_pods(core, "e2e", old, want=1)
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410

    # Leaving the block stopped exactly the two processes it had started.
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_exact_list_after_etcd_compaction_is_410_gone(
    control_plane: ControlPlane, core_v1: CoreV1Api, namespace: str
) -> None:
    created = core_v1.create_namespaced_pod(namespace, gpu_pod(unique("pod")))
    assert created.metadata is not None and created.metadata.resource_version is not None
    old = created.metadata.resource_version
    core_v1.create_namespaced_pod(namespace, gpu_pod(unique("pod")))
    # Exact lists bypass the watch cache and read etcd at that revision, which
    # compaction has discarded.
    assert control_plane.etcd_compact() > int(old)
    with pytest.raises(ApiException) as err:
        core_v1.list_namespaced_pod(namespace, resource_version=old, resource_version_match="Exact")
    assert err.value.status == 410


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


# --- kubectl features later tasks use ------------------------------------------------


def test_kubectl_kustomize_and_apply_k(
    control_plane: ControlPlane, core_v1: CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    # kubectl 1.20 embeds kustomize v2.0.3. What works there: `bases:` for
    # folders, file-based patchesStrategicMerge and patchesJson6902,
    # namePrefix, namespace, commonLabels, generators. What does not: folders
    # under `resources:`, inline `patches:`, `components:`, `labels:`.
    base, overlay = tmp_path / "base", tmp_path / "overlay"
    base.mkdir()
    overlay.mkdir()
    (base / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: '1'\n"
    )
    (base / "kustomization.yaml").write_text("resources:\n- cm.yaml\n")
    (overlay / "patch.yaml").write_text("- op: replace\n  path: /data/a\n  value: '2'\n")
    (overlay / "kustomization.yaml").write_text(
        f"namespace: {namespace}\nnamePrefix: vgpu-\ncommonLabels:\n  app: vgpu\n"
        "bases:\n- ../base\n"
        "patchesJson6902:\n- target: {version: v1, kind: ConfigMap, name: settings}\n"
        "  path: patch.yaml\n"
    )
    rendered = control_plane.kubectl("kustomize", str(overlay)).stdout
    assert "name: vgpu-settings" in rendered
    assert f"namespace: {namespace}" in rendered

    control_plane.kubectl("apply", "-k", str(overlay))
    cm = core_v1.read_namespaced_config_map("vgpu-settings", namespace)
    assert cm.metadata is not None and cm.metadata.labels == {"app": "vgpu"}
    assert cm.data == {"a": "2"}

    (overlay / "kustomization.yaml").write_text("resources:\n- ../base\n")
    old_style = control_plane.kubectl("kustomize", str(overlay), check=False)
    assert old_style.returncode != 0
    assert "must be a file" in old_style.stderr


def test_kubectl_auth_can_i_follows_rbac(control_plane: ControlPlane, namespace: str) -> None:
    sa = f"system:serviceaccount:{namespace}:default"
    admin = control_plane.kubectl("auth", "can-i", "create", "pods", "-n", namespace, check=False)
    assert admin.stdout.strip() == "yes"
    denied = control_plane.kubectl(
        "auth", "can-i", "create", "pods", "-n", namespace, "--as", sa, check=False
    )
    assert denied.stdout.strip() == "no"

    # A Role of our own: the aggregated ClusterRoles (admin, edit, view) get
    # their rules from the controller-manager's aggregation controller, so
    # here they are empty.
    edit = json.loads(control_plane.kubectl("get", "clusterrole", "edit", "-o", "json").stdout)
    assert not edit.get("rules")
    ns = ["-n", namespace]
    control_plane.kubectl("create", "role", "pods", "--verb=create", "--resource=pods", *ns)
    control_plane.kubectl(
        "create", "rolebinding", "pods", "--role=pods", f"--serviceaccount={namespace}:default", *ns
    )
    allowed = control_plane.kubectl(
        "auth", "can-i", "create", "pods", "-n", namespace, "--as", sa, check=False
    )
    assert allowed.stdout.strip() == "yes"


def test_pod_with_service_account_token_is_admitted(core_v1: CoreV1Api, namespace: str) -> None:
    # Unmodified user pods mount a token: with bound token volumes the
    # ServiceAccount admission plugin needs only the account, which the
    # namespace fixture creates (there is no controller-manager to do it).
    pod = V1Pod(
        metadata=V1ObjectMeta(name=unique("pod")),
        spec=V1PodSpec(containers=[V1Container(name="main", image="busybox")]),
    )
    created = core_v1.create_namespaced_pod(namespace, pod)
    assert created.spec is not None
    assert created.spec.service_account_name == "default"
    projected = [v for v in created.spec.volumes or [] if v.projected is not None]
    assert projected, "expected a projected service-account token volume"
