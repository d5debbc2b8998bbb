"""kube-scheduler v1.20.2 on the test control plane (tests/controlplane/kube_scheduler.py).

A smoke test of the reference scheduler that parity and speed comparisons run beside
vgpu-scheduler: it binds a plain pod to a Ready node (the kubelet stand-in, which then
runs it), explains a pod that fits nowhere kube-scheduler's way, and counts both in its
metrics. Its profile has a name of this test's own, so it never binds another test's pods.
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


@pytest.fixture
def kube_scheduler(control_plane: ControlPlane, namespace: str) -> Iterator[KubeScheduler]:
    with KubeScheduler(control_plane, scheduler_name=f"kube-{namespace}"[:63]) as running:
        yield running


@pytest.fixture
def ready_node(kube: adapter.KubeCluster, namespace: str) -> Iterator[str]:
    node = NodeKubelet(kube, f"ks-{uuid.uuid4().hex[:8]}", labels={TEST_LABEL: namespace},
                       cpu="4", memory="8Gi")
    node.start()
    yield node.name
    node.stop(delete_node=True)


def plain_pod(name: str, scheduler: str, namespace: str, **selector: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": scheduler, "automountServiceAccountToken": False,
                     "nodeSelector": {TEST_LABEL: namespace, **selector},
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "100m",
                                                                "memory": "64Mi"}}}]}}


def events(kube: adapter.KubeCluster, namespace: str, name: str) -> list[Obj]:
    answer = kube.request_json("GET", f"/api/v1/namespaces/{namespace}/events", "events",
                               query=[("fieldSelector", f"involvedObject.name={name}")])
    items: list[Obj] = answer.get("items") or []
    return items


def attempts(ks: KubeScheduler, result: str) -> float:
    found = re.search(rf'^scheduler_schedule_attempts_total\{{profile="{ks.scheduler_name}",'
                      rf'result="{result}"\}} (\S+)$', ks.metrics(), re.M)
    return float(found.group(1)) if found else 0.0


def test_kube_scheduler_binds_a_plain_pod_to_a_ready_node(
        kube: adapter.KubeCluster, namespace: str, kube_scheduler: KubeScheduler,
        ready_node: str) -> None:
    ks = kube_scheduler
    kube.create("pods", {**plain_pod("fits", ks.scheduler_name, namespace),
                         "metadata": {"name": "fits", "namespace": namespace}})
    kube.create("pods", {**plain_pod("nowhere", ks.scheduler_name, namespace, zone="none"),
                         "metadata": {"name": "nowhere", "namespace": namespace}})

    def pod(name: str) -> Obj:
        return kube.get("pods", name, namespace)

    running = wait_until("kube-scheduler bound the pod and the node runs it",
                         lambda: pod("fits") if pod("fits")["status"].get("phase") == "Running"
                         else None, 30, context=ks.log_tail)
    assert running["spec"]["nodeName"] == ready_node
    (scheduled,) = [e for e in events(kube, namespace, "fits") if e["reason"] == "Scheduled"]
    assert scheduled["reportingComponent"] == ks.scheduler_name  # events.k8s.io/v1
    assert f"to {ready_node}" in scheduled["message"]

    failed = wait_until("kube-scheduler explained the pod that fits nowhere",
                        lambda: [e for e in events(kube, namespace, "nowhere")
                                 if e["reason"] == "FailedScheduling"], 30,
                        context=ks.log_tail)
    # 1.20's wording: nodeSelector is checked by the NodeAffinity plugin.
    assert re.match(r"0/\d+ nodes are available: .*node\(s\) didn't match Pod's node affinity",
                    failed[0]["message"]), failed[0]["message"]
    assert not pod("nowhere")["spec"].get("nodeName")
    assert attempts(ks, "scheduled") == 1
    assert attempts(ks, "unschedulable") >= 1
    assert {p["metadata"]["name"] for p in kube.list("pods", Selector(namespace=namespace)).items
            if p["spec"].get("nodeName")} == {"fits"}
