"""Least privilege in the manifests' RBAC: each ServiceAccount's rights, exactly.

Pinned as exact rule sets: any new right for a component fails here and must be argued
for in the table below. Separate from the other manifest checks because it is the one
table a reviewer must read rule by rule.
"""

from __future__ import annotations

import pytest

from tests.ops.manifest_sources import BASE, Obj, find, pod_specs
from vgpu_certs import cli as certs_cli


def rules_of(sa: str, objs: list[Obj] = BASE) -> set[tuple[str, str, str, str]]:
    """(scope, apiGroup, resource[/name], verb) for every right bound to a ServiceAccount."""
    out: set[tuple[str, str, str, str]] = set()
    for binding in objs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s["kind"] == "ServiceAccount" and s["name"] == sa
                   and s["namespace"] == "vgpu-system" for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        role = find(objs, ref["kind"], ref["name"])
        scope = "cluster" if binding["kind"] == "ClusterRoleBinding" else "vgpu-system"
        for rule in role["rules"]:
            names = rule.get("resourceNames") or [""]
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for n in names:
                        for v in rule["verbs"]:
                            out.add((scope, g, f"{r}/{n}" if n else r, v))
    return out


def _rights(scope: str, group: str, resource: str, *verbs: str) -> set[tuple[str, str, str, str]]:
    return {(scope, group, resource, v) for v in verbs}


EXPECTED_RIGHTS = {
    "vgpu-scheduler": (
        _rights("cluster", "", "pods", "get", "list", "watch", "patch")
        | _rights("cluster", "", "pods/binding", "create")
        | _rights("cluster", "", "pods/status", "patch")
        # Preemption: victims are evicted (the API server enforces their budgets), and
        # the budgets steer which victims are chosen.
        | _rights("cluster", "", "pods/eviction", "create")
        | _rights("cluster", "policy", "poddisruptionbudgets", "list", "watch")
        | _rights("cluster", "", "nodes", "get", "list", "watch")
        # Pod affinity's namespaceSelector; the default topology spread constraints.
        | _rights("cluster", "", "namespaces", "list", "watch")
        # HAMi's quotas (HamiQuota).
        | _rights("cluster", "", "resourcequotas", "list", "watch")
        | _rights("cluster", "", "services", "list", "watch")
        | _rights("cluster", "", "replicationcontrollers", "list", "watch")
        | _rights("cluster", "apps", "replicasets", "list", "watch")
        | _rights("cluster", "apps", "statefulsets", "list", "watch")
        | _rights("cluster", "", "events", "create", "patch")
        | _rights("cluster", "events.k8s.io", "events", "create", "patch")
        # VolumeBinding, VolumeZone, VolumeRestrictions, NodeVolumeLimits: watch storage;
        # bind a PV to its claim (update), name the node on a claim to provision (patch),
        # read both back while waiting for the binding (get).
        | _rights("cluster", "", "persistentvolumes", "get", "list", "watch", "update")
        | _rights("cluster", "", "persistentvolumeclaims", "get", "list", "watch", "patch")
        | _rights("cluster", "storage.k8s.io", "storageclasses", "list", "watch")
        | _rights("cluster", "storage.k8s.io", "csinodes", "list", "watch")
        | _rights("vgpu-system", "coordination.k8s.io", "leases", "create")
        | _rights("vgpu-system", "coordination.k8s.io", "leases/vgpu-scheduler", "get", "update")),
    "vgpu-webhook": (_rights("cluster", "", "nodes", "list", "watch")
                     | _rights("cluster", "", "events", "create")
                     # Which namespaces cap GPU memory; the GPU types it has seen.
                     | _rights("cluster", "", "resourcequotas", "list", "watch")
                     | _rights("vgpu-system", "", "configmaps", "list", "watch", "create")
                     | _rights("vgpu-system", "", "configmaps/vgpu-gpu-types", "get",
                               "update")),
    "vgpu-nodeagent": (
        _rights("cluster", "", "pods", "get", "list", "watch")
        # The bind-phase patch goes through pods/status (off the validating webhook).
        | _rights("cluster", "", "pods/status", "patch")
        # Its own Node's vgpu.io/isolation label (get); inventory and heartbeat (patch).
        | _rights("cluster", "", "nodes", "get", "patch")
        # Warnings on its pods (assignment mismatch, memory over grant); the watchdog's
        # evict action, through the Eviction API so budgets hold.
        | _rights("cluster", "", "events", "create")
        | _rights("cluster", "", "pods/eviction", "create")),
    "vgpu-certs": (
        _rights("vgpu-system", "", "secrets", "create")
        | _rights("vgpu-system", "", f"secrets/{certs_cli.DEFAULT_SECRET}", "get", "update")
        | _rights("cluster", "admissionregistration.k8s.io",
                  f"mutatingwebhookconfigurations/{certs_cli.DEFAULT_WEBHOOK_CONFIG}",
                  "get", "update")
        # /validate's configuration, of the same name and the same certificate.
        | _rights("cluster", "admissionregistration.k8s.io",
                  f"validatingwebhookconfigurations/{certs_cli.DEFAULT_WEBHOOK_CONFIG}",
                  "get", "update")),
}


@pytest.mark.parametrize("sa", sorted(EXPECTED_RIGHTS))
def test_each_service_account_has_exactly_its_rights(sa: str) -> None:
    assert rules_of(sa) == EXPECTED_RIGHTS[sa]


def test_no_wildcards_and_no_deletes_anywhere() -> None:
    for o in BASE:
        for rule in o.get("rules", []):
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(key, []), (o["metadata"]["name"], rule)
            assert not {"delete", "deletecollection", "escalate", "bind", "impersonate"} & \
                set(rule["verbs"]), (o["metadata"]["name"], rule)


def test_workloads_run_as_their_own_service_account() -> None:
    accounts = {f"vgpu-{c}" for c in ("scheduler", "webhook", "nodeagent", "certs")}
    for where, spec in pod_specs(BASE):
        assert spec["serviceAccountName"] in accounts, where
