"""`vgpu scheduler` on a real kube-apiserver.

The scheduler runs as the operator runs it, a `vgpu scheduler` process, against the e2e
control plane. There are no kubelets and no node agents: Nodes are plain objects carrying
an inventory and a fresh heartbeat, and :class:`tests.support.fakeagent.FakeAgents`
moves each bound pod from ``bind-phase: allocating`` to ``success`` as an agent's
Allocate would (or holds it, to keep a node's gate closed).

The control plane is shared by every e2e module and the scheduler watches the whole
cluster, so each test gives its scheduler a scheduler name of its own (only that test's
pods are its to place) and deletes its Nodes afterwards (no other test's scheduler
places pods on them).

Placement here: assignments, freed shares, pods that cannot fit and expired heartbeats.
Restarts are in ``test_scheduler_kube_restarts``, leader election in
``test_scheduler_kube_leader``; the helpers in ``scheduler_kube_support`` and the
fixtures in ``conftest.py``.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import vgpu.annotations as ann
from tests.e2e.scheduler_kube_support import (
    History,
    bound,
    check_not_overcommitted,
    delete_now,
    events_of,
    gpu_pod,
    inventory,
    our_reasons,
    pods_of,
    wait_for,
)
from tests.support.fakeagent import FakeAgents
from vgpu import builders, codecs, times
from vgpu.kube import adapter

# --- placement ---------------------------------------------------------------------------

def test_pods_are_bound_with_correct_assignments(kube: adapter.KubeCluster, namespace: str,
                                                 scheduler_name: str, nodes: Any,
                                                 launch: Any) -> None:
    t4 = nodes(2, model="Tesla T4", memory_mib=15360)
    a100 = nodes(4, model="NVIDIA A100-SXM4-40GB", memory_mib=40960)
    c = builders.container
    pods = [
        gpu_pod("two-gpus", namespace, scheduler_name, c(gpus=2, gpumem=3000, cores=30)),
        gpu_pod("on-a100", namespace, scheduler_name, c(gpumem=20000),
                annotations={ann.USE_GPUTYPE: "a100"}),
        gpu_pod("percent", namespace, scheduler_name, c(percent=50),
                annotations={ann.USE_GPUTYPE: "T4"}),
        gpu_pod("sidecars", namespace, scheduler_name, c("x", gpumem=1000, cores=10),
                c("y", gpus=1, gpumem=2000), c("log", gpus=None, cpu="100m")),
    ]
    with FakeAgents(kube, namespace):
        # Scheduled events as kube-scheduler writes them (off by default: one write less).
        sched = launch(config={"scheduler": {"perGpuMetrics": True, "scheduledEvents": True}})
        assert sched.wait_ready() == "leader"
        for p in pods:
            kube.create("pods", p)
        wait_for(lambda: len(bound(kube, namespace)) == len(pods), 30, "all pods bound",
                 sched.log)
    placed = pods_of(kube, namespace)
    gpus = {t4: inventory(kube, t4), a100: inventory(kube, a100)}
    got: dict[str, dict[str, list[tuple[str, int, int]]]] = {}
    for name, pod in placed.items():
        meta = pod["metadata"]["annotations"]
        assignment = codecs.decode_assignment(meta[ann.ASSIGNMENT])
        assert assignment.node == pod["spec"]["nodeName"]
        assert meta[ann.BIND_PHASE] == ann.PHASE_SUCCESS  # the fake agent moved it on
        bind_time = times.parse(meta[ann.BIND_TIME], ann.BIND_TIME)
        assert abs(bind_time.timestamp() - time.time()) < 60
        got[name] = {cname: [(s.uuid, s.memory_mib, s.cores) for s in slices]
                     for cname, slices in assignment.containers.items()}
        for slices in assignment.containers.values():
            assert all(s.uuid in gpus[assignment.node] for s in slices), name
        assert [e["message"] for e in events_of(kube, namespace, name, "Scheduled")] == [
            f"Successfully assigned {namespace}/{name} to {assignment.node}"]
    assert placed["on-a100"]["spec"]["nodeName"] == a100
    assert placed["percent"]["spec"]["nodeName"] == t4
    two = got["two-gpus"]["main"]
    assert len({u for u, _, _ in two}) == 2 and {(m, k) for _, m, k in two} == {(3000, 30)}
    assert [(m, k) for _, m, k in got["on-a100"]["main"]] == [(20000, 0)]
    assert [(m, k) for _, m, k in got["percent"]["main"]] == [(7680, 0)]  # 50 % of 15 GiB
    assert sorted(got["sidecars"]) == ["x", "y"]  # keyed by name; "log" asks for no GPU
    assert [(m, k) for _, m, k in got["sidecars"]["x"]] == [(1000, 10)]

    # The per-GPU gauges are the tally of the assignments, labelled like the agent's.
    usage = check_not_overcommitted(kube, namespace, [t4, a100])
    gauges = {labels["uuid"]: (labels, value)
              for labels, value in sched.samples("vgpu_scheduler_gpu_memory_allocated_bytes")
              if labels["node"] in (t4, a100)}
    assert len(gauges) == 6
    for uuid_, (labels, value) in gauges.items():
        device = gpus[labels["node"]][uuid_]
        assert (labels["index"], labels["model"]) == (str(device.index), device.model)
        assert value == usage[uuid_].memory_mib * 2**20 if uuid_ in usage else value == 0
    assert sum(sched.metric("vgpu_scheduler_gpu_tasks", node=n) for n in (t4, a100)) == sum(
        u.tasks for u in usage.values())
    for n in (t4, a100):  # the per-node sums, served with or without the per-GPU series
        assert sched.metric("vgpu_scheduler_node_gpu_memory_allocated_bytes", node=n) == sum(
            u.memory_mib for uuid_, u in usage.items() if uuid_ in gpus[n]) * 2**20
    assert sched.metric("vgpu_scheduler_schedule_attempts_total", result="scheduled") == 4
    assert sched.metric("vgpu_scheduler_bindings_total", result="success") == 4
    assert sched.metric("vgpu_scheduler_pod_create_to_bound_seconds_count") == 4
    assert sched.get("/healthz") == (200, "ok\n")
    assert sched.stop() == 0


def test_deleting_a_pod_frees_its_share_and_the_waiting_pod_binds_within_a_second(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any) -> None:
    node = nodes(1, memory_mib=16384)
    c = builders.container
    with FakeAgents(kube, namespace), History(kube, namespace) as history:
        sched = launch()
        sched.wait_ready()
        kube.create("pods", gpu_pod("big", namespace, scheduler_name, c(gpumem=12000)))
        wait_for(lambda: "big" in bound(kube, namespace), 20, "big bound", sched.log)
        kube.create("pods", gpu_pod("waiting", namespace, scheduler_name, c(gpumem=8000)))
        failed = wait_for(lambda: events_of(kube, namespace, "waiting", "FailedScheduling"),
                          20, "FailedScheduling of the waiting pod", sched.log)
        assert our_reasons(failed[0]["message"], 1) == {"insufficient GPU memory": 1}
        # A pod that has waited a while (past its first backoff), as in a real queue.
        time.sleep(1.5)
        assert "waiting" not in bound(kube, namespace)
        deleted = time.time()
        delete_now(kube, namespace, "big")
        wait_for(lambda: "waiting" in bound(kube, namespace), 10, "waiting pod bound",
                 sched.log)
    seen_bound = next(t for t, old, new in history.events
                      if new is not None and new["metadata"]["name"] == "waiting"
                      and new["spec"].get("nodeName"))
    assert seen_bound - deleted < 1.0, f"bound {seen_bound - deleted:.3f} s after the delete"
    assert bound(kube, namespace) == {"waiting": node}
    assert sched.stop() == 0


def test_an_unfittable_pod_stays_pending_with_reasons_and_few_events(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any) -> None:
    fresh = nodes(1, memory_mib=16384)
    nodes(2, memory_mib=81920, heartbeat=time.time() - 3600)  # its agent went away
    c = builders.container
    # Short backoffs, so that a few retries take a second, not a minute.
    sched = launch(config={"scheduler": {"podInitialBackoffSeconds": 0.1,
                                         "podMaxBackoffSeconds": 0.5}})
    sched.wait_ready()
    kube.create("pods", gpu_pod("huge", namespace, scheduler_name, c(gpumem=30000)))
    event = wait_for(lambda: events_of(kube, namespace, "huge", "FailedScheduling"), 20,
                     "FailedScheduling", sched.log)[0]
    assert event["type"] == "Warning"
    assert our_reasons(event["message"], 2) == {"GPU heartbeat expired": 1,
                                                "insufficient GPU memory": 1}
    assert event["source"]["component"] == "vgpu-scheduler"
    # Cluster changes that could help make the scheduler try again; the same answer is
    # not written again each time.
    for i in range(5):
        devices = builders.devices(fresh, 1, memory_mib=16384 + i + 1)
        kube.patch_annotations("nodes", fresh, {ann.NODE_GPUS: codecs.encode_inventory(
            codecs.NodeInventory(devices))})
        wait_for(lambda i=i: sched.metric("vgpu_scheduler_schedule_attempts_total",
                                          result="unschedulable") >= i + 2, 20,
                 f"retry {i + 1}", sched.log)
    assert "huge" not in bound(kube, namespace)
    assert pods_of(kube, namespace)["huge"]["status"]["phase"] == "Pending"
    assert len(events_of(kube, namespace, "huge", "FailedScheduling")) == 1
    assert sched.metric("vgpu_scheduler_events_total", outcome="limited") >= 3
    assert sched.metric("vgpu_scheduler_pending_pods", queue="unschedulable") + sched.metric(
        "vgpu_scheduler_pending_pods", queue="backoff") == 1
    assert sched.stop() == 0


def test_an_expired_heartbeat_keeps_pods_off_the_node_but_not_their_assignments(
        kube: adapter.KubeCluster, namespace: str, scheduler_name: str, nodes: Any,
        launch: Any) -> None:
    node = nodes(1, memory_mib=16384)
    c = builders.container
    with FakeAgents(kube, namespace):
        sched = launch()
        sched.wait_ready()
        kube.create("pods", gpu_pod("before", namespace, scheduler_name, c(gpumem=4000)))
        wait_for(lambda: "before" in bound(kube, namespace), 20, "first pod bound", sched.log)
        stale = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
        kube.patch_annotations("nodes", node, {ann.NODE_HEARTBEAT: codecs.encode_heartbeat(stale)})
        kube.create("pods", gpu_pod("after", namespace, scheduler_name, c(gpumem=4000)))
        event = wait_for(lambda: events_of(kube, namespace, "after", "FailedScheduling"), 20,
                         "FailedScheduling", sched.log)[0]
        assert our_reasons(event["message"], 1) == {"GPU heartbeat expired": 1}
        # The pod already there keeps its share: the scheduler still counts it.
        assert sched.metric("vgpu_scheduler_node_gpu_memory_allocated_bytes", node=node) == (
            4000 * 2**20)
        kube.patch_annotations("nodes", node, {ann.NODE_HEARTBEAT: codecs.encode_heartbeat(
            dt.datetime.now(dt.UTC))})
        wait_for(lambda: "after" in bound(kube, namespace), 20, "bound once the agent is back",
                 sched.log)
    assert sched.metric("vgpu_scheduler_node_gpu_memory_allocated_bytes", node=node) == (
        8000 * 2**20)
    check_not_overcommitted(kube, namespace, [node])
    assert sched.stop() == 0
