"""kube-scheduler and the derived quota requests (``vgpu.io/memory-mib``, ...).

No node advertises them. kube-scheduler's NodeResourcesFit counts every extended resource
a pod requests, so a pod carrying them fits no node, unless its profile ignores the
``vgpu.io`` group (``ignoredResourceGroups``), as docs/quotas.md tells operators whose
kube-scheduler sees such pods. Pinned against kube-scheduler v1.20.2 (v1beta1 config).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.kube_scheduler import KubeScheduler
from tests.e2e.harness_processes import wait_until
from tests.e2e.scheduler_kube_support import TEST_LABEL
from tests.support.kubelet_node import NodeKubelet
from vgpu.cluster.port import Obj, Selector
from vgpu.kube import adapter
from vgpu.quota_charge import Charge

IGNORE_VGPU = {"pluginConfig": [{"name": "NodeResourcesFit",
                                 "args": {"ignoredResourceGroups": ["vgpu.io"]}}]}


@pytest.fixture
def ready_node(kube: adapter.KubeCluster, namespace: str) -> Iterator[str]:
    node = NodeKubelet(kube, f"kq-{uuid.uuid4().hex[:8]}", labels={TEST_LABEL: namespace},
                       cpu="4", memory="8Gi")
    node.start()
    yield node.name
    node.stop(delete_node=True)


def charged_pod(name: str, scheduler: str, namespace: str) -> dict[str, Any]:
    derived = Charge(vgpus=1, memory_mib=4000, cores=20).resources()
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedulerName": scheduler, "automountServiceAccountToken": False,
                     "nodeSelector": {TEST_LABEL: namespace},
                     "containers": [{"name": "main", "image": "busybox", "resources": {
                         "requests": {"cpu": "100m", **derived}, "limits": derived}}]}}


def failed_scheduling(kube: adapter.KubeCluster, namespace: str, name: str) -> list[str]:
    return [e["message"] for e in kube.list("events", Selector(namespace=namespace)).items
            if e["involvedObject"]["name"] == name and e["reason"] == "FailedScheduling"]


def test_a_default_profile_finds_no_node_for_the_derived_names(
        control_plane: ControlPlane, kube: adapter.KubeCluster, namespace: str,
        ready_node: str) -> None:
    with KubeScheduler(control_plane, scheduler_name=f"kq-{namespace}"[:63]) as ks:
        kube.create("pods", charged_pod("charged", ks.scheduler_name, namespace))
        (message, *_) = wait_until("kube-scheduler refused the pod",
                                   lambda: failed_scheduling(kube, namespace, "charged"), 30,
                                   context=ks.log_tail)
    assert re.search(r"Insufficient vgpu\.io/(memory-mib|vgpus|cores)", message), message
    assert not kube.get("pods", "charged", namespace)["spec"].get("nodeName")


def test_ignored_resource_groups_lets_kube_scheduler_place_them(
        control_plane: ControlPlane, kube: adapter.KubeCluster, namespace: str,
        ready_node: str) -> None:
    with KubeScheduler(control_plane, scheduler_name=f"kq-{namespace}"[:63],
                       profile=IGNORE_VGPU) as ks:
        kube.create("pods", charged_pod("charged", ks.scheduler_name, namespace))

        def running() -> Obj | None:
            pod = kube.get("pods", "charged", namespace)
            return pod if (pod.get("status") or {}).get("phase") == "Running" else None

        pod = wait_until("kube-scheduler bound the pod and the node runs it", running, 30,
                         context=ks.log_tail)
    assert pod["spec"]["nodeName"] == ready_node
