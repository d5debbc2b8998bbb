"""What the scheduler knows about one node: immutable, replaced whole on every change.

``NodeStatic`` is parsed from the Node object (labels, taints, allocatable, GPU inventory,
heartbeat) and shared by every ``NodeInfo`` of that node version; ``NodeInfo`` adds what the
pods on it take. Because both are immutable, a snapshot is a list of references and an
update copies one node (copy-on-write), never the cluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import vgpu.annotations as ann
from vgpu import codecs, hami_fields, heartbeat, meta, times, usage
from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment
from vgpu.devices import EMPTY, Device, Usage, largest_percent, memory_capacity, takes_tasks
from vgpu.errors import CodecError, RequestError
from vgpu.topology.links import LinkMatrix, matrix
from vgpu_scheduler.framework import compute, objects
from vgpu_scheduler.framework.host_ports import HostPort
from vgpu_scheduler.framework.podinfo import PodInfo


@dataclass(frozen=True, slots=True)
class NodeStatic:
    name: str
    node: Obj
    labels: Mapping[str, str]
    taints: tuple[objects.Taint, ...]
    unschedulable: bool
    alloc_cpu: int
    alloc_memory: int
    alloc_pods: int
    devices: tuple[Device, ...]
    #: Epoch seconds of the inventory heartbeat; None when the node publishes none.
    heartbeat: float | None
    #: Why the inventory could not be read (the node then offers no GPU).
    inventory_error: str | None = None
    #: Why the node object itself is malformed (the node then takes no pod).
    error: str | None = None
    #: Every other resource the node offers (ephemeral-storage, hugepages, extended
    #: resources), by name.
    alloc_other: Mapping[str, int] = field(default_factory=lambda: compute.NONE)
    #: The links between its GPUs, by device position; None: unknown (an agent from before
    #: topology, or a fake file without links).
    links: LinkMatrix | None = None
    #: The mode the node's agent says it runs toward (``auto`` resolved); None: it does
    #: not say (:mod:`vgpu.node_isolation`).
    isolation_target: str | None = None


def _cordon(devices: tuple[Device, ...], uuids: frozenset[str]) -> tuple[Device, ...]:
    """The node's GPUs with those its ``hami.io/device-cordon`` names taking no new
    slices (their pods keep theirs: usage still counts on them)."""
    if not uuids:
        return devices
    return tuple(dataclasses.replace(d, cordoned=True) if d.uuid in uuids else d
                 for d in devices)


def parse_node(node: Obj) -> NodeStatic:
    name = meta.name(node)
    annotations = meta.annotations_of(node)
    labels = meta.labels_of(node)
    spec = node.get("spec") or {}
    error = None
    try:
        taints = objects.parse_taints(node)
        alloc = compute.node_allocatable(node)
    except RequestError as exc:
        taints, alloc, error = (), compute.Allocatable(), f"node {name}: {exc}"
    devices: tuple[Device, ...] = ()
    links = target = None
    inventory_error = None
    raw = annotations.get(ann.NODE_GPUS)
    if raw is not None:
        try:
            inventory = codecs.decode_inventory(raw)
        except CodecError as exc:
            inventory_error = str(exc)
        else:
            devices = _cordon(inventory.devices, hami_fields.cordoned(annotations))
            if inventory.links is not None:
                links = matrix([d.uuid for d in devices], inventory.links)
            if inventory.isolation is not None:
                target = inventory.isolation.configured
    heartbeat = None
    raw_hb = annotations.get(ann.NODE_HEARTBEAT)
    if raw_hb is not None:
        try:
            heartbeat = times.parse(raw_hb).timestamp()
        except CodecError as exc:
            inventory_error = inventory_error or str(exc)
    return NodeStatic(
        name=name, node=node, labels=labels, taints=taints,
        unschedulable=bool(spec.get("unschedulable")), alloc_cpu=alloc.cpu,
        alloc_memory=alloc.memory, alloc_pods=alloc.pods, alloc_other=alloc.other,
        devices=devices, heartbeat=heartbeat, inventory_error=inventory_error, error=error,
        links=links, isolation_target=target,
    )


def static_changes(old: NodeStatic, new: NodeStatic, expiry: float, now: float) -> frozenset[str]:
    """Which scheduling-relevant facts differ; a heartbeat-only refresh is no change unless
    it brings a stale node back."""
    changes: set[str] = set()
    if old.labels != new.labels:
        changes.add("labels")
    if old.taints != new.taints:
        changes.add("taints")
    if old.unschedulable != new.unschedulable:
        changes.add("unschedulable")
    if (old.alloc_cpu, old.alloc_memory, old.alloc_pods, old.alloc_other) != (
            new.alloc_cpu, new.alloc_memory, new.alloc_pods, new.alloc_other) or (
            old.error != new.error):
        changes.add("allocatable")
    if (old.devices != new.devices or old.inventory_error != new.inventory_error
            or old.links != new.links or old.isolation_target != new.isolation_target):
        changes.add("inventory")
    if heartbeat.fresh(new.heartbeat, now, expiry) and not heartbeat.fresh(old.heartbeat, now,
                                                                         expiry):
        changes.add("heartbeat")
    return frozenset(changes)


@dataclass(frozen=True, slots=True)
class NodePod:
    """A pod that takes room on the node (bound, assumed or nominated) and its GPU slices."""

    info: PodInfo
    assignment: Assignment | None = None
    #: A pending pod whose preemption made room here: it holds the room until it is
    #: scheduled, but it is not running (a higher-priority pod may take the room).
    nominated: bool = False


class NodeInfo:
    """A node with the pods on it. Immutable by convention: never assign to a field."""

    __slots__ = (
        "_used_ports", "gpu_cores_total", "gpu_cores_used", "gpu_memory_total",
        "gpu_memory_used", "gpu_usage", "max_fit_percent", "max_free_cores", "max_free_memory",
        "pod_count", "pods", "requested_cpu", "requested_memory", "requested_other", "scaling",
        "static", "usable", "usages",
    )

    def __init__(self, static: NodeStatic, scaling: float, *, requested_cpu: int = 0,
                 requested_memory: int = 0, pod_count: int = 0,
                 gpu_usage: Mapping[str, Usage] | None = None,
                 pods: Mapping[str, NodePod] | None = None,
                 requested_other: Mapping[str, int] = compute.NONE) -> None:
        self.static = static
        self.scaling = scaling
        self.requested_cpu = requested_cpu
        self.requested_memory = requested_memory
        #: What the pods ask of the node's other resources (``NodeStatic.alloc_other``).
        self.requested_other = requested_other
        self.pod_count = pod_count
        #: The pods on the node by uid (``PodInfo.pod_id``), for plugins that look at them
        #: (ports, affinity, spread, volumes, preemption); the totals above are what they
        #: add up to.
        self.pods: Mapping[str, NodePod] = pods or {}
        self._used_ports: tuple[HostPort, ...] | None = None
        #: Usage by GPU uuid, including uuids the inventory no longer lists (a GPU that
        #: comes back keeps what is on it).
        self.gpu_usage: Mapping[str, Usage] = gpu_usage or {}
        by_uuid = self.gpu_usage
        self.usages: tuple[Usage, ...] = tuple(by_uuid.get(d.uuid, EMPTY)
                                               for d in static.devices)
        usable = max_cores = max_mem = max_pct = 0
        cap_total = used_mem = cores_total = used_cores = 0
        for d, u in zip(static.devices, self.usages, strict=True):
            if not d.healthy:
                continue
            cap = memory_capacity(d, scaling)
            cap_total += cap
            used_mem += min(u.memory_mib, cap)
            cores_total += d.cores
            used_cores += min(u.cores, d.cores)
            if not takes_tasks(d, u):
                continue
            usable += 1
            free_cores = d.cores - u.cores
            free_mem = cap - u.memory_mib
            max_cores = max(max_cores, free_cores)
            max_mem = max(max_mem, free_mem)
            pct = largest_percent(free_mem, cap)
            if pct is not None:
                max_pct = max(max_pct, pct)
        self.usable = usable
        self.max_free_cores = max_cores
        self.max_free_memory = max_mem
        self.max_fit_percent = max_pct
        self.gpu_memory_total = cap_total
        self.gpu_memory_used = used_mem
        self.gpu_cores_total = cores_total
        self.gpu_cores_used = used_cores

    @classmethod
    def of(cls, static: NodeStatic, scaling: float, pods: Mapping[str, NodePod]) -> NodeInfo:
        """The node with exactly ``pods`` on it, every total derived from them (what a
        plugin builds to ask "and without these pods?")."""
        usages: dict[str, Usage] = {}
        for pod in pods.values():
            usage.apply(usages, pod.assignment, +1)
        return cls(static, scaling, requested_cpu=sum(p.info.cpu_milli for p in pods.values()),
                   requested_memory=sum(p.info.memory for p in pods.values()),
                   pod_count=len(pods), gpu_usage=usages, pods=pods,
                   requested_other=compute.added(compute.NONE, (
                       (p.info.resources, 1) for p in pods.values())))

    @property
    def used_ports(self) -> tuple[HostPort, ...]:
        """Host ports the node's pods bind (computed on first use)."""
        if self._used_ports is None:
            self._used_ports = tuple(port for pod in self.pods.values()
                                     for port in pod.info.host_ports)
        return self._used_ports

    @property
    def name(self) -> str:
        return self.static.name

    @property
    def devices(self) -> tuple[Device, ...]:
        return self.static.devices

    def replace(self, *, static: NodeStatic | None = None, requested_cpu: int | None = None,
                requested_memory: int | None = None, pod_count: int | None = None,
                gpu_usage: Mapping[str, Usage] | None = None,
                pods: Mapping[str, NodePod] | None = None,
                requested_other: Mapping[str, int] | None = None) -> NodeInfo:
        return NodeInfo(
            static or self.static, self.scaling,
            requested_cpu=self.requested_cpu if requested_cpu is None else requested_cpu,
            requested_memory=(self.requested_memory if requested_memory is None
                              else requested_memory),
            pod_count=self.pod_count if pod_count is None else pod_count,
            gpu_usage=self.gpu_usage if gpu_usage is None else gpu_usage,
            pods=self.pods if pods is None else pods,
            requested_other=(self.requested_other if requested_other is None
                             else requested_other),
        )

    def __repr__(self) -> str:
        return (f"NodeInfo({self.name!r}, cpu={self.requested_cpu}/{self.static.alloc_cpu}, "
                f"pods={self.pod_count}, gpus={list(self.usages)})")
