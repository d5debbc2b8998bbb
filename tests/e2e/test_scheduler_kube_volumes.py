"""`vgpu scheduler` and PersistentVolumeClaims on a real kube-apiserver (v1.20).

No controller-manager and no CSI provisioner run on the e2e control plane, so the test
plays both (:class:`tests.support.volumes.FakeProvisioner`): when the scheduler names a
node on a WaitForFirstConsumer claim, it creates a PV in that node's zone and binds PV and
claim. The scheduler must then bind the pod only after the claim is bound, to a node of a
zone the class allows; and a claim already bound to a zonal PV must take its pod to that
zone. (ReadWriteOncePod does not exist in 1.20: it is tested on the in-memory cluster.)
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.scheduler_kube_support import (
    TEST_LABEL,
    bound,
    events_of,
    gpu_pod,
    our_reasons,
    wait_for,
)
from tests.support import volumes as vol
from tests.support.fakeagent import FakeAgents
from vgpu import builders
from vgpu.cluster.port import Obj
from vgpu.kube import adapter
from vgpu_scheduler.plugins.helper.volume_objects import BIND_COMPLETED, SELECTED_NODE

ZONE = vol.ZONE
FAST = {"scheduler": {"volumeBindPollSeconds": 0.1, "podInitialBackoffSeconds": 0.1,
                      "podMaxBackoffSeconds": 1}}


class Made:
    """The cluster-scoped objects a test makes (GPU nodes of its own in a zone, classes,
    PVs), deleted after it."""

    def __init__(self, kube: adapter.KubeCluster, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.objects: list[tuple[Any, str]] = []

    def node(self, zone: str) -> str:
        name = f"n-{zone}-{uuid.uuid4().hex[:6]}"
        self.kube.create("nodes", builders.node(
            name, builders.devices(name, 2), heartbeat=time.time(),
            labels={TEST_LABEL: self.namespace, ZONE: zone}))
        return self.keep("nodes", name)

    def keep(self, kind: Any, name: str) -> str:
        self.objects.append((kind, name))
        return name


@pytest.fixture
def made(kube: adapter.KubeCluster, namespace: str) -> Iterator[Made]:
    out = Made(kube, namespace)
    yield out
    for kind, name in reversed(out.objects):
        with contextlib.suppress(Exception):
            kube.delete(kind, name)


def volume_pod(name: str, namespace: str, scheduler: str, claim: str) -> Obj:
    obj = gpu_pod(name, namespace, scheduler, builders.container(gpumem=1000))
    obj["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return obj


def claim_of(kube: adapter.KubeCluster, namespace: str, name: str) -> Obj:
    claim: Obj = kube.get("persistentvolumeclaims", name, namespace)
    return claim


def test_a_wait_for_first_consumer_claim_is_provisioned_in_an_allowed_zone(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, made: Made,
        launch: Any) -> None:
    node_a, node_b = made.node("a"), made.node("b")
    zone_of = {node_a: "a", node_b: "b"}
    cls = f"wait-{namespace}"[:63]
    kube.create("storageclasses", vol.storage_class(cls, topologies=[{ZONE: ["b"]}]))
    made.keep("storageclasses", cls)
    kube.create("persistentvolumeclaims", vol.pvc("data", cls, namespace=namespace))
    sched = launch(config=FAST)
    assert sched.wait_ready() == "leader"
    kube.create("pods", volume_pod("p", namespace, scheduler_name, "data"))
    # The scheduler names the node on the claim, and waits: no pod binding yet.
    wait_for(lambda: SELECTED_NODE in (claim_of(kube, namespace, "data")["metadata"]
                                       .get("annotations") or {}), 30,
             "the scheduler to name a node on the claim", sched.log)
    time.sleep(1)
    assert bound(kube, namespace) == {}
    assert claim_of(kube, namespace, "data")["metadata"]["annotations"][
        SELECTED_NODE] == node_b
    provisioner = vol.FakeProvisioner(kube, namespace,
                                      topology=lambda node: {ZONE: [zone_of[node]]},
                                      period=0.1)
    with provisioner, FakeAgents(kube, namespace):
        wait_for(lambda: bound(kube, namespace), 30, "the pod bound", sched.log)
    for name in provisioner.provisioned.values():
        made.keep("persistentvolumes", name)
    assert bound(kube, namespace) == {"p": node_b}
    claim = claim_of(kube, namespace, "data")
    assert claim["spec"]["volumeName"] == provisioner.provisioned["data"]
    assert BIND_COMPLETED in claim["metadata"]["annotations"]
    pv = kube.get("persistentvolumes", claim["spec"]["volumeName"])
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0][
        "matchExpressions"][0]["values"] == ["b"]


def test_a_claim_bound_to_a_zonal_volume_takes_its_pod_to_that_zone(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, made: Made,
        launch: Any) -> None:
    node_a = made.node("a")
    made.node("b")
    made.node("c")
    cls = f"disk-{namespace}"[:63]
    kube.create("storageclasses", vol.storage_class(cls))
    made.keep("storageclasses", cls)
    pv_name = f"zonal-{namespace}"[:63]
    claim = kube.create("persistentvolumeclaims", vol.pvc(
        "data", cls, namespace=namespace, volume=pv_name, bound=True))
    kube.create("persistentvolumes", vol.pv(pv_name, cls, on={ZONE: ["a"]},
                                            labels={ZONE: "a"}, phase=None, claim=claim,
                                            csi=(vol.PROVISIONER, pv_name)))
    made.keep("persistentvolumes", pv_name)
    with FakeAgents(kube, namespace):
        sched = launch(config=FAST)
        assert sched.wait_ready() == "leader"
        kube.create("pods", volume_pod("p", namespace, scheduler_name, "data"))
        wait_for(lambda: bound(kube, namespace), 30, "the pod bound", sched.log)
        # A pod that may only go to zone b cannot have the volume, and is told why.
        elsewhere = volume_pod("q", namespace, scheduler_name, "data")
        elsewhere["spec"]["nodeSelector"][ZONE] = "b"
        kube.create("pods", elsewhere)
        event = wait_for(lambda: events_of(kube, namespace, "q", "FailedScheduling"), 30,
                         "q refused", sched.log)
    assert bound(kube, namespace) == {"p": node_a}
    # Zones a and c are turned away by the selector (counted with other tests' nodes).
    assert our_reasons(event[0]["message"], 1) == {
        "node(s) had volume node affinity conflict": 1}


def test_a_local_volume_is_bound_to_its_claim_and_the_pod_follows_it(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, made: Made,
        launch: Any) -> None:
    empty, disks = made.node("a"), made.node("a")
    cls = f"local-{namespace}"[:63]
    kube.create("storageclasses", vol.storage_class(
        cls, provisioner="kubernetes.io/no-provisioner"))
    made.keep("storageclasses", cls)
    # Two local volumes on one node: the claim gets the smallest that fits.
    for size in ("100Gi", "20Gi", "5Gi"):
        name = f"local-{size.lower()}-{namespace}"[:63]
        kube.create("persistentvolumes", vol.pv(name, cls, capacity=size, phase=None,
                                                on={vol.HOSTNAME: [disks]}))
        made.keep("persistentvolumes", name)
        # No PV controller makes it Available: the test does.
        kube.patch_status("persistentvolumes", name, {"phase": "Available"})
    kube.create("persistentvolumeclaims", vol.pvc("data", cls, request="10Gi",
                                                  namespace=namespace))
    with vol.FakeProvisioner(kube, namespace, period=0.1) as controller, \
            FakeAgents(kube, namespace):
        sched = launch(config=FAST)
        assert sched.wait_ready() == "leader"
        kube.create("pods", volume_pod("p", namespace, scheduler_name, "data"))
        wait_for(lambda: bound(kube, namespace), 30, "the pod bound", sched.log)
    assert bound(kube, namespace) == {"p": disks} and empty != disks
    assert controller.provisioned == {}
    claim = claim_of(kube, namespace, "data")
    chosen = f"local-20gi-{namespace}"[:63]
    assert claim["spec"]["volumeName"] == chosen
    pv = kube.get("persistentvolumes", chosen)
    assert pv["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
