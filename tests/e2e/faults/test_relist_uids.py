"""A relist after a 410 keeps no replaced pod's room (issue 50, case 1).

16 pods of 4000 MiB fill one node's four GPUs. The scheduler's watches are cut (the fault
proxy drops them); meanwhile four bound pods are deleted and created again under their
names, as a StatefulSet does, two more are deleted and two added; etcd is compacted, so
when the watches come back the API server answers 410 and the informers list again.
Afterwards the scheduler's per-GPU accounting must equal a fresh tally from the API
server's pods, and the six pending pods fill the six slots the deleted ones left.

A control plane of its own, with ``--watch-cache=false``: the session's serves every watch
from its cache, which never answers 410 (tests/controlplane/README.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.e2e.faults.conftest import start_proxy
from tests.e2e.faults.proxy import FaultProxy
from tests.e2e.faults.rules import Action, Fault, Request
from tests.e2e.faults.tally import fresh_tally, scheduler_view
from tests.e2e.scheduler_kube_support import (
    TEST_LABEL,
    SchedulerProcess,
    bound,
    check_not_overcommitted,
    delete_now,
    gpu_pod,
    wait_for,
)
from tests.support.fakeagent import FakeAgents
from vgpu import builders
from vgpu.cluster.port import Selector
from vgpu.kube import adapter

NAMESPACE = "relist"
SCHEDULER = "vgpu-relist"
GPUS = 4


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with ControlPlane(extra_apiserver_args=["--watch-cache=false"]) as cp:
        cp.ensure_namespace(NAMESPACE)
        yield cp


def cut_watches(request: Request) -> Fault | None:
    return Fault(Action.DROP) if request.watch else None


def test_a_relist_after_410_forgets_pods_replaced_in_the_gap(
        plane: ControlPlane, tmp_path: Path) -> None:
    kube = adapter.connect(str(plane.kubeconfig), qps=0, pool_size=16)
    assert kube is not None
    proxy, kubeconfig = start_proxy(plane, tmp_path)
    node = "relist-node"
    kube.create("nodes", builders.node(node, builders.devices(node, GPUS, memory_mib=16000),
                                       heartbeat=time.time(), labels={TEST_LABEL: NAMESPACE}))
    sched: SchedulerProcess | None = None
    try:
        with FakeAgents(kube, NAMESPACE):
            sched = SchedulerProcess(plane, tmp_path, SCHEDULER, kubeconfig=kubeconfig,
                                     config={"scheduler": {"perGpuMetrics": True}})
            sched.wait_ready(60)
            scenario(plane, kube, proxy, sched, node)
    finally:
        if sched is not None:
            sched.stop()
        proxy.stop()


def scenario(plane: ControlPlane, kube: adapter.KubeCluster, proxy: FaultProxy,
             sched: SchedulerProcess, node: str) -> None:
    c = builders.container
    for i in range(16):
        kube.create("pods", gpu_pod(f"p{i}", NAMESPACE, SCHEDULER, c(gpumem=4000, cores=10)))
    wait_for(lambda: len(bound(kube, NAMESPACE)) == 16, 90, "16 pods bound", sched.log)
    uuids = {f"GPU-{node}-{i}" for i in range(GPUS)}
    agree(kube, sched, uuids, "before the cut")

    proxy.rules.append(cut_watches)
    # Each watch ends within its timeout (10 s) and comes back to be dropped.
    cut_at = time.time()
    wait_for(lambda: cut(proxy, cut_at, "/pods") and cut(proxy, cut_at, "/nodes"), 40,
             "the scheduler's pod and node watches cut", sched.log)
    for i in range(4):  # a StatefulSet's pods, deleted and created again
        delete_now(kube, NAMESPACE, f"p{i}")
        kube.create("pods", gpu_pod(f"p{i}", NAMESPACE, SCHEDULER, c(gpumem=4000, cores=10)))
    for i in (4, 5):
        delete_now(kube, NAMESPACE, f"p{i}")
    for i in (16, 17):
        kube.create("pods", gpu_pod(f"p{i}", NAMESPACE, SCHEDULER, c(gpumem=4000, cores=10)))
    plane.etcd_compact()
    proxy.rules.remove(cut_watches)

    wait_for(lambda: "watch expired, re-listing" in sched.log.read_text(), 60,
             "the scheduler re-listed after a 410", sched.log)
    agree(kube, sched, uuids, "after the re-list")
    wait_for(lambda: len(bound(kube, NAMESPACE)) == 16, 60,
             "the re-created and added pods placed in the room the deleted ones left",
             sched.log)
    agree(kube, sched, uuids, "once the pending pods were placed")
    check_not_overcommitted(kube, NAMESPACE, [node])
    # The re-list itself got it right: the reconciler found nothing to repair.
    assert sched.metric("vgpu_scheduler_cache_drift_total") == 0, sched.log.read_text()[-3000:]


def cut(proxy: FaultProxy, since: float, kind: str) -> bool:
    return any(e.action is Action.DROP and e.at >= since and kind in e.target.partition("?")[0]
               for e in proxy.log)


def agree(kube: adapter.KubeCluster, sched: SchedulerProcess, uuids: set[str],
          when: str) -> None:
    """The scheduler's per-GPU accounting equals a fresh tally (the metric is read when it
    has caught up: the watch may lag the API server by an event)."""
    seen: list[object] = []

    def same() -> bool:
        _, text = sched.get("/metrics")
        pods = kube.list("pods", Selector(namespace=NAMESPACE)).items
        seen[:] = [scheduler_view(text, uuids), fresh_tally(pods, {SCHEDULER}, uuids)]
        return seen[0] == seen[1]

    deadline = time.monotonic() + 30
    while not same():
        assert time.monotonic() < deadline, (
            f"{when}: the scheduler counts {seen[0]}, the API server's pods hold {seen[1]}\n"
            f"{sched.log.read_text()[-3000:]}")
        time.sleep(0.5)
