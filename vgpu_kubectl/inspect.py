"""Where the GPU memory went: the allocation report behind ``vgpu inspect``.

A pure function from the cluster's nodes and pods (plain API dicts) to a :class:`Report`
of per node and GPU rows with cluster totals (the links between each node's GPUs
included), rendered by :mod:`vgpu_kubectl.inspect_render`: a table for people, JSON for
programs. Everything is derived from the node inventories and the pod
assignments, the same facts the scheduler rebuilds its state from, so the report shows
what the scheduler believes, not what NVML sees. One malformed annotation becomes a
warning in the report; the rest of the cluster is still shown. Each GPU that is one fault
domain says whom it still takes (:mod:`vgpu_kubectl.fault_view`), each MPS GPU whom its
server serves (:mod:`vgpu_kubectl.mps_user_view`), and each node what its isolation holds
(:func:`vgpu.isolation_modes.summary`) and why it runs less than it was configured for.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu import heartbeat, isolation_modes, meta, times
from vgpu.annotations import NODE_GPUS, NODE_HEARTBEAT
from vgpu.codecs import Assignment, decode_inventory
from vgpu.devices import EMPTY, Device, Usage, memory_capacity
from vgpu.errors import CodecError
from vgpu.fault_domains import Defaults, Tenant
from vgpu.mps_users import User
from vgpu.node_isolation import NodeIsolation
from vgpu.pods import bind_phase, is_terminated, node_name, pod_key
from vgpu.topology.links import GpuLink
from vgpu.usage import claimed, tally
from vgpu_kubectl import fault_view, mps_user_view


@dataclass(frozen=True)
class PodSlice:
    """One container's slice of one GPU."""

    namespace: str
    pod: str
    container: str
    memory_mib: int
    cores: int
    bind_phase: str
    #: Whom the pod shares a fault domain with, as recorded at its placement.
    fault_domain: str = "any"


@dataclass(frozen=True)
class GpuRow:
    device: Device
    usage: Usage
    pods: tuple[PodSlice, ...] = ()
    # Schedulable memory: the physical size × deviceMemoryScaling (above it when the
    # cluster oversubscribes), what allocations are measured against.
    capacity_mib: int = 0
    #: Whom the GPU's fault domain still takes (``any``, ``<namespace> only``, ``""``:
    #: nobody on it); None: the GPU keeps each pod's faults its own.
    fault_domain: str | None = None
    #: Whom its MPS server serves (``uid 1000``, ``ns/pod`` for an unknown uid, ``""``:
    #: nobody); None: not an MPS GPU.
    mps_user: str | None = None


@dataclass(frozen=True)
class NodeRow:
    name: str
    gpus: tuple[GpuRow, ...]
    heartbeat: dt.datetime | None
    stale: bool
    #: The links between its GPUs as its agent publishes them; None: unknown.
    links: tuple[GpuLink, ...] | None = None
    #: What its agent runs toward and why it runs less; None from an agent that does not say.
    isolation: NodeIsolation | None = None
    #: What its GPUs' modes hold, in words (:func:`vgpu.isolation_modes.summary`).
    enforced: str = ""


@dataclass(frozen=True)
class ReportWarning:
    """Something the report could not use: which object and why."""

    object: str
    message: str


@dataclass(frozen=True)
class Totals:
    nodes: int = 0
    gpus: int = 0
    healthy_gpus: int = 0
    memory_mib: int = 0              # schedulable (capacity), summed
    memory_allocated_mib: int = 0
    cores: int = 0
    cores_allocated: int = 0
    tasks: int = 0
    slots: int = 0
    pending_pods: int = 0


@dataclass(frozen=True)
class Report:
    nodes: tuple[NodeRow, ...]
    totals: Totals
    warnings: tuple[ReportWarning, ...] = field(default=())


@dataclass
class _Pods:
    """The pods' side of the report: assignments and slices by node, pending count."""

    by_node: dict[str, list[Assignment]] = field(default_factory=dict)
    slices: dict[tuple[str, str], list[PodSlice]] = field(default_factory=dict)
    pending: int = 0
    occupants: dict[tuple[str, str], list[Tenant]] = field(default_factory=dict)
    users: dict[tuple[str, str], list[User]] = field(default_factory=dict)


def _read_pods(pods: Iterable[Mapping[str, Any]], scheduler_name: str,
               extra_schedulers: Collection[str], warnings: list[ReportWarning],
               defaults: Defaults) -> _Pods:
    out = _Pods()
    for pod in pods:
        if is_terminated(pod):
            continue
        namespace, name = pod_key(pod).split("/", 1)
        node = node_name(pod)
        try:
            assignment = claimed(pod, {scheduler_name, *extra_schedulers})
        except CodecError as exc:
            warnings.append(ReportWarning(f"pod {namespace}/{name}", str(exc)))
            continue
        if assignment is None or node is None:
            spec = pod.get("spec")
            if node is None and isinstance(spec, Mapping) and (
                    spec.get("schedulerName") == scheduler_name):
                out.pending += 1
            continue
        out.by_node.setdefault(node, []).append(assignment)
        phase = bind_phase(pod) or ""
        fault_view.add(out.occupants, pod, assignment, defaults)
        mps_user_view.add(out.users, pod, assignment)
        scope = fault_view.tenant(pod, assignment, defaults).scope
        for container, granted in sorted(assignment.containers.items()):
            for g in granted:
                out.slices.setdefault((node, g.uuid), []).append(
                    PodSlice(namespace, name, container, g.memory_mib, g.cores, phase, scope))
    return out


def _node_row(obj: Mapping[str, Any], pods: _Pods, *, now: dt.datetime, expiry: float,
              scaling: float, warnings: list[ReportWarning], mode: str) -> NodeRow | None:
    """The node's row; None for a node without an inventory (no agent publishes there)
    or with an unreadable one (a warning says which)."""
    name = meta.name(obj) or "?"
    ann = meta.annotations_of(obj)
    if NODE_GPUS not in ann:
        return None
    try:
        inventory = decode_inventory(ann[NODE_GPUS])
    except CodecError as exc:
        warnings.append(ReportWarning(f"node {name}", str(exc)))
        return None
    beat: dt.datetime | None = None
    if NODE_HEARTBEAT in ann:
        try:
            beat = times.parse(ann[NODE_HEARTBEAT])
        except CodecError as exc:
            warnings.append(ReportWarning(f"node {name}", str(exc)))
    stale = not heartbeat.fresh(beat.timestamp() if beat else None, now.timestamp(), expiry)
    usages = tally(pods.by_node.get(name, ()))
    configured = fault_view.configured_mode(obj, mode)
    gpus = []
    for device in sorted(inventory.devices, key=lambda d: (d.index, d.uuid)):
        on_gpu = sorted(pods.slices.get((name, device.uuid), ()),
                        key=lambda s: (s.namespace, s.pod, s.container))
        takes = fault_view.takes(device, configured,
                                 pods.occupants.get((name, device.uuid), ()))
        serves = mps_user_view.serves(device, configured,
                                      pods.users.get((name, device.uuid), ()))
        gpus.append(GpuRow(device, usages.get(device.uuid, EMPTY), tuple(on_gpu),
                           memory_capacity(device, scaling), takes, serves))
    return NodeRow(name, tuple(gpus), beat, stale, inventory.links, inventory.isolation,
                   isolation_modes.summary(d.isolation for d in inventory.devices))


def _totals(rows: Sequence[NodeRow], pending: int) -> Totals:
    all_gpus = [g for r in rows for g in r.gpus]
    return Totals(
        nodes=len(rows),
        gpus=len(all_gpus),
        healthy_gpus=sum(1 for g in all_gpus if g.device.healthy),
        memory_mib=sum(g.capacity_mib for g in all_gpus),
        memory_allocated_mib=sum(g.usage.memory_mib for g in all_gpus),
        cores=sum(g.device.cores for g in all_gpus),
        cores_allocated=sum(g.usage.cores for g in all_gpus),
        tasks=sum(g.usage.tasks for g in all_gpus),
        slots=sum(g.device.split for g in all_gpus),
        pending_pods=pending,
    )


def build(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]], *,
          now: dt.datetime, heartbeat_expiry_seconds: float,
          scheduler_name: str, extra_schedulers: Collection[str] = (),
          memory_scaling: float = 1.0, fault_defaults: Defaults | None = None,
          isolation_mode: str = isolation_modes.HAMI_CORE) -> Report:
    """The allocation report of a cluster at ``now``.

    The pods that hold GPU slices are those the scheduler counts
    (:func:`vgpu.usage.claimed`: pods of ``scheduler_name`` and of ``extra_schedulers``,
    the config's ``extraSchedulerNames``). A pod without a node that names ``scheduler_name`` and
    has not ended counts as a pending GPU pod. ``fault_defaults`` and ``isolation_mode``
    (the config's ``isolation.faultDomains`` and ``isolation.mode``) say whom a pod
    without a recorded scope trusts and which GPUs are one fault domain.
    """
    warnings: list[ReportWarning] = []
    on_pods = _read_pods(pods, scheduler_name, extra_schedulers, warnings,
                         fault_defaults or Defaults())
    rows: list[NodeRow] = []
    for obj in nodes:
        row = _node_row(obj, on_pods, now=now, expiry=heartbeat_expiry_seconds,
                        scaling=memory_scaling, warnings=warnings,
                        mode=isolation_mode)
        if row is not None:
            rows.append(row)
    rows.sort(key=lambda r: r.name)
    # A slice on a GPU no inventory lists (the GPU failed and left it, or the node is gone)
    # still holds nothing the scheduler can give out; say so rather than drop it silently.
    seen = {(r.name, g.device.uuid) for r in rows for g in r.gpus}
    for (node, uuid), items in sorted(on_pods.slices.items()):
        if (node, uuid) not in seen:
            for s in items:
                warnings.append(ReportWarning(
                    f"pod {s.namespace}/{s.pod}",
                    f"container {s.container} is assigned GPU {uuid} on node {node}, "
                    f"which no node inventory lists"))
    return Report(tuple(rows), _totals(rows, on_pods.pending), tuple(warnings))
