"""Permit: no two GPU pods in flight on a node that its agent could confuse
(docs/contracts.md#permit-gate).

The kubelet's Allocate call carries device IDs, not a pod, so the node agent matches it
to a pod in ``bind-phase: allocating`` on its node by the GPUs those IDs name. A GPU pod
chosen for a node where a pod it is :func:`vgpu.confusable.confusable` with has not reached
``success`` or ``failed`` waits at Permit (holding its reservation) and is let through,
first come first served, when that pod's phase moves on, the pod is deleted, or
``permitTimeoutSeconds`` passes since it was let through. With ``scheduler.permitGate:
node`` every GPU pod waits behind the node's in-flight one (one at a time per node, as
before the agent matched by device IDs). Only that node's pods wait; the scheduling cycle
goes on for others. Pods are keyed by uid: a pod deleted and recreated under its name
is another pod, and neither's entry is the other's.
"""

from __future__ import annotations

import vgpu.annotations as ann
from vgpu import codecs, confusable, meta, policy
from vgpu.annotations import GpuSelector
from vgpu.cluster.port import Obj
from vgpu.devices import fit, fit_request, resolve_memory, selectable
from vgpu.errors import CodecError
from vgpu.pods import bind_phase, is_terminated, node_name, pod_id, scheduler_name
from vgpu.requests import ContainerRequest
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, WAIT, Status
from vgpu_scheduler.plugins.gpu.allocation_gate.gate import Gate

__all__ = ["AllocationGate", "Gate"]


def _conflicts(mode: str) -> confusable.Conflicts:
    if mode == policy.PERMIT_NODE:
        return lambda a, b: True
    return confusable.confusable


def _assignment(pod: Obj) -> codecs.Assignment | None:
    try:
        return codecs.assignment_of(pod)
    except CodecError:
        return None  # confusable with anything: held as before


def _grants(info: NodeInfo, want: ContainerRequest, selector: GpuSelector,
             scaling: float, only: frozenset[str] | None) -> list[codecs.Assignment]:
    """Per GPU of the node that fits the container (of ``only``, when given: the others
    cannot clash), a grant with one slice there: for a multi-GPU container its other slices
    are on no GPU, so it clashes with a pod in flight exactly when that GPU is among the
    pod's and the counts match."""
    priorities = {} if want.priority is None else {want.name: want.priority}
    out = []
    for device, usage in zip(info.devices, info.usages, strict=True):
        if only is not None and device.uuid not in only:
            continue
        if fit_request(device, usage, want, selector, scaling) is not None:
            continue
        memory = resolve_memory(want, device, scaling)
        slices = tuple(codecs.GrantedDevice(uuid, memory, want.cores)
                       for uuid in (device.uuid, *(f"?{i}" for i in range(want.count - 1))))
        out.append(codecs.Assignment(info.name, {want.name: slices}, priorities=priorities))
    return out


def _one_gpu_waits(info: NodeInfo, want: ContainerRequest, selector: GpuSelector,
                   scaling: float, held: confusable.OneGpuGrants) -> bool:
    """:func:`_grants` and ``Gate.blocked`` for a one-GPU container, without building
    assignments (they were a fifth of the scheduler's CPU with fractional pods; yappi)."""
    for device, usage in zip(info.devices, info.usages, strict=True):
        if device.uuid not in held:
            continue
        memory = resolve_memory(want, device, scaling)
        if confusable.one_gpu_confusable(device.uuid, memory, want.cores, want.priority,
                                       held) and (
                selectable(device, selector) is None
                and fit(device, usage, memory, want.cores, scaling) is None):
            return True
    return False


class AllocationGate:
    name = "AllocationGate"

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._scaling = handle.config.device_memory_scaling
        section = handle.config.scheduler
        self._mode = section.permit_gate
        self._schedulers = handle.config.vgpu_schedulers
        self.gate = Gate(section.permit_timeout_seconds, _conflicts(section.permit_gate))
        handle.on_pod_event(self._on_pod)

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        """Tell the framework the nodes where a one-container pod could wait behind a pod in
        flight, on some GPU that fits it (the GPU policy, not this, picks among them): such
        a node loses its GPU placement score. Under binpack a burst would otherwise queue at
        the fullest node while others could take it at once; the pod's soft rules keep
        their points, and while every node is busy the pick is as before. Permit still
        decides."""
        request = pod.gpu
        if request is None or not request.is_gpu_pod:
            return None, SKIP
        if len(request.containers) != 1:
            return None, SUCCESS
        if not self.gate.any_in_flight():
            return None, SUCCESS
        want, selector = request.containers[0], request.choices.selector
        gate = self.gate

        def would_wait(info: NodeInfo) -> bool:
            # Asked only of the node about to be picked: a pass over every node with a pod
            # in flight, up front, was a third of the scheduler's CPU in a burst (py-spy).
            in_flight, held = gate.in_flight_view(info.name)
            return bool(in_flight) and self._would_wait(info, want, selector, in_flight, held)

        return PreFilterResult(would_wait=would_wait), SUCCESS

    def _would_wait(self, info: NodeInfo, want: ContainerRequest, selector: GpuSelector,
                    in_flight: list[codecs.Assignment | None],
                    held: confusable.OneGpuGrants | None) -> bool:
        node_mode = self._mode == policy.PERMIT_NODE
        if want.count == 1 and not node_mode and held is not None:
            return _one_gpu_waits(info, want, selector, self._scaling, held)
        # Only GPUs the pods in flight hold can clash.
        only = None if node_mode else confusable.gpus_at_stake(info.name, in_flight)
        return only != frozenset() and self.gate.blocked(
            _grants(info, want, selector, self._scaling, only), in_flight)

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        if not pod.is_gpu_pod:
            return SUCCESS
        entered = self.gate.enter(pod.pod_id, node, state.now, state.assignment)
        return SUCCESS if entered else WAIT

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self._release(pod.pod_id, self._handle.now())

    def _advance(self, node: str, now: float) -> None:
        for key in self.gate.advance(node, now):
            self._handle.allow(key, self.name)

    def tick(self, now: float) -> None:
        for node in self.gate.nodes_with_waiters():
            self._advance(node, now)

    def _release(self, key: str, now: float) -> None:
        node = self.gate.leave(key)
        if node is not None:
            self._advance(node, now)

    def _on_pod(self, old: Obj | None, new: Obj | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        key = pod_id(obj)
        now = self._handle.now()
        if new is None:
            self._release(key, now)
            return
        phase = bind_phase(new)
        bound = node_name(new)
        # A pod another scheduler placed holds no gate, whatever its annotations say: its
        # owner could write them (docs/contracts.md#protected-annotations).
        if (phase == ann.PHASE_ALLOCATING and bound and not is_terminated(new)
                and scheduler_name(new) in self._schedulers):
            since = codecs.bind_time(meta.annotations_of(new))
            self.gate.hold(key, bound, now if since is None else since, _assignment(new))
        elif phase in (ann.PHASE_SUCCESS, ann.PHASE_FAILED) or is_terminated(new) or bound:
            # Allocated, failed, ended, or bound without our annotations or by another
            # scheduler: nothing to wait for.
            self._release(key, now)
