"""The scheduler's Prometheus metrics, in a registry of their own.

Counters and histograms are fed by the scheduler's decisions (its ``listeners``); the
gauges (queue lengths, what each node's GPUs have allocated, leadership) are read from
the scheduler's own state at scrape time, so they are never stale and cost nothing between
scrapes. What each GPU has allocated is one series per GPU and figure, a cost a scrape of
a large cluster notices (a second of CPU at 40,000 GPUs), so it is served only with
``scheduler.perGpuMetrics``; its series carry ``node``, ``uuid``, ``index`` and ``model``,
the labels the node agent's GPU metrics carry, so the two join in one query.

Created→bound latency: the API server stamps ``creationTimestamp`` in whole seconds,
which is too coarse for a scheduler that binds in milliseconds. A pod's start is taken
as the moment the watch first showed it pending when that falls within its creation
second (the usual case: the watch delivers in milliseconds), else (a pod created while
this replica was not watching, say before a restart) the middle of that second.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vgpu import latency, loops, meta
from vgpu.cluster.port import Obj
from vgpu.devices import EMPTY
from vgpu.pods import node_name, pod_key
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.host.attempt_record import AttemptRecord
from vgpu_scheduler.host.scheduler import Scheduler

MIB = 1024 * 1024
_GPU_LABELS = ["node", "uuid", "index", "model"]

#: Attempt results, as kube-scheduler's ``schedule_attempts_total``: scheduled (a node
#: was chosen, including pods then held at Permit), unschedulable, error.
RESULTS = ("scheduled", "unschedulable", "error")
_RESULT_OF = {"scheduled": "scheduled", "waiting": "scheduled",
              "unschedulable": "unschedulable", "error": "error"}

# A scheduling attempt takes about a millisecond; slow ones are diagnoses of a full cluster.
ATTEMPT_BUCKETS = (0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5)
# Created→bound includes waiting at the node's gate and for room on a full cluster.
BOUND_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
                 300.0, 600.0, 1800.0)


def creation_time(pod: Obj) -> float | None:
    return meta.created(pod)


def start_time(created: float | None, first_seen: float) -> float:
    """When a pod was created, as well as can be told (see the module docstring)."""
    if created is None or created <= first_seen < created + 1:
        return first_seen
    return created + 0.5


@dataclass(frozen=True)
class State:
    """What the gauges read: whether this replica leads, whether its caches synced."""

    leading: Callable[[], bool]


def _totals(info: NodeInfo) -> tuple[int, int, int]:
    tasks = memory = cores = 0
    for device in info.devices:
        usage = info.gpu_usage.get(device.uuid, EMPTY)
        tasks += usage.tasks
        memory += usage.memory_mib
        cores += usage.cores
    return tasks, memory * MIB, cores


class SchedulerCollector(Collector):
    def __init__(self, sched: Scheduler, state: State) -> None:
        self._sched = sched
        self._state = state
        self._per_gpu = sched.config.scheduler.per_gpu_metrics
        # A node's sums, kept while its NodeInfo is the same object: the cache replaces
        # a node's NodeInfo on every change, so most nodes are unchanged between scrapes.
        self._sums: dict[str, tuple[NodeInfo, tuple[int, int, int]]] = {}

    def _node_sums(self) -> Iterator[Metric]:
        families = (
            GaugeMetricFamily("vgpu_scheduler_node_gpu_tasks",
                              "vGPU tasks the scheduler has placed on the node's GPUs",
                              labels=["node"]),
            GaugeMetricFamily("vgpu_scheduler_node_gpu_memory_allocated_bytes",
                              "Device memory the scheduler has allocated on the node's GPUs",
                              labels=["node"]),
            GaugeMetricFamily("vgpu_scheduler_node_gpu_cores_allocated_percent",
                              "Compute share the scheduler has allocated on the node's GPUs, "
                              "summed (100 a whole GPU)", labels=["node"]))
        cache = self._sched.cache
        sums: dict[str, tuple[NodeInfo, tuple[int, int, int]]] = {}
        for name in cache.node_names():
            info = cache.node_info(name)
            if info is None or not info.devices:
                continue
            kept = self._sums.get(name)
            if kept is None or kept[0] is not info:
                kept = (info, _totals(info))
            sums[name] = kept
            for family, value in zip(families, kept[1], strict=True):
                family.add_metric([name], value)
        self._sums = sums
        yield from families

    def _gpus(self) -> Iterator[Metric]:
        tasks = GaugeMetricFamily("vgpu_scheduler_gpu_tasks",
                                  "vGPU tasks the scheduler has placed on the GPU",
                                  labels=_GPU_LABELS)
        memory = GaugeMetricFamily("vgpu_scheduler_gpu_memory_allocated_bytes",
                                   "Device memory the scheduler has allocated on the GPU",
                                   labels=_GPU_LABELS)
        cores = GaugeMetricFamily("vgpu_scheduler_gpu_cores_allocated_percent",
                                  "Compute share the scheduler has allocated on the GPU",
                                  labels=_GPU_LABELS)
        cache = self._sched.cache
        for name in cache.node_names():
            info = cache.node_info(name)
            if info is None:
                continue
            for device in info.devices:
                usage = info.gpu_usage.get(device.uuid, EMPTY)
                labels = [name, device.uuid, str(device.index), device.model]
                tasks.add_metric(labels, usage.tasks)
                memory.add_metric(labels, usage.memory_mib * MIB)
                cores.add_metric(labels, usage.cores)
        yield from (tasks, memory, cores)

    def collect(self) -> Iterator[Metric]:
        sched = self._sched
        pending = GaugeMetricFamily(
            "vgpu_scheduler_pending_pods",
            "Pods waiting to be scheduled, by queue: active (ready to be tried), backoff "
            "(after a failure), unschedulable (until a cluster change may help), gated (held "
            "at Permit until their node's previous GPU pod is allocated)", labels=["queue"])
        counts = sched.queue.counts()
        for queue in ("active", "backoff", "unschedulable"):
            pending.add_metric([queue], counts.get(queue, 0))
        pending.add_metric(["gated"], len(sched.waiting_pods()))
        yield pending
        preemptions = CounterMetricFamily(
            "vgpu_scheduler_preemptions", "Preemptions whose API calls are done, by result: "
            "success, failed (an eviction refused or failed: the preemptor gave its "
            "nomination up and backs off)", labels=["result"])
        results = sched.preemptions.results.copy()
        for result in ("success", "failed"):
            preemptions.add_metric([result], results[result])
        yield preemptions

        yield from self._node_sums()
        if self._per_gpu:
            yield from self._gpus()

        invalid = GaugeMetricFamily(
            "vgpu_scheduler_node_inventory_invalid",
            "Nodes whose vgpu.io/node-gpus does not read: they take no GPU pod")
        cache = sched.cache
        invalid.add_metric([], sum(
            1 for name in cache.node_names()
            if (info := cache.node_info(name)) is not None and info.static.inventory_error))
        yield invalid

        leader = GaugeMetricFamily("vgpu_scheduler_leader",
                                   "1 while this replica holds the lease and schedules")
        leader.add_metric([], 1 if self._state.leading() else 0)
        yield leader


#: The scheduler's long-running loops, whose failed rounds ``/metrics`` counts.
LOOPS = ("scheduling attempt", "scheduling loop", "informer (pods)", "informer (nodes)",
         "informer handler (pods)", "informer handler (nodes)", "preemption")


class Metrics:
    """The registry, and the listener and pod handler that feed it."""

    def __init__(self, sched: Scheduler, state: State,
                 clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._name = sched.config.scheduler_name
        self.registry = CollectorRegistry()
        self.registry.register(SchedulerCollector(sched, state))
        self.registry.register(loops.Collector("vgpu_scheduler", LOOPS))
        attempts = Counter("vgpu_scheduler_schedule_attempts",
                           "Scheduling attempts, by result", ["result"],
                           registry=self.registry)
        attempt_latency = Histogram("vgpu_scheduler_scheduling_attempt_duration_seconds",
                            "Time of one scheduling attempt (snapshot, filter, score, "
                            "reserve, permit), by result", ["result"],
                            buckets=ATTEMPT_BUCKETS, registry=self.registry)
        # Children bound once: a labels() lookup per attempt is measurable at high rates.
        self._attempts = {r: attempts.labels(r) for r in RESULTS}
        self._latency = {r: attempt_latency.labels(r) for r in RESULTS}
        bindings = Counter("vgpu_scheduler_bindings", "Bindings, by result: success, "
                           "conflict (the pod was bound already or is being deleted), error, "
                           "in-doubt (the answer was lost: its room stays held)",
                           ["result"], registry=self.registry)
        self._bindings = {r: bindings.labels(r)
                          for r in ("success", "conflict", "error", "in-doubt")}
        self._permit_waits = Counter(
            "vgpu_scheduler_permit_waits", "GPU pods held at Permit behind a pod in flight on "
            "the same node that the node agent could confuse with them",
            registry=self.registry)
        self._bound = Histogram("vgpu_scheduler_pod_create_to_bound_seconds",
                                "Time from a pod's creation to its binding",
                                buckets=BOUND_BUCKETS, registry=self.registry)
        events = Counter("vgpu_scheduler_events", "Events, by outcome: sent, limited (a "
                         "repeat held back), dropped (too many queued), failed", ["outcome"],
                         registry=self.registry)
        self._event_counts = {o: events.labels(o) for o in ("sent", "limited", "dropped", "failed")}
        steps = Histogram(latency.METRIC, latency.HELP, [latency.LABEL],
                          buckets=latency.BUCKETS, registry=self.registry)
        self._queue_wait = steps.labels(latency.QUEUE_WAIT)
        self._cycle = steps.labels(latency.SCHEDULING_CYCLE)
        self._bind = steps.labels(latency.BIND)
        self._lock = threading.Lock()
        self._starts: dict[str, float] = {}

    # -- feeding ---------------------------------------------------------------------------

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        """Pod informer handler: note when each of our pending pods was created."""
        if new is None:
            if old is not None and self._starts:
                with self._lock:
                    self._starts.pop(pod_key(old), None)
            return
        if node_name(new) is not None:
            # The watch may show the binding before the binding call has returned.
            if self._starts:
                self._bound_now(pod_key(new))
            return
        if old is not None or (new.get("spec") or {}).get("schedulerName") != self._name:
            return
        start = start_time(creation_time(new), self._clock())
        with self._lock:
            self._starts[pod_key(new)] = start

    def on_decision(self, decision: AttemptRecord) -> None:
        result = _RESULT_OF.get(decision.outcome)
        if result is not None:
            if decision.outcome == "waiting":
                self._permit_waits.inc()
            self._attempts[result].inc()
            self._latency[result].observe(decision.seconds)
            self._queue_wait.observe(decision.queued)
            self._cycle.observe(decision.seconds)
            return
        self._bind.observe(decision.seconds)
        if decision.outcome == "bound":
            self._bindings["success"].inc()
            self._bound_now(decision.pod)
        elif decision.outcome == "bind-conflict":
            self._bindings["conflict"].inc()
        elif decision.outcome == "bind-failed":
            self._bindings["error"].inc()
        elif decision.outcome == "bind-in-doubt":
            self._bindings["in-doubt"].inc()

    def _bound_now(self, key: str) -> None:
        """First word of the pod's binding (the call's answer, or the watch)."""
        with self._lock:
            start = self._starts.pop(key, None)
        if start is not None:
            self._bound.observe(max(self._clock() - start, 0.0))

    def on_event(self, outcome: str) -> None:
        counter = self._event_counts.get(outcome)
        if counter is not None:
            counter.inc()
