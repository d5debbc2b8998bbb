"""The scheduler's own per-GPU accounting (its ``vgpu_scheduler_gpu_*`` metrics, served
with ``scheduler.perGpuMetrics``) beside a fresh count from the API server's pods (issue
50): after a fault, the two must agree, GPU by GPU."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from prometheus_client.parser import text_string_to_metric_families

from vgpu import usage
from vgpu.cluster.port import Obj
from vgpu.devices import Usage

MIB = 1024 * 1024
FIGURES = {"vgpu_scheduler_gpu_memory_allocated_bytes": "memory",
           "vgpu_scheduler_gpu_cores_allocated_percent": "cores",
           "vgpu_scheduler_gpu_tasks": "tasks"}


def scheduler_view(metrics_text: str, uuids: Collection[str]) -> dict[str, Usage]:
    """What the scheduler counts on each GPU of ``uuids`` that holds anything."""
    found: dict[str, dict[str, int]] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            what = FIGURES.get(sample.name)
            uuid = sample.labels.get("uuid", "")
            if what is None or uuid not in uuids:
                continue
            value = int(sample.value / MIB) if what == "memory" else int(sample.value)
            found.setdefault(uuid, {})[what] = value
    return {uuid: Usage(f.get("memory", 0), f.get("cores", 0), f.get("tasks", 0))
            for uuid, f in found.items() if any(f.values())}


def fresh_tally(pods: Iterable[Obj], schedulers: Collection[str],
                uuids: Collection[str]) -> dict[str, Usage]:
    """What the pods the API server holds take on each GPU of ``uuids``, counted now by the
    rule every component counts by (:func:`vgpu.usage.claimed`)."""
    held = [a for p in pods if (a := usage.claimed(p, schedulers)) is not None]
    return {uuid: u for uuid, u in usage.tally(held).items() if uuid in uuids and u != Usage()}
