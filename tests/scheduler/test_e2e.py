"""The whole scheduler on the in-memory cluster: watch, decide, bind, events."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

import vgpu.annotations as ann
from scheduler.host.scheduler import Scheduler
from tests.scheduler.helpers import FakeClock
from vgpu import builders, codecs
from vgpu.cluster.memory import MemoryCluster
from vgpu.cluster.port import Obj
from vgpu.config import Config, SchedulerConfig
from vgpu.errors import ClusterError


def setup(nodes: list[Obj], config: Config | None = None,
          cluster: MemoryCluster | None = None) -> tuple[Scheduler, MemoryCluster, FakeClock]:
    clock = FakeClock()
    cluster = cluster or MemoryCluster()
    for n in nodes:
        cluster.create("nodes", n)
    return Scheduler(config or Config(), cluster, clock=clock), cluster, clock


def gpu_node(name: str, gpus: int = 2, *, memory_mib: int = 16384, model: str = "Tesla T4",
             heartbeat: float | None = None, **kw: Any) -> Obj:
    hb = FakeClock().now if heartbeat is None else heartbeat
    return builders.node(name, builders.devices(name, gpus, model=model, memory_mib=memory_mib),
                      heartbeat=hb, **kw)


def node_of(cluster: MemoryCluster, name: str) -> str | None:
    node: str | None = cluster.get("pods", name, "default")["spec"].get("nodeName")
    return node


def annotations(cluster: MemoryCluster, name: str) -> Mapping[str, str]:
    result: Mapping[str, str] = cluster.get("pods", name, "default")["metadata"]["annotations"]
    return result


def allocated(cluster: MemoryCluster, name: str, phase: str = ann.PHASE_SUCCESS) -> None:
    """What the node agent does after Allocate."""
    cluster.patch_annotations("pods", name, {ann.BIND_PHASE: phase}, "default")


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
        assert codecs.decode_time(meta[ann.BIND_TIME], ann.BIND_TIME).timestamp() == clock.now
    b = codecs.decode_assignment(annotations(cluster, "b")[ann.ASSIGNMENT])
    assert b.containers["x"][0].memory_mib == 8192  # 50 % of a 16 GiB GPU
    a = codecs.decode_assignment(annotations(cluster, "a")[ann.ASSIGNMENT])
    assert {g.cores for g in a.containers["main"]} == {30}
    assert [e.reason for e in cluster.events(name="a")] == ["Scheduled"]


def test_permit_gate_holds_a_nodes_second_gpu_pod_until_success() -> None:
    sched, cluster, clock = setup([gpu_node("n1", 4)])
    for name in ("first", "second", "third"):
        cluster.create("pods", builders.pod(name, [builders.container(gpumem=1000, cores=10)]))
    sched.run_until_idle()
    assert node_of(cluster, "first") == "n1"
    assert node_of(cluster, "second") is None and node_of(cluster, "third") is None
    assert sched.waiting_pods() == {"default/second": "n1", "default/third": "n1"}
    # the waiting pods hold their reservation: three slices on the node
    info = sched.cache.node_info("n1")
    assert info is not None and sum(u.tasks for u in info.usages) == 3

    allocated(cluster, "first")
    sched.run_until_idle()
    assert node_of(cluster, "second") == "n1" and node_of(cluster, "third") is None

    allocated(cluster, "second", ann.PHASE_FAILED)
    sched.run_until_idle()
    assert node_of(cluster, "third") == "n1"

    # a gate held by a pod that never reports opens after permitTimeoutSeconds
    cluster.create("pods", builders.pod("fourth", [builders.container(gpumem=1000, cores=10)]))
    sched.run_until_idle()
    assert node_of(cluster, "fourth") is None
    clock.advance(Config().scheduler.permit_timeout_seconds)
    sched.run_until_idle()
    assert node_of(cluster, "fourth") == "n1"


def test_deleting_the_in_flight_pod_opens_the_gate() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 2)])
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=1000)]))
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=1000)]))
    sched.run_until_idle()
    assert node_of(cluster, "b") is None
    cluster.delete("pods", "a", "default")
    sched.run_until_idle()
    assert node_of(cluster, "b") == "n1"


def test_other_nodes_are_not_held_up_by_a_gated_node() -> None:
    config = Config(default_node_policy="spread")
    sched, cluster, _ = setup([gpu_node("n1", 2), gpu_node("n2", 2)], config)
    for name in ("a", "b", "c"):
        cluster.create("pods", builders.pod(name, [builders.container(gpumem=1000)]))
    sched.run_until_idle()
    # spread: a → n1, b → n2 (both bound at once), c waits for one of them
    assert {node_of(cluster, "a"), node_of(cluster, "b")} == {"n1", "n2"}
    assert len(sched.waiting_pods()) == 1


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
        "0/4 nodes are available: 3 insufficient GPU memory, 1 GPU type excluded."]
    assert events[0].type == "Warning"


def test_pod_spec_errors_are_reported_and_not_retried_on_cluster_events() -> None:
    sched, cluster, clock = setup([gpu_node("n1", 1)])
    cluster.create("pods", builders.pod(
        "bad", [builders.container(gpus=1, gpumem=1000, percent=10)]))
    sched.run_until_idle()
    [event] = cluster.events(name="bad")
    assert "gives both" in event.message
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
    assert "insufficient CPU" in cluster.events(name="p")[0].message


def test_restart_rebuilds_from_annotations() -> None:
    cluster = MemoryCluster()
    sched, cluster, clock = setup([gpu_node("n1", 1)], cluster=cluster)
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=10000)]))
    sched.run_until_idle()
    assert node_of(cluster, "a") == "n1"
    # a new scheduler process: no memory of the old one's decisions
    fresh = Scheduler(Config(), cluster, clock=clock)
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=10000)]))
    cluster.create("pods", builders.pod("c", [builders.container(gpumem=6000)]))
    fresh.run_until_idle()
    assert node_of(cluster, "b") is None  # 10000 + 10000 > 16384: no double booking
    # c fits, but a is still allocating: the rebuilt gate holds c
    assert fresh.waiting_pods() == {"default/c": "n1"}
    allocated(cluster, "a")
    fresh.run_until_idle()
    assert node_of(cluster, "c") == "n1"


class FlakyBind(MemoryCluster):
    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def bind(self, namespace: str, name: str, node: str,
             annotations: Mapping[str, str]) -> None:
        if self.failures:
            self.failures -= 1
            raise ClusterError("the API server said no (HTTP 500)")
        super().bind(namespace, name, node, annotations)


def test_failed_binding_forgets_and_retries() -> None:
    sched, cluster, clock = setup([gpu_node("n1", 1)], cluster=FlakyBind())
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=16000)]))
    sched.run_until_idle()
    assert node_of(cluster, "p") is None
    info = sched.cache.node_info("n1")
    assert info is not None and info.usages[0].tasks == 0  # the assumption was forgotten
    assert "binding rejected" in cluster.events(name="p", reason="FailedScheduling")[0].message
    clock.advance(1)
    sched.run_until_idle()
    assert node_of(cluster, "p") == "n1"


class BoundMeanwhile(MemoryCluster):
    """Another binder wins the race: its Binding lands just before ours (409)."""

    def bind(self, namespace: str, name: str, node: str,
             annotations: Mapping[str, str]) -> None:
        if name == "p":
            super().bind(namespace, name, "n2", {})
        super().bind(namespace, name, node, annotations)


def test_a_conflict_on_binding_is_not_retried_and_the_watch_tells_the_truth() -> None:
    sched, cluster, _ = setup([gpu_node("n1", 1), gpu_node("n2", 1)], cluster=BoundMeanwhile())
    cluster.create("pods", builders.pod("p", [builders.container(gpumem=16000)]))
    sched.run_until_idle()
    assert node_of(cluster, "p") == "n2"
    assert "p" not in {e.name for e in cluster.events(reason="FailedScheduling")}
    assert "default/p" not in sched.queue
    rec = sched.cache.pod("default/p")
    assert rec is not None and rec.node == "n2" and not rec.assumed
    n1 = sched.cache.node_info("n1")
    assert n1 is not None and n1.usages[0].tasks == 0  # our assumption was forgotten


def test_non_gpu_pods_and_other_schedulers() -> None:
    sched, cluster, _ = setup([builders.node("cpu-only", cpu="8")])
    cluster.create("pods", builders.pod("cpu", [builders.container(gpus=None, cpu="1")]))
    cluster.create("pods", builders.pod("theirs", scheduler_name="default-scheduler"))
    cluster.create("pods", builders.pod("gpu", [builders.container(gpumem=10)]))
    sched.run_until_idle()
    assert node_of(cluster, "cpu") == "cpu-only"
    assert node_of(cluster, "theirs") is None and not cluster.events(name="theirs")
    assert cluster.events(name="gpu")[0].message == (
        "0/1 nodes are available: 1 no vGPU inventory.")


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
