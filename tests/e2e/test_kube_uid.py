"""Writes that name a pod's uid, through the Kubernetes adapter on the real kube-apiserver
(v1.20.2, as every test here): an eviction's ``preconditions.uid`` and a patch's
``metadata.uid`` refuse a successor of the name; a Binding's ``metadata.uid`` does not on
this version (servers check it from 1.23, kubernetes#105913; it regressed in 1.25 and was
fixed again by #116550), which the in-memory cluster models with ``binding_checks_uid``."""

from __future__ import annotations

import pytest

from vgpu.cluster.port import Obj
from vgpu.errors import ConflictError
from vgpu.kube import adapter


def pod(name: str, namespace: str) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"automountServiceAccountToken": False,
                     "containers": [{"name": "main", "image": "busybox"}]}}


def replaced(kube: adapter.KubeCluster, namespace: str) -> tuple[str, str]:
    """A pod ``p`` deleted and created again: (the first uid, the second)."""
    first = kube.create("pods", pod("p", namespace))["metadata"]["uid"]
    kube.delete("pods", "p", namespace)  # pending: gone at once
    second = kube.create("pods", pod("p", namespace))["metadata"]["uid"]
    return first, second


def test_an_eviction_or_a_patch_for_a_predecessor_leaves_the_successor(
        kube: adapter.KubeCluster, namespace: str) -> None:
    first, second = replaced(kube, namespace)
    with pytest.raises(ConflictError, match="UID in the precondition"):
        kube.evict(namespace, "p", uid=first)
    with pytest.raises(ConflictError, match=f"not the object of uid {first}"):
        kube.patch_annotations("pods", "p", {"vgpu.io/bind-phase": "success"}, namespace,
                               uid=first)
    got = kube.get("pods", "p", namespace)
    assert got["metadata"]["uid"] == second
    assert "vgpu.io/bind-phase" not in (got["metadata"].get("annotations") or {})
    kube.patch_annotations("pods", "p", {"vgpu.io/bind-phase": "success"}, namespace,
                           uid=second)
    kube.evict(namespace, "p", uid=second)


def test_a_binding_for_a_predecessor_binds_the_successor_on_1_20(
        kube: adapter.KubeCluster, namespace: str) -> None:
    first, second = replaced(kube, namespace)
    kube.bind(namespace, "p", "n1", {}, uid=first)  # 1.20 ignores the Binding's uid
    got = kube.get("pods", "p", namespace)
    assert (got["metadata"]["uid"], got["spec"]["nodeName"]) == (second, "n1")
