"""Helpers for the install-and-operate end-to-end tests (issue 6).

The ``vgpu`` command as an operator runs it, a ServiceAccount's kubeconfig, and the
manifests rendered by kubectl's kustomize (once per folder, shared by
``test_ops_render`` and ``test_ops_install``).
"""

from __future__ import annotations

import copy
import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes.client
import yaml

from tests.controlplane.cluster import ControlPlane
from tests.image.pin import UNRELEASED

ROOT = Path(__file__).resolve().parents[2]
#: What every kustomization pins until a release pins its own.
IMAGE = UNRELEASED
MANIFESTS = ROOT / "manifests"
OVERLAYS = sorted(p.name for p in (MANIFESTS / "overlays").iterdir() if p.is_dir())
#: Every folder kustomize can render on its own.
RENDERABLE = ["base", "base/core", "dashboards", *(f"overlays/{o}" for o in OVERLAYS)]
Obj = dict[str, Any]


def vgpu(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run the `vgpu` command in a child process, as an operator would."""
    return subprocess.run([sys.executable, "-m", "vgpu.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False, cwd=ROOT)


def service_account_kubeconfig(cp: ControlPlane, namespace: str, account: str,
                               path: Path) -> Path:
    """A kubeconfig that authenticates as a ServiceAccount (a TokenRequest token), so a
    command runs with exactly the rights RBAC gives that account."""
    with cp.api_client() as client:
        core = kubernetes.client.CoreV1Api(client)
        request = kubernetes.client.AuthenticationV1TokenRequest(
            spec=kubernetes.client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))
        answer = core.create_namespaced_service_account_token(account, namespace, request)
    config: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": cp.server,
                                                 "certificate-authority": str(cp.ca_cert)}}],
        "users": [{"name": account, "user": {"token": answer.status.token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": account}}],
        "current-context": "e2e",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def metrics_reader_token(cp: ControlPlane, namespace: str, account: str) -> str:
    """A token of ServiceAccount ``account`` (created in ``namespace``, which must exist)
    bound to a ClusterRole allowed ``get`` on ``/metrics``: what a Prometheus scrapes the
    components' secure ports with (manifests' ``vgpu-metrics-reader``)."""
    name = f"{namespace}-{account}"
    cp.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": account, "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": name},
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]},
    ]))
    with cp.api_client() as client:
        answer = kubernetes.client.CoreV1Api(client).create_namespaced_service_account_token(
            account, namespace, kubernetes.client.AuthenticationV1TokenRequest(
                spec=kubernetes.client.V1TokenRequestSpec(audiences=[],
                                                          expiration_seconds=3600)))
    return str(answer.status.token)


def kustomize(kubectl: Path, folder: str) -> list[Obj]:
    return copy.deepcopy(_kustomize(kubectl, folder))


@functools.cache
def _kustomize(kubectl: Path, folder: str) -> list[Obj]:
    proc = subprocess.run([str(kubectl), "kustomize", str(MANIFESTS / folder)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, f"kubectl kustomize {folder}:\n{proc.stderr}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def check_rendered(objs: list[Obj]) -> None:
    """What every rendering must hold: every object lands in vgpu-system (the node agent's
    in vgpu-node), the images
    transformer reached every container, generated ConfigMaps are referred to by their
    hashed names."""
    assert objs
    config_maps = {o["metadata"]["name"] for o in objs if o["kind"] == "ConfigMap"}
    for o in objs:
        if o["kind"] not in ("Namespace", "MutatingWebhookConfiguration") and \
                not o["kind"].startswith("Cluster"):
            # The node agent's workload in its namespace, every other one in vgpu-system.
            # (None: cluster-scoped, or the dashboards folder, namespaced where applied.)
            expected = {"vgpu-node"} if o["kind"] == "DaemonSet" else \
                {"vgpu-system"} if o["kind"] in ("Deployment", "Job", "CronJob") else \
                {None, "vgpu-system", "vgpu-node"}
            assert o["metadata"].get("namespace") in expected, o["metadata"]
        spec = o.get("spec", {})
        template = spec.get("template") or spec.get("jobTemplate", {}).get("spec", {}).get(
            "template")
        if not template:
            continue
        pod = template["spec"]
        for c in pod.get("initContainers", []) + pod["containers"]:
            # The images transformer reached every container, init containers included:
            # the one pinned image (tests/image/pin.py).
            assert c["image"] == IMAGE, (o["metadata"]["name"], c["name"])
        for v in pod.get("volumes", []):
            # Every generated ConfigMap is referred to by its hashed name.
            if "configMap" in v:
                assert v["configMap"]["name"] in config_maps, v
