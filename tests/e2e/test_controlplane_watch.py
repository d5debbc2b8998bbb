"""Watches as the informers use them: resuming from a resourceVersion, and 410 Gone.

A watch replays what came after the version it starts from; after etcd compaction an old
version is 410 Gone (on a control plane of its own without the watch cache, or by an
exact list on the shared one). Pinned against Kubernetes 1.20.2.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kubernetes.client import ApiException, CoreV1Api

from tests.controlplane.cluster import ControlPlane
from tests.e2e.controlplane_support import gpu_pod, unique, watch_pods


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
