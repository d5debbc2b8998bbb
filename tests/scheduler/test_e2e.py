"""The whole scheduler on the in-memory cluster: watch, decide, bind, events.

Where pods land and what the scheduler reports when they cannot: assignments, events,
stale heartbeats, CPU, other schedulers' pods, node policies, the threaded run. The
permit gate, restarts and failed bindings are in ``test_e2e_binding``.
"""

from __future__ import annotations

import threading
import time

import pytest

import vgpu.annotations as ann
from tests.scheduler.e2e_support import allocated, annotations, gpu_node, node_of, setup
from tests.scheduler.helpers import FakeClock
from vgpu import builders, codecs, times
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config, SchedulerConfig
from vgpu_scheduler.host.scheduler import Scheduler


def test_pods_are_placed_with_decodable_assignments() -> None:
    sched, cluster, clock = setup([gpu_node("n1", 2), gpu_node("n2", 2)])
    cluster.create("pods", builders.pod("a", [builders.container(gpus=2, gpumem=4000, cores=30)]))
    sched.run_until_idle()
    allocated(cluster, "a")
    cluster.create("pods", builders.pod("b", [builders.container("x", gpus=1, percent=50),
                                           builders.container("y", gpus=1, gpumem=1000)]))
    sched.run_until_idle()
    for name, containers in (("a", {"main": 2}), ("b", {"x": 1, "y": 1})):
        node = node_of(cluster, name)
        assert node in ("n1", "n2")
        meta = annotations(cluster, name)
        assignment = codecs.decode_assignment(meta[ann.ASSIGNMENT])
        assert assignment.node == node
        assert {c: len(g) for c, g in assignment.containers.items()} == containers
        assert all(g.uuid.startswith(f"GPU-{node}-") for gs in assignment.containers.values()
                   for g in gs)
        assert meta[ann.BIND_PHASE] in (ann.PHASE_ALLOCATING, ann.PHASE_SUCCESS)
        assert times.parse(meta[ann.BIND_TIME], ann.BIND_TIME).timestamp() == clock.now
    b = codecs.decode_assignment(annotations(cluster, "b")[ann.ASSIGNMENT])
    assert b.containers["x"][0].memory_mib == 8192  # 50 % of a 16 GiB GPU
    a = codecs.decode_assignment(annotations(cluster, "a")[ann.ASSIGNMENT])
    assert {g.cores for g in a.containers["main"]} == {30}
    # The Binding carries where and when (spec.nodeName, vgpu.io/bind-time): no Scheduled
    # event, one API write less a pod (scheduler.scheduledEvents turns it on).
    assert [e.reason for e in cluster.events(name="a")] == []


def test_deletion_wakes_a_pending_pod_at_once() -> None:
    sched, cluster, clock = setup([gpu_node("n1", 1)])
    cluster.create("pods", builders.pod("big", [builders.container(gpumem=12000)]))
    sched.run_until_idle()
    allocated(cluster, "big")
    cluster.create("pods", builders.pod("next", [builders.container(gpumem=12000)]))
    sched.run_until_idle()
    assert node_of(cluster, "next") is None
    assert sched.queue.counts()["unschedulable"] == 1
    clock.advance(5)  # well past its backoff, far from the 300 s unschedulable flush
    sched.run_until_idle()
    assert node_of(cluster, "next") is None
    cluster.delete("pods", "big", "default")
    sched.run_until_idle()
    assert node_of(cluster, "next") == "n1"


def test_unschedulable_pod_gets_a_failed_scheduling_event_with_the_summary() -> None:
    nodes = [gpu_node(f"t4-{i}", 1) for i in range(3)] + [
        gpu_node("a100", 1, memory_mib=40960, model="NVIDIA A100-SXM4-40GB")]
    sched, cluster, _ = setup(nodes)
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=20000)],
                                     annotations={ann.NOUSE_GPUTYPE: "A100"}))
    sched.run_until_idle()
    events = cluster.events(name="p", reason="FailedScheduling")
    assert [e.message for e in events] == [
        "0/4 nodes are available: 3 insufficient GPU memory, 1 GPU type excluded. "
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."]
    assert events[0].type == "Warning"


def test_pod_spec_errors_are_reported_and_not_retried_on_cluster_events() -> None:
    sched, cluster, clock = setup([gpu_node("n1", 1)])
    cluster.create("pods", builders.pod(
        "bad", [builders.container(gpus=1, percent=150)]))
    sched.run_until_idle()
    [event] = cluster.events(name="bad")
    assert "between 0 and 100" in event.message
    clock.advance(5)
    cluster.create("nodes", gpu_node("n2", 1))
    assert sched.run_until_idle() == 0


def test_stale_heartbeat_nodes_are_skipped_until_refreshed() -> None:
    clock = FakeClock()
    expiry = Config().node_heartbeat_expiry_seconds
    stale = gpu_node("old", 1, heartbeat=clock.now - expiry - 1)
    sched, cluster, clock = setup([stale])
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=1000)]))
    sched.run_until_idle()
    assert node_of(cluster, "p") is None
    assert "GPU heartbeat expired" in cluster.events(name="p")[0].message
    clock.advance(5)
    cluster.replace("nodes", gpu_node("old", 1, heartbeat=clock.now))
    sched.run_until_idle()
    assert node_of(cluster, "p") == "old"


def test_every_pod_on_a_node_counts_for_cpu() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 1, cpu="4")])
    other = builders.pod("other", [builders.container(gpus=None, cpu="3")],
                      scheduler_name="default-scheduler")
    other["spec"]["nodeName"] = "n1"
    cluster.create("pods", other)
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=100, cpu="2")]))
    sched.run_until_idle()
    assert node_of(cluster, "p") is None
    assert "Insufficient cpu" in cluster.events(name="p")[0].message


def test_non_gpu_pods_and_other_schedulers() -> None:
    sched, cluster, _ = setup([builders.node("cpu-only", cpu="8")])
    cluster.create("pods", builders.pod("cpu", [builders.container(gpus=None, cpu="1")]))
    cluster.create("pods", builders.pod("theirs", scheduler_name="default-scheduler"))
    cluster.create("pods", builders.pod("gpu", [builders.container(gpumem=10)]))
    sched.run_until_idle()
    assert node_of(cluster, "cpu") == "cpu-only"
    assert node_of(cluster, "theirs") is None and not cluster.events(name="theirs")
    assert cluster.events(name="gpu")[0].message == (
        "0/1 nodes are available: 1 no vGPU inventory. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")


def test_threaded_run_places_pods_and_stops() -> None:
    cluster = MemoryCluster()
    cluster.create("nodes", gpu_node("n1", 2, heartbeat=time.time()))
    config = Config(scheduler=SchedulerConfig(bind_workers=2))
    sched = Scheduler(config, cluster)
    stop = threading.Event()
    thread = threading.Thread(target=sched.run, args=(stop,), kwargs={"watch_timeout": 0.2})
    thread.start()
    try:
        cluster.create("pods", builders.pod("a", [builders.container(gpumem=100)]))
        deadline = time.monotonic() + 10
        while node_of(cluster, "a") is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert node_of(cluster, "a") == "n1"
        cluster.create("pods", builders.pod("b", [builders.container(gpumem=100)]))
        time.sleep(0.1)
        allocated(cluster, "a")
        while node_of(cluster, "b") is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert node_of(cluster, "b") == "n1"
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()


@pytest.mark.parametrize("policy", ["binpack", "spread"])
def test_node_policy_by_annotation(policy: str) -> None:
    sched, cluster, _ = setup([gpu_node("n1", 2), gpu_node("n2", 2)])
    cluster.create("pods", builders.pod("first", [builders.container(gpumem=1000)]))
    sched.run_until_idle()
    allocated(cluster, "first")
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=1000)],
                                     annotations={ann.NODE_POLICY: policy}))
    sched.run_until_idle()
    same = node_of(cluster, "p") == node_of(cluster, "first")
    assert same is (policy == "binpack")


def test_a_node_whose_device_plugin_is_gone_takes_no_gpu_pod_until_it_is_back() -> None:
    """Issue 36, case 6: the kubelet advertises 0 devices of the agent's resource once the
    agent died, whatever its heartbeat says; the pod waits with kube's words, and is placed
    when the devices are back."""
    node = gpu_node("n1", 1)
    node["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    sched, cluster, clock = setup([node])
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=1000)]))
    sched.run_until_idle()
    assert node_of(cluster, "p") is None
    (event,) = [e for e in cluster.events(name="p") if e.reason == "FailedScheduling"]
    assert "1 Insufficient nvidia.com/gpu" in event.message
    node["status"]["allocatable"]["nvidia.com/gpu"] = "10"
    cluster.replace("nodes", cluster.get("nodes", "n1") | {"status": node["status"]})
    clock.advance(5)  # past its backoff; the node's change woke it
    sched.run_until_idle()
    assert node_of(cluster, "p") == "n1"


def test_scheduled_events_as_kube_scheduler_writes_them_when_asked() -> None:
    config = Config(scheduler=SchedulerConfig(scheduled_events=True))
    sched, cluster, _ = setup([gpu_node("n1", 1)], config)
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=1000)]))
    sched.run_until_idle()
    (event,) = cluster.events(name="a")
    assert (event.reason, event.type) == ("Scheduled", "Normal")
    assert event.message == "Successfully assigned default/a to n1"
