"""The scheduler's metrics, read from a real registry after real scheduling."""

from __future__ import annotations

import datetime as dt

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.scheduler.helpers import FakeClock
from vgpu import builders
from vgpu.cluster.memory import MemoryCluster
from vgpu.config import Config, SchedulerConfig
from vgpu_scheduler.host.attempt_record import AttemptRecord
from vgpu_scheduler.host.metrics import Metrics, State, start_time
from vgpu_scheduler.host.scheduler import Scheduler

CREATED = 1_800_000_000.0


@pytest.mark.parametrize(("created", "first_seen", "expected"), [
    (CREATED, CREATED + 0.25, CREATED + 0.25),  # seen within its creation second: exact
    (CREATED, CREATED, CREATED),
    (CREATED, CREATED + 7.0, CREATED + 0.5),  # seen late (a restart): mid-second
    (CREATED, CREATED - 0.1, CREATED + 0.5),  # clocks disagree: the server's word
    (None, CREATED + 3.0, CREATED + 3.0),  # no timestamp at all
])
def test_start_time(created: float | None, first_seen: float, expected: float) -> None:
    assert start_time(created, first_seen) == expected


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def value(metrics: Metrics, name: str, **labels: str) -> float:
    return samples(metrics).get((name, tuple(sorted(labels.items()))), 0.0)


def setup(config: Config | None = None) -> tuple[Scheduler, MemoryCluster, FakeClock, Metrics]:
    clock = FakeClock(CREATED)
    cluster = MemoryCluster()
    cluster.create("nodes", builders.node("n1", builders.devices("n1", 2, model="Tesla T4",
                                                           memory_mib=16384),
                                       heartbeat=clock.now))
    sched = Scheduler(config or Config(), cluster, clock=clock)
    leading = [True]
    metrics = Metrics(sched, State(leading=lambda: leading[0]), clock=clock)
    sched.listeners.append(metrics.on_decision)
    sched.informers()[1].add_handler(metrics.on_pod)
    return sched, cluster, clock, metrics


def stamp(pod: dict[str, object], when: float) -> dict[str, object]:
    meta = pod["metadata"]
    assert isinstance(meta, dict)
    meta["creationTimestamp"] = dt.datetime.fromtimestamp(when, dt.UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    return pod


PER_GPU = Config(scheduler=SchedulerConfig(per_gpu_metrics=True))


def test_attempts_latency_and_per_gpu_allocation() -> None:
    sched, cluster, clock, metrics = setup(PER_GPU)
    cluster.create("pods", stamp(builders.pod("a", [builders.container(gpumem=4000, cores=30)]),
                                 CREATED))
    cluster.create("pods", stamp(builders.pod("big", [builders.container(gpumem=99999)]), CREATED))
    sched.pump()  # the watch shows both pods now...
    clock.advance(0.5)  # ...and the scheduler gets to them half a second later
    sched.run_until_idle()
    assert value(metrics, "vgpu_scheduler_schedule_attempts_total", result="scheduled") == 1
    assert value(metrics, "vgpu_scheduler_schedule_attempts_total",
                 result="unschedulable") == 1
    assert value(metrics, "vgpu_scheduler_scheduling_attempt_duration_seconds_count",
                 result="scheduled") == 1
    assert value(metrics, "vgpu_scheduler_bindings_total", result="success") == 1
    assert value(metrics, "vgpu_scheduler_pod_create_to_bound_seconds_count") == 1
    assert value(metrics, "vgpu_scheduler_pod_create_to_bound_seconds_sum") == 0.5
    assert value(metrics, "vgpu_scheduler_pending_pods", queue="unschedulable") == 1
    assert value(metrics, "vgpu_scheduler_leader") == 1

    placed = sched.cache.pod(cluster.get("pods", "a", "default")["metadata"]["uid"])
    assert placed is not None and placed.assignment is not None
    (granted,) = placed.assignment.containers["main"]
    for i in range(2):
        labels = {"node": "n1", "uuid": f"GPU-n1-{i}", "index": str(i), "model": "Tesla T4"}
        mine = granted.uuid == labels["uuid"]
        assert value(metrics, "vgpu_scheduler_gpu_tasks", **labels) == (1 if mine else 0)
        assert value(metrics, "vgpu_scheduler_gpu_memory_allocated_bytes", **labels) == (
            4000 * 2**20 if mine else 0)
        assert value(metrics, "vgpu_scheduler_gpu_cores_allocated_percent", **labels) == (
            30 if mine else 0)
    assert value(metrics, "vgpu_scheduler_node_gpu_tasks", node="n1") == 1


def node_sums(metrics: Metrics) -> tuple[float, float, float]:
    return (value(metrics, "vgpu_scheduler_node_gpu_tasks", node="n1"),
            value(metrics, "vgpu_scheduler_node_gpu_memory_allocated_bytes", node="n1") / 2**20,
            value(metrics, "vgpu_scheduler_node_gpu_cores_allocated_percent", node="n1"))


def test_by_default_per_node_sums_follow_every_change_and_no_gpu_is_a_series() -> None:
    sched, cluster, _, metrics = setup()
    assert node_sums(metrics) == (0, 0, 0)
    cluster.create("nodes", builders.node("cpu-only", heartbeat=CREATED))
    cluster.create("pods", builders.pod("a", [builders.container(gpumem=4000, cores=30)]))
    sched.run_until_idle()
    assert node_sums(metrics) == (1, 4000, 30)
    cluster.create("pods", builders.pod("b", [builders.container(gpus=2, gpumem=1000)]))
    sched.run_until_idle()
    assert node_sums(metrics) == (3, 6000, 30)
    cluster.delete("pods", "a", "default")
    sched.run_until_idle()
    assert node_sums(metrics) == (2, 2000, 0)
    names = {name for name, _ in samples(metrics)}
    assert not any(n.startswith("vgpu_scheduler_gpu_") for n in names)
    # A node without GPUs has no GPU sums.
    assert ("vgpu_scheduler_node_gpu_tasks", (("node", "cpu-only"),)) not in samples(metrics)


def test_gated_pods_and_binding_outcomes() -> None:
    sched, cluster, _, metrics = setup()
    # A whole GPU and a slice of the other: both in flight at once.
    cluster.create("pods", builders.pod("a", [builders.container()]))
    cluster.create("pods", builders.pod("b", [builders.container(gpumem=1000)]))
    sched.run_until_idle()
    assert value(metrics, "vgpu_scheduler_pending_pods", queue="gated") == 0
    assert value(metrics, "vgpu_scheduler_permit_waits_total") == 0
    # Another slice of that GPU with other limits: the agent could confuse it with b.
    cluster.create("pods", builders.pod("c", [builders.container(gpumem=2000)]))
    sched.run_until_idle()
    assert value(metrics, "vgpu_scheduler_pending_pods", queue="gated") == 1
    assert value(metrics, "vgpu_scheduler_permit_waits_total") == 1
    metrics.on_decision(AttemptRecord("default/x", "n1", "bind-conflict"))
    metrics.on_decision(AttemptRecord("default/y", "n1", "bind-failed"))
    metrics.on_event("dropped")
    assert value(metrics, "vgpu_scheduler_bindings_total", result="conflict") == 1
    assert value(metrics, "vgpu_scheduler_bindings_total", result="error") == 1
    assert value(metrics, "vgpu_scheduler_events_total", outcome="dropped") == 1


def test_no_start_is_kept_for_pods_that_are_gone_or_not_ours() -> None:
    sched, cluster, _, metrics = setup()
    cluster.create("pods", builders.pod("gone", [builders.container(gpumem=99999)]))
    cluster.create("pods", builders.pod("theirs", scheduler_name="default-scheduler"))
    cluster.create("pods", builders.pod("elsewhere", [builders.container(gpumem=99999)]))
    sched.run_until_idle()
    assert sorted(metrics._starts) == ["default/elsewhere", "default/gone"]
    cluster.delete("pods", "gone", "default")
    cluster.bind("default", "elsewhere", "n1", {})  # bound by someone else
    sched.run_until_idle()
    assert not metrics._starts
    # A binding the watch showed first is counted once.
    assert value(metrics, "vgpu_scheduler_pod_create_to_bound_seconds_count") == 1



def test_preemptions_by_result() -> None:
    sched, cluster, _, metrics = setup()
    assert value(metrics, "vgpu_scheduler_preemptions_total", result="success") == 0
    for i in range(2):
        cluster.create("pods", builders.pod(f"low{i}", [builders.container(percent=100)],
                                            priority=0))
    sched.run_until_idle()
    cluster.create("poddisruptionbudgets", {
        "metadata": {"name": "all", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "batch"}}},
        "status": {"disruptionsAllowed": 0}})
    low1 = cluster.get("pods", "low1", "default")
    low1["metadata"]["labels"] = {"app": "batch"}
    low1["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    cluster.replace("pods", low1)
    cluster.create("pods", builders.pod("high", [builders.container(percent=100)],
                                        priority=100))
    cluster.create("pods", builders.pod("higher", [builders.container(percent=100)],
                                        priority=200))
    sched.run_until_idle()
    # "higher" evicts low0 (no budget); "high" is refused low1 by its budget.
    assert value(metrics, "vgpu_scheduler_preemptions_total", result="success") == 1
    assert value(metrics, "vgpu_scheduler_preemptions_total", result="failed") == 1
    assert value(metrics, "vgpu_scheduler_loop_errors_total", loop="preemption") == 0
