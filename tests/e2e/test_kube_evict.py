"""Eviction and the status subresource through the Kubernetes adapter, on a real
kube-apiserver (v1.20 serves Evictions as policy/v1beta1 only: the adapter falls back)."""

from __future__ import annotations

import pytest

from vgpu.cluster.port import Obj
from vgpu.errors import EvictionRefusedError, NotFoundError
from vgpu.kube import adapter


def pod(name: str, namespace: str, **labels: str) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"automountServiceAccountToken": False,
                     "containers": [{"name": "main", "image": "busybox"}]}}


def test_eviction_deletes_unless_a_budget_forbids(kube: adapter.KubeCluster,
                                                  namespace: str) -> None:
    kube.create("pods", pod("free", namespace))
    kube.create("pods", pod("guarded", namespace, app="web"))
    # A pending pod, or a running one that is not ready while its budget is met, is
    # evicted whatever the budget says (it serves nothing): make it running and ready.
    kube.patch_status("pods", "guarded", {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}, namespace)
    # No disruption controller runs here, so the budget's status is set by hand: 0.
    base = f"/apis/policy/v1beta1/namespaces/{namespace}/poddisruptionbudgets"
    kube.request_json("POST", base, "create pdb", body={
        "apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    budget = kube.request_json("GET", f"{base}/web", "get pdb")
    budget["status"] = {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
                        "expectedPods": 1, "observedGeneration": 1}
    kube.request_json("PUT", f"{base}/web/status", "pdb status", body=budget)

    kube.evict(namespace, "free")
    with pytest.raises(NotFoundError):
        kube.get("pods", "free", namespace)
    with pytest.raises(EvictionRefusedError):
        kube.evict(namespace, "guarded")
    assert kube.get("pods", "guarded", namespace)
    with pytest.raises(NotFoundError):
        kube.evict(namespace, "nobody")


def test_status_patches_merge(kube: adapter.KubeCluster, namespace: str) -> None:
    kube.create("pods", pod("p", namespace))
    patched = kube.patch_status("pods", "p", {"nominatedNodeName": "node-7"}, namespace)
    assert patched["status"]["nominatedNodeName"] == "node-7"
    kube.patch_status("pods", "p", {"nominatedNodeName": None}, namespace)
    assert "nominatedNodeName" not in (kube.get("pods", "p", namespace).get("status") or {})
