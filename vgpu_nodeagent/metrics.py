"""The agent's metrics and ``/healthz`` on their own plain-HTTP port.

GPU figures are read at scrape time (NVML or the fake file), and the per-container grants
come from the pods in the local watch, so a scrape never calls the API server and a pod
that ends leaves no stale series behind.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vgpu import latency, logs, loops, meta
from vgpu.cluster.port import Obj
from vgpu.errors import CodecError
from vgpu.probes import Check, ProbeServer
from vgpu.serving import PLAIN, Serving
from vgpu.usage import claimed
from vgpu_nodeagent.devices.discovery import GpuFacts, GpuSample
from vgpu_nodeagent.kubelet.podresources import KubeletView

_log = logs.get("vgpu.nodeagent.metrics")

MIB = 1024 * 1024
_GPU_LABELS = ["uuid", "index", "model"]
_CONTAINER_LABELS = ["namespace", "pod", "container", "uuid"]


@dataclass(frozen=True)
class Granted:
    namespace: str
    pod: str
    container: str
    uuid: str
    memory_mib: int
    cores: int


def running_grants(pods: Sequence[Obj], schedulers: Collection[str]) -> list[Granted]:
    """Slices held by the node's pods (:func:`vgpu.usage.claimed`, the rule the scheduler
    counts by); a pod whose assignment cannot be read shows none."""
    out: list[Granted] = []
    for pod in pods:
        try:
            assignment = claimed(pod, schedulers)
        except CodecError:
            continue
        if assignment is None:
            continue
        namespace, name = meta.namespace(pod, "default"), meta.name(pod)
        for container, slices in assignment.containers.items():
            out.extend(Granted(namespace, name, container, s.uuid, s.memory_mib, s.cores)
                       for s in slices)
    return out


@dataclass(frozen=True)
class Sources:
    gpus: Callable[[], Sequence[tuple[GpuFacts, bool]]]
    samples: Callable[[], Mapping[str, GpuSample]]
    pods: Callable[[], Sequence[Obj]]
    registered: Callable[[], bool]
    #: ``Config.vgpu_schedulers``: whose pods hold grants (:func:`vgpu.usage.claimed`).
    schedulers: Collection[str]
    #: The kubelet's pod-resources view; None while the check is off.
    kubelet: Callable[[], KubeletView | None] = lambda: None
    #: Families other parts of the agent read at scrape time (isolation, the watchdog).
    extra: Callable[[], Iterable[Metric]] = lambda: ()


class AgentCollector(Collector):
    def __init__(self, sources: Sources) -> None:
        self._sources = sources

    def collect(self) -> Iterator[Metric]:
        total = GaugeMetricFamily("vgpu_gpu_memory_total_bytes",
                                  "Device memory of the GPU", labels=_GPU_LABELS)
        used = GaugeMetricFamily("vgpu_gpu_memory_used_bytes",
                                 "Device memory in use on the GPU", labels=_GPU_LABELS)
        util = GaugeMetricFamily("vgpu_gpu_utilization_percent",
                                 "GPU compute utilization", labels=_GPU_LABELS)
        healthy = GaugeMetricFamily("vgpu_gpu_healthy",
                                    "1 when the GPU is healthy, 0 after a device fault",
                                    labels=_GPU_LABELS)
        samples = self._sources.samples()
        for facts, is_healthy in self._sources.gpus():
            labels = [facts.uuid, str(facts.index), facts.model]
            total.add_metric(labels, facts.memory_mib * MIB)
            healthy.add_metric(labels, 1 if is_healthy else 0)
            sample = samples.get(facts.uuid)
            if sample is not None and sample.memory_used_mib is not None:
                used.add_metric(labels, sample.memory_used_mib * MIB)
            if sample is not None and sample.utilization is not None:
                util.add_metric(labels, sample.utilization)
        yield from (total, used, util, healthy)

        memory = GaugeMetricFamily("vgpu_container_memory_granted_bytes",
                                   "Device memory granted to a container on a GPU",
                                   labels=_CONTAINER_LABELS)
        cores = GaugeMetricFamily("vgpu_container_cores_granted_percent",
                                  "Compute share granted to a container on a GPU",
                                  labels=_CONTAINER_LABELS)
        for g in running_grants(self._sources.pods(), self._sources.schedulers):
            labels = [g.namespace, g.pod, g.container, g.uuid]
            memory.add_metric(labels, g.memory_mib * MIB)
            cores.add_metric(labels, g.cores)
        yield from (memory, cores)

        registered = GaugeMetricFamily("vgpu_nodeagent_registered",
                                       "1 while the device plugin is registered with the "
                                       "kubelet")
        registered.add_metric([], 1 if self._sources.registered() else 0)
        yield registered
        yield from _kubelet_metrics(self._sources.kubelet())
        yield from self._sources.extra()


def _kubelet_metrics(view: KubeletView | None) -> Iterator[Metric]:
    if view is None:
        return
    up = GaugeMetricFamily("vgpu_nodeagent_pod_resources_up",
                           "1 when the last read of the kubelet's pod-resources API worked")
    up.add_metric([], 1 if view.up else 0)
    devices = GaugeMetricFamily("vgpu_container_kubelet_devices",
                                "Device IDs of the GPU the kubelet lists for the container "
                                "(pod-resources API)", labels=_CONTAINER_LABELS)
    for entry in view.devices:
        counts: dict[str, int] = {}
        for gpu in entry.gpus(view.known):
            counts[gpu] = counts.get(gpu, 0) + 1
        for gpu, count in sorted(counts.items()):
            devices.add_metric([entry.namespace, entry.pod, entry.container, gpu], count)
    mismatched = GaugeMetricFamily("vgpu_nodeagent_pod_resources_mismatches",
                                   "Containers whose GPUs in the kubelet's pod resources "
                                   "differ from their assignment")
    mismatched.add_metric([], len(view.mismatches))
    intruders = GaugeMetricFamily("vgpu_nodeagent_intruder_pods",
                                  "Pods holding this node's vGPU devices in the kubelet's pod "
                                  "resources that no vgpu scheduler placed")
    intruders.add_metric([], len(view.intruders))
    yield from (up, devices, mismatched, intruders)


#: The agent's long-running loops, whose failed rounds ``/metrics`` counts.
LOOPS = ("device-loop", "inventory", "bind-phase-writer", "socket-watch", "watchdog",
         "pod-resources", "mps-daemon", "informer (pods)", "informer handler (pods)")


class Metrics:
    """The registry: the collector above plus Allocate's own counters."""

    def __init__(self, sources: Sources) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(AgentCollector(sources))
        self.registry.register(loops.Collector("vgpu_nodeagent", LOOPS))
        self.allocate_seconds = Histogram(
            "vgpu_nodeagent_allocate_seconds", "Time to answer the kubelet's Allocate",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5),
            registry=self.registry)
        self.allocations = Counter("vgpu_nodeagent_allocations",
                                   "Allocate calls answered, by result", ["result"],
                                   registry=self.registry)
        self.refused = Counter("vgpu_nodeagent_allocate_refused",
                               "Allocate calls refused because they were for a pod no vgpu "
                               "scheduler placed", registry=self.registry)
        self.overcommit_refused = Counter(
            "vgpu_nodeagent_overcommit_refused",
            "Allocate calls refused because the grant would take a GPU past its memory, "
            "cores or tasks, counting what this agent served", registry=self.registry)
        self.assignment_edited = Counter(
            "vgpu_nodeagent_assignment_edited",
            "Pods whose vgpu.io/assignment annotation was changed after the agent served "
            "them (the served record is what counts)", registry=self.registry)
        self.bind_to_allocate = Histogram(latency.METRIC, latency.HELP, [latency.LABEL],
                                          buckets=latency.BUCKETS, registry=self.registry
                                          ).labels(latency.BIND_TO_ALLOCATE)

    def observe_allocate(self, seconds: float, ok: bool) -> None:
        self.allocate_seconds.observe(seconds)
        self.allocations.labels(result="success" if ok else "error").inc()

    def observe_bind_to_allocate(self, seconds: float) -> None:
        # Two machines' clocks: skew can make it negative; zero is the honest floor.
        self.bind_to_allocate.observe(max(seconds, 0.0))


Health = Check


class MetricsServer(ProbeServer):
    """``/metrics`` and ``/healthz`` on ``host:port`` (port 0 picks a free one)."""

    def __init__(self, registry: CollectorRegistry, health: Health, port: int,
                 host: str = "", *, serving: Serving = PLAIN) -> None:
        super().__init__(registry, {"/healthz": health}, port, host, name="metrics",
                         serving=serving)
