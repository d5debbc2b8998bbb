"""The invariant of the fault suite, read from the API server's own objects: no GPU holds
more memory, compute or tasks than it has, among the pods actually bound (what the
scheduler handed out) and among those served (what the node agent's Allocate gave a
container: ``bind-phase: success``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import vgpu.annotations as ann
from vgpu import codecs, meta, usage
from vgpu.cluster.port import Obj
from vgpu.devices import Device, Usage
from vgpu.errors import CodecError
from vgpu.pods import is_terminated, node_name


@dataclass(frozen=True)
class Breach:
    """One GPU over what it has, among ``which`` pods (``bound`` or ``served``)."""

    which: str
    gpu: str
    used: Usage
    device: Device
    pods: tuple[str, ...]

    def __str__(self) -> str:
        return (f"{self.which}: {self.gpu} holds {self.used.memory_mib}/"
                f"{self.device.memory_mib} MiB, {self.used.cores}/{self.device.cores} cores, "
                f"{self.used.tasks}/{self.device.split} tasks: {', '.join(self.pods)}")


def devices_of(nodes: Iterable[Obj]) -> dict[str, Device]:
    found: dict[str, Device] = {}
    for node in nodes:
        raw = meta.annotations_of(node).get(ann.NODE_GPUS)
        if raw is None:
            continue
        try:
            found.update({d.uuid: d for d in codecs.decode_inventory(raw).devices})
        except CodecError:
            continue  # a poisoned inventory holds nothing
    return found


def breaches(pods: Iterable[Obj], devices: Mapping[str, Device]) -> list[Breach]:
    """Every GPU of ``devices`` over its capacity, among the bound and the served pods."""
    bound: list[tuple[str, codecs.Assignment]] = []
    for pod in pods:
        if node_name(pod) is None or is_terminated(pod):
            continue
        try:
            assignment = codecs.assignment_of(pod)
        except CodecError:
            continue
        if assignment is not None:
            bound.append((f"{meta.namespace(pod)}/{meta.name(pod)}", assignment))
    served_names = {f"{meta.namespace(p)}/{meta.name(p)}" for p in pods
                    if meta.annotations_of(p).get(ann.BIND_PHASE) == ann.PHASE_SUCCESS}
    found = []
    for which, chosen in (("bound", bound),
                          ("served", [b for b in bound if b[0] in served_names])):
        used = usage.tally(a for _, a in chosen)
        for uuid, total in used.items():
            device = devices.get(uuid)
            if device is None:
                continue
            if (total.memory_mib > device.memory_mib or total.cores > device.cores
                    or total.tasks > device.split):
                holders = tuple(sorted(n for n, a in chosen if uuid in a.gpu_ids))
                found.append(Breach(which, uuid, total, device, holders))
    return found
