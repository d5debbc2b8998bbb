"""Where the GPU memory went: the allocation report behind ``vgpu inspect``.

A pure function from the cluster's nodes and pods (plain API dicts) to a :class:`Report`
of per node and GPU rows with cluster totals, plus its two renderings (a table for people,
JSON for programs). Everything is derived from the node inventories and the pod
assignments, the same facts the scheduler rebuilds its state from, so the report shows
what the scheduler believes, not what NVML sees. One malformed annotation becomes a
warning in the report; the rest of the cluster is still shown.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu import heartbeat, meta, times
from vgpu.annotations import NODE_GPUS, NODE_HEARTBEAT
from vgpu.codecs import Assignment, decode_inventory
from vgpu.devices import EMPTY, Device, Usage, memory_capacity
from vgpu.errors import CodecError
from vgpu.pods import bind_phase, is_terminated, node_name, pod_key
from vgpu.usage import claimed, tally


@dataclass(frozen=True)
class PodSlice:
    """One container's slice of one GPU."""

    namespace: str
    pod: str
    container: str
    memory_mib: int
    cores: int
    bind_phase: str


@dataclass(frozen=True)
class GpuRow:
    device: Device
    usage: Usage
    pods: tuple[PodSlice, ...] = ()
    # Schedulable memory: the physical size × deviceMemoryScaling (above it when the
    # cluster oversubscribes), what allocations are measured against.
    capacity_mib: int = 0


@dataclass(frozen=True)
class NodeRow:
    name: str
    gpus: tuple[GpuRow, ...]
    heartbeat: dt.datetime | None
    stale: bool


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


def _read_pods(pods: Iterable[Mapping[str, Any]], scheduler_name: str,
               extra_schedulers: Collection[str], warnings: list[ReportWarning]) -> _Pods:
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
        for container, granted in sorted(assignment.containers.items()):
            for g in granted:
                out.slices.setdefault((node, g.uuid), []).append(
                    PodSlice(namespace, name, container, g.memory_mib, g.cores, phase))
    return out


def _node_row(obj: Mapping[str, Any], pods: _Pods, *, now: dt.datetime, expiry: float,
              scaling: float, warnings: list[ReportWarning]) -> NodeRow | None:
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
    gpus = []
    for device in sorted(inventory.devices, key=lambda d: (d.index, d.uuid)):
        on_gpu = sorted(pods.slices.get((name, device.uuid), ()),
                        key=lambda s: (s.namespace, s.pod, s.container))
        gpus.append(GpuRow(device, usages.get(device.uuid, EMPTY), tuple(on_gpu),
                           memory_capacity(device, scaling)))
    return NodeRow(name, tuple(gpus), beat, stale)


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
          memory_scaling: float = 1.0) -> Report:
    """The allocation report of a cluster at ``now``.

    The pods that hold GPU slices are those the scheduler counts
    (:func:`vgpu.usage.claimed`: pods of ``scheduler_name`` and of ``extra_schedulers``,
    the config's ``extraSchedulerNames``). A pod without a node that names ``scheduler_name`` and
    has not ended counts as a pending GPU pod.
    """
    warnings: list[ReportWarning] = []
    on_pods = _read_pods(pods, scheduler_name, extra_schedulers, warnings)
    rows: list[NodeRow] = []
    for obj in nodes:
        row = _node_row(obj, on_pods, now=now, expiry=heartbeat_expiry_seconds,
                        scaling=memory_scaling, warnings=warnings)
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


# --- rendering ---------------------------------------------------------------------------

def _percent(part: int, whole: int) -> str:
    return f"{100 * part // whole}%" if whole else "-"


def _health(node: NodeRow, gpu: GpuRow) -> str:
    health = "healthy" if gpu.device.healthy else "unhealthy"
    # The scheduler places nothing on a node whose heartbeat expired, whatever its GPUs say.
    return f"{health}, node stale" if node.stale else health


def to_json(report: Report) -> dict[str, Any]:
    """The report as plain JSON values (pods always included)."""
    t = report.totals
    return {
        "nodes": [{
            "name": n.name,
            "heartbeat": n.heartbeat.astimezone(dt.UTC).isoformat() if n.heartbeat else None,
            "stale": n.stale,
            "gpus": [{
                "uuid": g.device.uuid, "index": g.device.index, "model": g.device.model,
                "healthy": g.device.healthy, "isolation": g.device.isolation,
                "memoryMiB": g.device.memory_mib, "memoryCapacityMiB": g.capacity_mib,
                "memoryAllocatedMiB": g.usage.memory_mib,
                "cores": g.device.cores, "coresAllocated": g.usage.cores,
                "tasks": g.usage.tasks, "split": g.device.split,
                "pods": [{"namespace": p.namespace, "name": p.pod, "container": p.container,
                          "memoryMiB": p.memory_mib, "cores": p.cores,
                          "bindPhase": p.bind_phase} for p in g.pods],
            } for g in n.gpus],
        } for n in report.nodes],
        "totals": {
            "nodes": t.nodes, "gpus": t.gpus, "healthyGpus": t.healthy_gpus,
            "memoryCapacityMiB": t.memory_mib, "memoryAllocatedMiB": t.memory_allocated_mib,
            "cores": t.cores, "coresAllocated": t.cores_allocated,
            "tasks": t.tasks, "slots": t.slots, "pendingPods": t.pending_pods,
        },
        "warnings": [{"object": w.object, "message": w.message} for w in report.warnings],
    }


def render_json(report: Report) -> str:
    return json.dumps(to_json(report), indent=2)


_HEADER = ("NODE", "GPU", "MODEL", "MEMORY MiB (ALLOC/TOTAL)", "MEM%", "CORES", "TASKS",
           "ISOLATION", "HEALTH")


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]


def render_table(report: Report, details: bool = False) -> str:
    """Aligned columns, one row per GPU, a TOTAL row; with ``details`` the pods on each GPU
    follow their GPU's row, indented."""
    rows: list[tuple[str, ...]] = [_HEADER]
    # Detail lines do not take part in the column alignment; remember where they go.
    after: dict[int, list[str]] = {}
    for node in report.nodes:
        for i, gpu in enumerate(node.gpus):
            d, u = gpu.device, gpu.usage
            rows.append((node.name if i == 0 else "", str(d.index), d.model,
                         f"{u.memory_mib}/{gpu.capacity_mib}",
                         _percent(u.memory_mib, gpu.capacity_mib),
                         f"{u.cores}/{d.cores}", f"{u.tasks}/{d.split}", d.isolation,
                         _health(node, gpu)))
            if details and gpu.pods:
                after[len(rows) - 1] = [
                    f"    {p.namespace}/{p.pod}  container={p.container}  "
                    f"memory={p.memory_mib}MiB  cores={p.cores}"
                    + (f"  phase={p.bind_phase}" if p.bind_phase else "")
                    for p in gpu.pods]
        if not node.gpus:
            rows.append((node.name, "-", "(no GPUs)", "", "", "", "", "",
                         "node stale" if node.stale else ""))
    t = report.totals
    rows.append(("TOTAL", str(t.gpus), f"{t.nodes} nodes",
                 f"{t.memory_allocated_mib}/{t.memory_mib}",
                 _percent(t.memory_allocated_mib, t.memory_mib),
                 f"{t.cores_allocated}/{t.cores}", f"{t.tasks}/{t.slots}", "",
                 f"{t.healthy_gpus}/{t.gpus} healthy"))
    lines: list[str] = []
    for i, line in enumerate(_table(rows)):
        lines.append(line)
        lines.extend(after.get(i, ()))
    lines.append(f"Pending GPU pods: {t.pending_pods}")
    for w in report.warnings:
        lines.append(f"WARNING {w.object}: {w.message}")
    return "\n".join(lines)
