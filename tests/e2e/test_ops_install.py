"""`kubectl apply -k` of vgpu's manifests on a real Kubernetes 1.20 control plane.

Own control plane: the install's cluster-wide objects must not meet other e2e modules'.

What 1.20 cannot take: policy/v1 PodDisruptionBudget, batch/v1 CronJob (1.21), matchConditions
(1.27), a ValidatingAdmissionPolicy (1.30). manifests/overlays/k8s-1.20 is applied for real;
the base and other overlays get a server-side dry run after the same changes (``for_1_20``)
and stand-in PodMonitor CRDs; a test pins that those are all 1.20 lacks. Rendering alone is
``test_ops_render``.
"""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kubernetes.client
import kubernetes.dynamic
import pytest
import yaml

from tests.controlplane.cluster import ControlPlane
from tests.e2e.ops_support import (
    MANIFESTS,
    OVERLAYS,
    Obj,
    kustomize,
    service_account_kubeconfig,
    vgpu,
)
from tests.e2e.rbac_probe import CAN, CANNOT, EVERYONE_CANNOT, can_i, user


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    with ControlPlane() as plane:
        yield plane


# --- applying -----------------------------------------------------------------------------

def for_1_20(objs: list[Obj]) -> list[Obj]:
    """The rendered objects as Kubernetes 1.20 serves them (see the module docstring)."""
    beta = {("policy/v1", "PodDisruptionBudget"): "policy/v1beta1",
            ("batch/v1", "CronJob"): "batch/v1beta1"}
    out = []
    for obj in copy.deepcopy(objs):
        if obj["kind"].startswith("ValidatingAdmissionPolicy"):
            continue  # 1.30+ (the policy and its binding): 1.20 has them in no form
        obj["apiVersion"] = beta.get((obj["apiVersion"], obj["kind"]), obj["apiVersion"])
        if obj["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for hook in obj["webhooks"]:
                hook.pop("matchConditions", None)
        out.append(obj)
    return out


STAND_IN_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: podmonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {plural: podmonitors, singular: podmonitor, kind: PodMonitor, listKind: PodMonitorList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""


@pytest.fixture(scope="module")
def first_apply(cp: ControlPlane) -> str:
    return cp.kubectl("apply", "-k", str(MANIFESTS / "overlays" / "k8s-1.20")).stdout


@pytest.fixture
def installed(first_apply: str) -> None:
    """vgpu installed with the 1.20 overlay (once per module)."""


def test_the_1_20_overlay_applies_and_a_second_apply_creates_nothing(
        cp: ControlPlane, first_apply: str) -> None:
    first = subprocess.CompletedProcess([], 0, first_apply, "")
    assert "poddisruptionbudget.policy/vgpu-webhook created" in first.stdout
    assert all(f"{k}webhookconfiguration.admissionregistration.k8s.io/vgpu-webhook created"
               in first.stdout for k in ("mutating", "validating"))
    second = cp.kubectl("apply", "-k", str(MANIFESTS / "overlays" / "k8s-1.20"))
    assert " created" not in second.stdout, second.stdout
    assert " configured" not in second.stdout, second.stdout
    # Server-side apply over a client-side apply takes the fields over: --force-conflicts.
    dry = cp.kubectl("apply", "-k", str(MANIFESTS / "overlays" / "k8s-1.20"), "--server-side",
                     "--force-conflicts", "--dry-run=server")
    assert "serverside-applied (server dry run)" in dry.stdout
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        stored = cp.kubectl("get", kind, "vgpu-webhook", "-o", "yaml")
        assert "failurePolicy: Ignore" in stored.stdout


def test_1_20_lacks_only_what_the_overlay_replaces(cp: ControlPlane, kubectl_path: Path) -> None:
    versions = cp.kubectl("api-versions").stdout.split()
    assert "policy/v1" not in versions and "policy/v1beta1" in versions
    # batch/v1 is served (Jobs), but not for CronJobs:
    resources = cp.kubectl("api-resources", "--api-group=batch", "-o", "wide").stdout
    cronjob_line = next(line for line in resources.splitlines() if line.startswith("cronjobs"))
    assert "batch/v1beta1" in cronjob_line
    objs = kustomize(kubectl_path, "base")
    refused = cp.kubectl("apply", "--dry-run=server", "-f", "-", check=False,
                         input_text=yaml.safe_dump_all(objs))
    assert refused.returncode != 0 and "matchConditions" in refused.stderr
    kinds = cp.kubectl("api-resources", "--api-group=admissionregistration.k8s.io").stdout
    assert "validatingwebhookconfigurations" in kinds and "validatingadmissionpol" not in kinds


@pytest.fixture(scope="module")
def prepared(cp: ControlPlane) -> None:
    """The namespace (a dry run creates nothing, so namespaced objects need it to exist)
    and stand-in CRDs for the Prometheus Operator's kinds."""
    cp.kubectl("apply", "-f", "-", input_text=STAND_IN_CRD)
    cp.kubectl("wait", "--for=condition=Established", "--timeout=60s",
               "crd/podmonitors.monitoring.coreos.com")
    cp.kubectl("apply", "-f", str(MANIFESTS / "base" / "core" / "namespace.yaml"))


def server_side_dry_run(cp: ControlPlane, objs: list[Obj]) -> list[str]:
    """``kubectl apply --server-side --force-conflicts --dry-run=server``, made in-process:
    kubectl 1.20 throttles itself to 5 requests a second, seconds per manifest set."""
    errors = []
    with cp.api_client() as client:
        dynamic = kubernetes.dynamic.DynamicClient(client)
        for obj in objs:
            meta = obj["metadata"]
            try:
                api = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
                api.server_side_apply(body=obj, name=meta["name"],
                                      namespace=meta.get("namespace") if api.namespaced else None,
                                      field_manager="vgpu-e2e", force_conflicts=True,
                                      dry_run="All")
            except (kubernetes.client.ApiException,
                    kubernetes.dynamic.exceptions.DynamicApiError,
                    kubernetes.dynamic.exceptions.ResourceNotFoundError) as exc:
                errors.append(f"{obj['kind']}/{meta['name']}: {str(exc)[:300]}")
    return errors


@pytest.mark.parametrize("folder", ["base", *(f"overlays/{o}" for o in OVERLAYS
                                              if o != "k8s-1.20")])


def test_base_and_overlays_dry_run_on_1_20(cp: ControlPlane, prepared: None,
                                          kubectl_path: Path, folder: str) -> None:
    objs = for_1_20(kustomize(kubectl_path, folder))
    assert server_side_dry_run(cp, objs) == []


def test_the_dry_run_catches_what_1_20_lacks(cp: ControlPlane, prepared: None,
                                             kubectl_path: Path) -> None:
    unconverted = [o for o in kustomize(kubectl_path, "base")
                   if o["kind"] in ("PodDisruptionBudget", "CronJob")]
    errors = server_side_dry_run(cp, unconverted)
    assert [e.split(":")[0] for e in errors] == [
        f"{o['kind']}/{o['metadata']['name']}" for o in unconverted]


# --- RBAC (the tables: tests/e2e/rbac_probe.py) -----------------------------------------

@pytest.mark.parametrize("account", sorted(CAN))
def test_rbac_gives_each_component_what_it_needs_and_nothing_broader(
        cp: ControlPlane, installed: None, account: str) -> None:
    missing = [c for c in CAN[account] if not can_i(cp, account, c)]
    extra = [c for c in EVERYONE_CANNOT + CANNOT[account] if can_i(cp, account, c)]
    assert not missing, f"{account} lacks {missing}"
    assert not extra, f"{account} may {extra}"
    # The in-process review and kubectl agree (one of each per account).
    for check, expected in ((CAN[account][0], "yes"), (EVERYONE_CANNOT[0], "no")):
        proc = cp.kubectl("auth", "can-i", *check, f"--as={user(account)}", check=False)
        assert proc.stdout.strip() == expected, (check, proc.stdout, proc.stderr)


def test_the_certs_job_account_can_run_vgpu_certs(cp: ControlPlane, installed: None,
                                                  tmp_path: Path) -> None:
    kubeconfig = service_account_kubeconfig(cp, "vgpu-system", "vgpu-certs",
                                            tmp_path / "certs.kubeconfig")
    first = vgpu("certs", "--kubeconfig", str(kubeconfig), "--namespace", "vgpu-system")
    assert first.returncode == 0, first.stderr
    second = vgpu("certs", "--kubeconfig", str(kubeconfig), "--namespace", "vgpu-system")
    assert second.returncode == 0, second.stderr
    assert "unchanged" in second.stdout and "caBundle unchanged" in second.stdout
    secret = cp.kubectl("get", "secret", "-n", "vgpu-system", "vgpu-webhook-tls",
                        "-o", "jsonpath={.type}")
    assert secret.stdout == "kubernetes.io/tls"
    bundle = cp.kubectl("get", "mutatingwebhookconfiguration", "vgpu-webhook", "-o",
                        "jsonpath={.webhooks[0].clientConfig.caBundle}")
    ca = cp.kubectl("get", "secret", "-n", "vgpu-system", "vgpu-webhook-tls", "-o",
                    "jsonpath={.data.ca\\.crt}")
    assert bundle.stdout and bundle.stdout == ca.stdout
