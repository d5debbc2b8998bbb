"""Whether the GPU slices a scheduling cycle chose still fit the node as the cache has it.

A cycle decides on the snapshot it took when it started; the informers keep applying
watch events meanwhile (in the deployment, on their own threads), so by the time the pod
is assumed, a pod bound by another binder may hold part of the chosen GPU. kube-scheduler
assumes regardless and lets the kubelet refuse what does not fit; nothing refuses a vGPU
slice after the fact, so the cache checks, under its lock, that the slices fit on top of
what it counts now (:func:`vgpu.devices.fit`, the Filter's own rule), and says why
it assumed nothing (:class:`Refused`).
"""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.codecs import Assignment
from vgpu.devices import EMPTY, fit, fit_held
from vgpu.init_reuse import footprint
from vgpu_scheduler.framework.nodeinfo import NodeInfo


@dataclass(frozen=True)
class Refused:
    """Why :meth:`~vgpu_scheduler.host.cache.Cache.assume` assumed nothing."""

    reason: str
    #: The watch showed the pod bound: there is nothing to retry.
    bound: bool = False
    #: The pod's last Binding may still land: no retry until that is settled (its binding
    #: cycle sends the pod back to the queue then).
    in_doubt: bool = False


BOUND = Refused("bound meanwhile by another binder", bound=True)
IN_DOUBT = Refused("its last Binding may still land", in_doubt=True)


def no_room(info: NodeInfo, assignment: Assignment | None) -> str | None:
    """Why ``assignment`` no longer fits ``info`` (None: it fits)."""
    if assignment is None:
        return None
    devices = {d.uuid: d for d in info.devices}
    used = dict(info.gpu_usage)
    if assignment.before_apps:
        # Init containers count by the largest on each GPU (vgpu.init_reuse).
        for uuid, held in footprint(assignment.containers, assignment.before_apps).items():
            device = devices.get(uuid)
            if device is None:
                return f"GPU {uuid} is gone from node {info.name}"
            reason = fit_held(device, used.get(uuid, EMPTY), held, info.scaling)
            if reason is not None:
                return (f"GPU {uuid} on node {info.name} changed during the cycle "
                        f"({reason.value})")
        return None
    for slices in assignment.containers.values():
        for granted in slices:
            device = devices.get(granted.uuid)
            if device is None:
                return f"GPU {granted.uuid} is gone from node {info.name}"
            now = used.get(granted.uuid, EMPTY)
            reason = fit(device, now, granted.memory_mib, granted.cores, info.scaling)
            if reason is not None:
                return (f"GPU {granted.uuid} on node {info.name} changed during the cycle "
                        f"({reason.value})")
            used[granted.uuid] = now.add(granted.memory_mib, granted.cores)
    return None
