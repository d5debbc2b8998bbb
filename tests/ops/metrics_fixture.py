"""The metric names the dashboards read, and the names each component exports.

The one place to update when a dashboard or an exporter changes:

- ``DASHBOARD_METRICS``: per dashboard file, every series name its panels and variables
  read (as scraped: a counter's ``_total``, a histogram's ``_bucket``).
- ``EXPORTED``: per component, the series names its ``/metrics`` shows, as read from
  its metrics module (and kube-state-metrics' ``kube_resourcequota``, the quota row's).
  Where that module is importable, ``live_exported`` scrapes a real registry instead and
  a test checks the copy here still matches it; where it is not yet merged into this
  tree, the copy stands in for it.

The scheduler's metrics (issue 5) were named after what the dashboards expected (attempts
by result, scheduling and created→bound latency, queue lengths, per-GPU allocation
labelled node/uuid/index/model); they are scraped live like the others' now. What each
GPU has allocated became per-node sums by default (issue 16: a scrape of 40,000 GPUs cost
a second of CPU), the per-GPU series an option.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

DASHBOARD_METRICS: dict[str, frozenset[str]] = {
    "vgpu-cluster.json": frozenset({
        "vgpu_gpu_memory_total_bytes", "vgpu_gpu_memory_used_bytes", "vgpu_gpu_healthy",
        "vgpu_gpu_utilization_percent", "vgpu_container_memory_granted_bytes",
        "vgpu_container_cores_granted_percent", "vgpu_nodeagent_registered",
        "vgpu_scheduler_pending_pods", "vgpu_scheduler_schedule_attempts_total",
        "vgpu_scheduler_scheduling_attempt_duration_seconds_bucket",
        "vgpu_scheduler_pod_create_to_bound_seconds_bucket",
        "vgpu_webhook_requests_total", "vgpu_webhook_request_duration_seconds_bucket",
        "vgpu_webhook_certificate_expiry_timestamp_seconds",
        "vgpu_step_duration_seconds_bucket", "vgpu_step_duration_seconds_sum",
        "vgpu_step_duration_seconds_count", "kube_resourcequota",
    }),
    "vgpu-gpus.json": frozenset({
        "vgpu_gpu_memory_total_bytes", "vgpu_gpu_memory_used_bytes", "vgpu_gpu_healthy",
        "vgpu_gpu_utilization_percent", "vgpu_container_memory_granted_bytes",
        "vgpu_container_cores_granted_percent", "vgpu_nodeagent_allocate_seconds_bucket",
        "vgpu_nodeagent_allocations_total", "vgpu_scheduler_node_gpu_tasks",
        "vgpu_scheduler_node_gpu_memory_allocated_bytes",
    }),
}


def _histogram(name: str) -> set[str]:
    return {f"{name}_bucket", f"{name}_sum", f"{name}_count", f"{name}_created"}


def _counter(name: str) -> set[str]:
    return {f"{name}_total", f"{name}_created"}


EXPORTED: dict[str, frozenset[str]] = {
    # vgpu_webhook/metrics.py
    "webhook": frozenset({
        *_counter("vgpu_webhook_requests"),
        *_histogram("vgpu_webhook_request_duration_seconds"),
        *_counter("vgpu_webhook_validations"),
        *_counter("vgpu_webhook_node_scope"),
        *_histogram("vgpu_webhook_validation_duration_seconds"),
        *_counter("vgpu_webhook_certificate_reloads"),
        "vgpu_webhook_certificate_expiry_timestamp_seconds",
        "vgpu_webhook_inventory_nodes", "vgpu_webhook_inventory_gpus",
        "vgpu_webhook_loop_errors_total",
        *_histogram("vgpu_step_duration_seconds"),
    }),
    # vgpu_nodeagent/metrics.py
    "nodeagent": frozenset({
        *_counter("vgpu_nodeagent_phase_writes_overdue_reported"),
        "vgpu_gpu_memory_total_bytes", "vgpu_gpu_memory_used_bytes",
        "vgpu_gpu_utilization_percent", "vgpu_gpu_healthy",
        "vgpu_container_memory_granted_bytes", "vgpu_container_cores_granted_percent",
        "vgpu_nodeagent_registered",
        *_histogram("vgpu_nodeagent_allocate_seconds"),
        *_counter("vgpu_nodeagent_allocations"),
        *_counter("vgpu_nodeagent_allocate_refused"),
        *_counter("vgpu_nodeagent_overcommit_refused"),
        *_counter("vgpu_nodeagent_assignment_edited"),
        "vgpu_nodeagent_loop_errors_total",
        *_histogram("vgpu_step_duration_seconds"),
        # vgpu_nodeagent/isolation/metrics.py: the live mode and, on an MPS node, its daemon
        "vgpu_nodeagent_isolation_mode", "vgpu_nodeagent_isolation_enforced",
        "vgpu_nodeagent_isolation_degraded", "vgpu_mps_daemon_up",
        "vgpu_mps_daemon_restarts_total", "vgpu_mps_daemon_starts_total",
        # vgpu_nodeagent/isolation/fault_report.py: faults reported to the pods they hit
        "vgpu_mps_faults_total", "vgpu_mps_fault_pods_total",
        "vgpu_mps_servers_started_total",
    }),
    # vgpu_scheduler/metrics.py
    "scheduler": frozenset({
        "vgpu_scheduler_pending_pods",
        *_counter("vgpu_scheduler_schedule_attempts"),
        *_histogram("vgpu_scheduler_scheduling_attempt_duration_seconds"),
        *_histogram("vgpu_scheduler_pod_create_to_bound_seconds"),
        # Per node by default; per GPU (vgpu_scheduler_gpu_*) only with perGpuMetrics, so
        # no dashboard may read those.
        "vgpu_scheduler_node_gpu_memory_allocated_bytes",
        "vgpu_scheduler_node_gpu_cores_allocated_percent", "vgpu_scheduler_node_gpu_tasks",
        "vgpu_scheduler_leader", "vgpu_scheduler_node_inventory_invalid",
        "vgpu_scheduler_loop_errors_total",
        *_counter("vgpu_scheduler_bindings"), *_counter("vgpu_scheduler_events"),
        *_counter("vgpu_scheduler_permit_waits"),
        "vgpu_scheduler_preemptions_total", "vgpu_scheduler_cache_drift_total",
        *_histogram("vgpu_step_duration_seconds"),
    }),
    # Not vgpu's: kube-state-metrics, which Prometheus setups run beside Kubernetes, exports
    # every ResourceQuota's hard and used values (labels namespace, resourcequota, resource,
    # type); the quota row reads the ones on the derived vgpu.io/ names. The e2e Prometheus
    # test serves this one series from the cluster's quotas (tests/e2e/kube_state_metrics.py).
    "kube-state-metrics": frozenset({"kube_resourcequota"}),
}


def scraped_names(registry: CollectorRegistry) -> frozenset[str]:
    """The series names a scrape of ``registry`` shows."""
    text = generate_latest(registry).decode()
    return frozenset(sample.name for family in text_string_to_metric_families(text)
                     for sample in family.samples)


def _webhook() -> CollectorRegistry:
    from vgpu_webhook.metrics import Metrics

    metrics = Metrics()
    registry: CollectorRegistry = metrics.registry
    return registry


def _nodeagent() -> CollectorRegistry:
    # One GPU with a sample and one running grant, so that every family has a series.
    from itertools import chain

    from vgpu_nodeagent.devices.discovery import GpuFacts, GpuSample
    from vgpu_nodeagent.isolation import fault_report
    from vgpu_nodeagent.isolation import metrics as isolation
    from vgpu_nodeagent.isolation.mode import Live
    from vgpu_nodeagent.isolation.mps import DaemonStatus
    from vgpu_nodeagent.metrics import Metrics, Sources

    facts = GpuFacts(uuid="GPU-0", index=0, model="m", memory_mib=1024, numa=0, mig=False,
                     healthy=True)
    pod = {"metadata": {"namespace": "ns", "name": "p", "annotations": {
        "vgpu.io/bind-phase": "success",
        "vgpu.io/assignment": '{"version":1,"node":"n","containers":{"c":['
                              '{"uuid":"GPU-0","memory_mib":10,"cores":5}]}}'}},
           "spec": {"nodeName": "n", "schedulerName": "vgpu-scheduler"},
           "status": {"phase": "Running"}}
    metrics = Metrics(Sources(gpus=lambda: [(facts, True)],
                              samples=lambda: {"GPU-0": GpuSample(memory_used_mib=1,
                                                                  utilization=2)},
                              pods=lambda: [pod], registered=lambda: True,
                              schedulers={"vgpu-scheduler"},
                              # An MPS node: the agent's extra families are all there.
                              extra=lambda: chain(
                                  isolation.families(
                                      Live("mps", "mps", True, "MPS"), "mps",
                                      DaemonStatus("running", None, 1, 0, "/run/vgpu")),
                                  fault_report.families({}, 0, 0))))
    metrics.observe_allocate(0.01, True)
    registry: CollectorRegistry = metrics.registry
    return registry


def _scheduler() -> CollectorRegistry:
    # One GPU node, so that the per-node families have a series.
    from vgpu import builders
    from vgpu.cluster.memory import MemoryCluster
    from vgpu.config import Config
    from vgpu_scheduler.host.metrics import Metrics, State
    from vgpu_scheduler.host.scheduler import Scheduler

    cluster = MemoryCluster()
    cluster.create("nodes", builders.node("n", builders.devices("n", 1)))
    sched = Scheduler(Config(), cluster)
    sched.pump()
    registry: CollectorRegistry = Metrics(sched, State(leading=lambda: True)).registry
    return registry


# component -> (module whose presence means the component is merged, registry builder)
LIVE: dict[str, tuple[str, Callable[[], CollectorRegistry]]] = {
    "webhook": ("vgpu_webhook.metrics", _webhook),
    "nodeagent": ("vgpu_nodeagent.metrics", _nodeagent),
    "scheduler": ("vgpu_scheduler.host.metrics", _scheduler),
}


def live_exported(component: str) -> frozenset[str] | None:
    """Names scraped from the component's real registry, or None when not merged here."""
    entry = LIVE.get(component)
    if entry is None:
        return None
    module, build = entry
    package = module.split(".")[0]
    if importlib.util.find_spec(package) is None or importlib.util.find_spec(module) is None:
        return None
    return scraped_names(build())


def exported(component: str) -> frozenset[str]:
    live = live_exported(component)
    return live if live is not None else EXPORTED[component]
