"""Writes as the scheduler and the node agent make them: bindings and stale updates.

A ``pods/binding`` POST sets ``nodeName`` and copies the Binding's annotations in one
write, a second binding is a conflict, and a merge patch carrying a stale
``resourceVersion`` is refused. Pinned against Kubernetes 1.20.2, like every
``test_controlplane*`` module.
"""

from __future__ import annotations

import json

import pytest
from kubernetes.client import ApiException, CoreV1Api, V1Binding, V1ObjectMeta, V1ObjectReference

from tests.e2e.controlplane_support import bind, gpu_pod, unique

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
