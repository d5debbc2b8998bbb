"""For a pod no node took: the nodes closest to holding its GPU containers, and what is
short on each ("GPU 1 (A100): memory: need 12000 MiB, free 8000 MiB").

Pure: node inventories and the usage every bound pod claims (:func:`vgpu.usage.tally`),
judged with the scheduler's own per-GPU rule (:func:`vgpu.devices.fit_request`). It looks
at GPUs only and at each container on its own; the scheduler's last attempt (its
``FailedScheduling`` event) speaks for every other filter. Computed when asked, from the
cluster as it is then, so the scheduler writes nothing extra for it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from vgpu.annotations import GpuSelector
from vgpu.devices import EMPTY, Device, FitReason, Usage, fit_request, memory_capacity
from vgpu.devices import resolve_memory as slice_on
from vgpu.requests import ContainerRequest


@dataclass(frozen=True)
class NodeFit:
    node: str
    #: GPU containers whose vGPUs all fit now.
    fitting: int
    containers: int
    #: What is short, one line per container that does not fit.
    short: tuple[str, ...]

    @property
    def fits(self) -> bool:
        return self.fitting == self.containers


def _gpu(device: Device) -> str:
    return f"GPU {device.index} ({device.model})"


def _why_not(device: Device, usage: Usage, request: ContainerRequest, reason: FitReason,
             scaling: float) -> str:
    if reason is FitReason.MEMORY:
        free = memory_capacity(device, scaling) - usage.memory_mib
        return (f"{_gpu(device)}: memory: need {slice_on(request, device, scaling)} MiB, "
                f"free {max(free, 0)} MiB")
    if reason is FitReason.CORES:
        return (f"{_gpu(device)}: cores: need {request.cores}%, "
                f"free {max(device.cores - usage.cores, 0)}%")
    if reason is FitReason.NO_SLOTS:
        return f"{_gpu(device)}: all {device.split} task slots taken"
    return f"{_gpu(device)}: {reason.value}"


def container_fit(request: ContainerRequest, devices: Sequence[Device],
                  usages: Mapping[str, Usage], selector: GpuSelector,
                  scaling: float, *, barred: Collection[str] = (),
                  users: Collection[str] = ()) -> str | None:
    """None when ``request``'s vGPUs fit on distinct GPUs of the node, else what is short:
    the GPU that comes closest (most free memory among those the pod may use). ``barred``:
    GPUs the pod may not join (their fault domain holds a pod either does not trust);
    ``users``: MPS GPUs whose server serves another user."""
    shut = [d for d in devices if d.uuid in barred]
    busy = [d for d in devices if d.uuid in users and d.uuid not in barred]
    devices = [d for d in devices if d.uuid not in barred and d.uuid not in users]
    verdicts = [(d, usages.get(d.uuid, EMPTY),
                 fit_request(d, usages.get(d.uuid, EMPTY), request, selector, scaling))
                for d in devices]
    have = sum(1 for _, _, reason in verdicts if reason is None)
    if have >= request.count:
        return None
    head = _head(request, have, shut, busy)
    allowed = [v for v in verdicts if v[2] is not None and v[2] not in _EXCLUDED]
    if not allowed:
        return _none_closer(head, [v[2] for v in verdicts], have=have,
                            shut=bool(shut or busy))
    device, usage, reason = max(allowed, key=lambda v: (
        v[0].healthy, memory_capacity(v[0], scaling) - v[1].memory_mib))
    assert reason is not None
    return f"{head}; closest {_why_not(device, usage, request, reason, scaling)}"


_EXCLUDED = (FitReason.TYPE_EXCLUDED, FitReason.UUID_EXCLUDED)


def _head(request: ContainerRequest, have: int, shut: Sequence[Device],
          busy: Sequence[Device]) -> str:
    """How many GPUs fit, and which ones the pod may not join and why."""
    head = f"container {request.name}: {have}/{request.count} GPU(s) fit"
    if shut:
        head += (f"; {', '.join(_gpu(d) for d in shut)} share(s) a fault domain with pods "
                 f"it may not join (vgpu.io/fault-domain)")
    if busy:
        head += (f"; {', '.join(_gpu(d) for d in busy)} serve(s) MPS clients of another "
                 f"user (runAsUser)")
    return head


def _none_closer(head: str, reasons: Sequence[FitReason | None], *, have: int,
                 shut: bool) -> str:
    """What is short when no GPU the pod may use comes closer than the ones that fit."""
    if not reasons and not shut:
        return f"{head}; the node has no GPUs"
    if any(r in _EXCLUDED for r in reasons):
        return (f"{head}; every {'other ' if have else ''}GPU's model or UUID is excluded "
                f"by the pod's annotations")
    return f"{head}; the node has no other GPU{' it may join' if shut else ''}"


#: What else keeps a container that fits by count off a node (the links it requires):
#: called with the node's name and the container, None when nothing does.
Beyond = Callable[[str, ContainerRequest], "str | None"]


def _short(node: str, request: ContainerRequest, devices: Sequence[Device], *,
           usages: Mapping[str, Usage], selector: GpuSelector, scaling: float,
           beyond: Beyond | None, barred: Collection[str],
           users: Collection[str]) -> str | None:
    short = container_fit(request, devices, usages, selector, scaling, barred=barred,
                          users=users)
    if short is None and beyond is not None:
        short = beyond(node, request)
    return short


def closest_nodes(requests: Sequence[ContainerRequest],
                  inventories: Mapping[str, Sequence[Device]], *, stale: Mapping[str, str],
                  usages: Mapping[str, Usage], selector: GpuSelector, scaling: float,
                  limit: int = 3, beyond: Beyond | None = None,
                  barred: Mapping[str, Collection[str]] | None = None,
                  users: Mapping[str, Collection[str]] | None = None) -> tuple[NodeFit, ...]:
    """The ``limit`` nodes holding most of the pod's GPU containers, most free memory
    first among equals. ``stale`` names nodes whose agent stopped reporting, and why;
    ``beyond`` what else a container that fits by count needs; ``barred`` per node the
    GPUs the pod may not join (fault domains), ``users`` the MPS GPUs of another user."""
    wanted = [r for r in requests if r.count > 0]
    ranked: list[tuple[tuple[int, int, int, str], NodeFit]] = []
    for node, devices in inventories.items():
        if node in stale:
            fit = NodeFit(node, 0, len(wanted), (stale[node],))
            ranked.append(((1, 0, 0, node), fit))
            continue
        short = [s for r in wanted
                 if (s := _short(node, r, devices, usages=usages, selector=selector,
                                 scaling=scaling, beyond=beyond,
                                 barred=(barred or {}).get(node, ()),
                                 users=(users or {}).get(node, ()))) is not None]
        free = sum(memory_capacity(d, scaling) - usages.get(d.uuid, EMPTY).memory_mib
                   for d in devices if d.healthy)
        fit = NodeFit(node, len(wanted) - len(short), len(wanted), tuple(short))
        ranked.append(((0, -fit.fitting, -free, node), fit))
    ranked.sort(key=lambda item: item[0])
    return tuple(fit for _, fit in ranked[:limit])
