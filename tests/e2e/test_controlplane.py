"""The e2e environment works, and the apiserver behaves as the components assume.

Each test here pins one fact of Kubernetes 1.20.2 that vgpu's design relies on
(or works around); a failure means the environment or the assumption changed.

Here: the version, discovery, Nodes, kubectl's kustomize and RBAC, ServiceAccount
tokens. Bindings, watches and admission webhooks have modules of their own
(``test_controlplane_binding``, ``test_controlplane_watch``,
``test_controlplane_webhook``).
"""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes.client
from kubernetes.client import CoreV1Api, V1Container, V1Node, V1ObjectMeta, V1Pod, V1PodSpec

from tests.controlplane.cluster import ControlPlane
from tests.e2e.controlplane_support import unique

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
