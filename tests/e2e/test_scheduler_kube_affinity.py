"""Pod affinity and topology spread with `vgpu scheduler` on the real (v1.20) API server:
the objects as it stores and serves them (affinity terms, spread constraints, Services,
ReplicaSets as owners), read through the informers the two plugins use.

The kube-scheduler differential suite compares outcomes with kube-scheduler's; these
tests only check that the plugins see what the server holds.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import Counter
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
from tests.support.fakeagent import FakeAgents
from vgpu import builders
from vgpu.cluster.port import Obj
from vgpu.kube import adapter

ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def zoned(kube: adapter.KubeCluster, namespace: str) -> Iterator[list[str]]:
    """Four GPU nodes of this test in two zones."""
    names = [f"n-{uuid.uuid4().hex[:8]}" for _ in range(4)]
    for i, name in enumerate(names):
        kube.create("nodes", builders.node(name, builders.devices(name, 4), heartbeat=time.time(),
                                           labels={TEST_LABEL: namespace, ZONE: f"z{i % 2}"}))
    yield names
    for name in names:
        with contextlib.suppress(Exception):
            kube.delete("nodes", name)


def replica(name: str, namespace: str, scheduler_name: str, app: str, **spec: Any) -> Obj:
    obj = gpu_pod(name, namespace, scheduler_name)
    obj["metadata"]["labels"] = {"app": app}
    obj["spec"].update(spec)
    return obj


def test_anti_affinity_and_hard_spread_on_the_real_server(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, zoned: list[str],
        launch: Any) -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "kubernetes.io/hostname"}]}}
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "db"}}}]
    with FakeAgents(kube, namespace):
        sched = launch()
        sched.wait_ready()
        for i in range(5):
            kube.create("pods", replica(f"web-{i}", namespace, scheduler_name, "web",
                                        affinity=anti))
        for i in range(4):
            kube.create("pods", replica(f"db-{i}", namespace, scheduler_name, "db",
                                        topologySpreadConstraints=spread))
        wait_for(lambda: len(bound(kube, namespace)) == 8, 30, "8 pods bound", sched.log)
        pending = next(f"web-{i}" for i in range(5) if f"web-{i}" not in bound(kube, namespace))
        failed = wait_for(lambda: events_of(kube, namespace, pending, "FailedScheduling"), 20,
                          "FailedScheduling of the fifth replica", sched.log)
    placed = bound(kube, namespace)
    assert len({placed[f"web-{i}"] for i in range(5) if f"web-{i}" in placed}) == 4
    zone = {name: f"z{i % 2}" for i, name in enumerate(zoned)}
    assert Counter(zone[placed[f"db-{i}"]] for i in range(4)) == {"z0": 2, "z1": 2}
    assert our_reasons(failed[-1]["message"], 4) == {
        "node(s) didn't match pod anti-affinity rules": 4}
    assert sched.stop() == 0


def test_default_spread_from_a_service_and_a_replicaset(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, zoned: list[str],
        launch: Any) -> None:
    kube.create("services", {"metadata": {"name": "web", "namespace": namespace},
                             "spec": {"clusterIP": "None", "ports": [{"port": 80}],
                                      "selector": {"app": "web"}}})
    template = {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    rs = kube.create("replicasets", {"metadata": {"name": "web", "namespace": namespace},
                                     "spec": {"replicas": 0, "template": template,
                                              "selector": {"matchLabels": {"app": "web"}}}})
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
             "uid": rs["metadata"]["uid"], "controller": True}
    with FakeAgents(kube, namespace):
        sched = launch()
        sched.wait_ready()
        for i in range(4):
            pod = replica(f"web-{i}", namespace, scheduler_name, "web")
            pod["metadata"]["ownerReferences"] = [owner]
            kube.create("pods", pod)
            wait_for(lambda i=i: f"web-{i}" in bound(kube, namespace), 20, f"web-{i} bound",
                     sched.log)
    # kube's system default constraints (ScheduleAnyway, hostname and zone) spread the
    # replicas where the bin-packing GPU policy alone would stack them on one node.
    assert len(set(bound(kube, namespace).values())) == 4
    assert sched.stop() == 0
