"""The manifests as a current kubectl (1.32+, kustomize v5) renders them, checked against
the Kubernetes 1.32 object schemas.

A client dry-run (``kubectl apply --dry-run=client --validate=strict``) cannot do this
offline: kubectl fetches both the REST mapping and the OpenAPI schema from a server, and
the only server here is the 1.20 test control plane. The 1.32 schemas come from the
``kubernetes-validate`` package (the upstream OpenAPI as JSON Schema, strict: an unknown
field is an error, as ``--validate=strict`` makes it on the server).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from tests.e2e.ops_support import RENDERABLE, Obj, check_rendered, kustomize
from tests.ops import modern_kubectl

SCHEMA_VERSION = "1.32.0"
#: Objects with no 1.32 schema, by folder: the 1.20 overlays' v1beta1 forms (removed in
#: 1.25; those overlays are for 1.20 only) and the Prometheus operator's custom resource.
V1BETA1 = {("CronJob", "batch/v1beta1"), ("PodDisruptionBudget", "policy/v1beta1")}
NO_SCHEMA = {
    "overlays/k8s-1.20": V1BETA1,
    "overlays/k8s-1.20-fake-gpus": V1BETA1,
    "overlays/prometheus-operator": {("PodMonitor", "monitoring.coreos.com/v1")},
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding",
                  "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
#: The policies the k8s-1.28 overlay (and k8s-1.21 over it) deletes (`$patch: delete`, which
#: kustomize v2 does not apply to a kind it does not know; those overlays are for kubectl
#: 1.21+, kustomize v4+).
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


@pytest.fixture(scope="session")
def modern() -> Path:
    hit = modern_kubectl.find()
    assert hit is not None, modern_kubectl.WHY_MISSING
    return Path(hit[0])


def canonical(objs: list[Obj]) -> list[str]:
    """The objects as comparable text, less what the two kustomize versions are known to
    do differently: the hash suffix of generated ConfigMaps (the algorithm changed), and
    a namespace on cluster-scoped objects (v2 sets it, the API server ignores it)."""
    hashed = {o["metadata"]["name"] for o in objs if o["kind"] == "ConfigMap"
              and re.fullmatch(r".+-[a-z0-9]{10}", o["metadata"]["name"])}
    out = []
    for original in objs:
        obj = copy.deepcopy(original)
        if obj["kind"] in CLUSTER_SCOPED:
            obj["metadata"].pop("namespace", None)
        text = json.dumps(obj, sort_keys=True)
        for name in hashed:
            text = text.replace(f'"{name}"', f'"{name[:-11]}-<hash>"')
        out.append(text)
    return sorted(out)


def schema_errors(objs: list[Obj]) -> tuple[list[str], set[tuple[str, str]]]:
    """Validation messages, and the (kind, apiVersion) pairs 1.32 has no schema for."""
    errors: list[str] = []
    unknown: set[tuple[str, str]] = set()
    for obj in objs:
        try:
            kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            unknown.add((obj["kind"], obj["apiVersion"]))
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            errors.append(f"{obj['kind']}/{obj['metadata']['name']} {path}: {exc.message}")
    return errors, unknown


@pytest.mark.parametrize("folder", RENDERABLE)
def test_modern_kubectl_renders_what_kubectl_1_20_renders(
        kubectl_path: Path, modern: Path, folder: str) -> None:
    objs = kustomize(modern, folder)
    check_rendered(objs)
    old = kustomize(kubectl_path, folder)
    if folder in ("overlays/k8s-1.21", "overlays/k8s-1.28"):
        assert not [o for o in objs if o["kind"] in POLICY_KINDS]
        old = [o for o in old if o["kind"] not in POLICY_KINDS]
    # kustomize v5 and the v2 inside kubectl 1.20 read the same kustomizations (the
    # deprecated `bases` and `patches*` fields stay for 1.20) into the same objects.
    assert canonical(objs) == canonical(old)


@pytest.mark.parametrize("folder", RENDERABLE)
def test_rendered_objects_are_valid_kubernetes_1_32(modern: Path, folder: str) -> None:
    errors, unknown = schema_errors(kustomize(modern, folder))
    assert errors == []
    assert unknown == NO_SCHEMA.get(folder, set())


def _mangle(objs: list[Obj], kind: str, change: Any) -> list[Obj]:
    out = copy.deepcopy(objs)
    change(next(o for o in out if o["kind"] == kind))
    return out


def test_the_schema_check_refuses_what_a_1_32_server_would(modern: Path) -> None:
    base = kustomize(modern, "base")

    def typo(o: Obj) -> None:
        o["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"

    def wrong_type(o: Obj) -> None:
        o["spec"]["replicas"] = "two"

    def removed_api(o: Obj) -> None:
        o["apiVersion"] = "policy/v1beta1"

    assert "imagePullPolicyy" in schema_errors(_mangle(base, "DaemonSet", typo))[0][0]
    assert "replicas" in schema_errors(_mangle(base, "Deployment", wrong_type))[0][0]
    assert schema_errors(_mangle(base, "PodDisruptionBudget", removed_api))[1] == {
        ("PodDisruptionBudget", "policy/v1beta1")}
