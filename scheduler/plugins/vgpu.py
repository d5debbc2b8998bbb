"""The vGPU plugin: per-GPU fit, node score by node policy, GPU choice at Reserve.

PreFilter turns the pod's request into a mask over the snapshot's per-node GPU
aggregates (usable GPUs, largest free compute, largest free memory and memory percentage,
heartbeat, GPU models): necessary conditions only, so the exact Filter (which asks
:func:`vgpu.devices.fit_request` about every GPU) never sees most nodes that cannot fit
and never misses one that can. Score places the pod on each scored node with the pod's
GPU policy and rates the result with its node policy; Reserve keeps the chosen node's
placement as the pod's assignment.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler import placement as pl
from scheduler import policies
from scheduler.framework.interfaces import (
    ASSIGNMENT_KEY,
    ClusterEvent,
    CycleState,
    Handle,
    PreFilterResult,
)
from scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable, unschedulable
from scheduler.nodeinfo import NodeInfo
from scheduler.podinfo import PodInfo
from scheduler.snapshot import Column, Snapshot
from vgpu.errors import ConfigError
from vgpu.requests import PodRequest

NO_INVENTORY = "no vGPU inventory"
BAD_INVENTORY = "unreadable GPU inventory"
NO_HEARTBEAT = "no GPU heartbeat"
STALE = "GPU heartbeat expired"

_KEY = "vgpu/pre"
USABLE = "vgpu.usable"
MAX_CORES = "vgpu.max_free_cores"
MAX_MEMORY = "vgpu.max_free_memory"
MAX_PERCENT = "vgpu.max_fit_percent"
HEARTBEAT = "vgpu.heartbeat"
MODELS = "vgpu.models"


@dataclass
class _Pre:
    request: PodRequest
    rank: pl.GpuRanker
    node_policy: policies.NodePolicy
    simple: bool
    placements: dict[str, pl.Placement | tuple[str, ...]] = field(default_factory=dict)


def heartbeat_reason(heartbeat: float | None, now: float, expiry: float) -> str | None:
    if heartbeat is None:
        return NO_HEARTBEAT
    if now - heartbeat > expiry:
        return STALE
    return None


class VGPU:
    name = "VGPU"

    def __init__(self, handle: Handle) -> None:
        config = handle.config
        self._scaling = config.device_memory_scaling
        self._expiry = config.node_heartbeat_expiry_seconds
        self._gpu_policy = config.default_gpu_policy
        self._node_policy = config.default_node_policy
        if self._gpu_policy not in policies.GPU_POLICIES:
            raise ConfigError(f"defaultGpuPolicy: {self._gpu_policy!r} is not available in this "
                              f"scheduler; use one of {', '.join(policies.GPU_POLICIES)}")
        if self._node_policy not in policies.NODE_POLICIES:
            raise ConfigError(f"defaultNodePolicy: {self._node_policy!r} is not available; use "
                              f"one of {', '.join(policies.NODE_POLICIES)}")
        # One bit per GPU model seen, so a type selector is one AND over a column.
        self._model_bits: dict[str, int] = {}

    # -- indexes ---------------------------------------------------------------------------

    def _models(self, node: NodeInfo) -> int:
        bits = 0
        for d in node.devices:
            bit = self._model_bits.get(d.model)
            if bit is None:
                # Past 62 models every new one shares the last bit: the mask stays a superset.
                bit = self._model_bits[d.model] = 1 << min(len(self._model_bits), 62)
            bits |= bit
        return bits

    def columns(self) -> Sequence[Column]:
        return (
            Column(USABLE, np.int32, lambda n: n.usable, 0),
            Column(MAX_CORES, np.int32, lambda n: n.max_free_cores if n.usable else -1, -1),
            Column(MAX_MEMORY, np.int64, lambda n: n.max_free_memory if n.usable else -1, -1),
            Column(MAX_PERCENT, np.int32, lambda n: n.max_fit_percent if n.usable else -1, -1),
            Column(HEARTBEAT, np.float64,
                   lambda n: -math.inf if n.static.heartbeat is None else n.static.heartbeat,
                   -math.inf),
            Column(policies.UTILIZATION_COLUMN, np.float64, lambda n: n.utilization, 0.0),
            Column(MODELS, np.int64, self._models, 0),
        )

    # -- filter ----------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        request = pod.gpu
        if request is None or not request.is_gpu_pod:
            return None, SKIP
        choices = request.choices
        gpu_policy = choices.gpu_policy or self._gpu_policy
        node_policy = choices.node_policy or self._node_policy
        rank = policies.GPU_POLICIES.get(gpu_policy)
        if rank is None:
            return None, unresolvable(f"GPU policy {gpu_policy!r} is not available")
        npol = policies.NODE_POLICIES.get(node_policy)
        if npol is None:
            return None, unresolvable(f"node policy {node_policy!r} is not available")
        simple = len(request.containers) == 1 and not choices.selector.numa_bind
        state.write(_KEY, _Pre(request, rank, npol, simple))

        need = max(c.count for c in request.containers)
        mask = snapshot.column(USABLE) >= need
        mask &= snapshot.column(HEARTBEAT) >= state.now - self._expiry
        for c in request.containers:
            if c.cores > 0:
                mask &= snapshot.column(MAX_CORES) >= c.cores
            if c.memory_mib is not None:
                mask &= snapshot.column(MAX_MEMORY) >= c.memory_mib
            elif c.memory_percent is not None:
                mask &= snapshot.column(MAX_PERCENT) >= c.memory_percent
        selector = choices.selector
        if selector.use_types or selector.nouse_types:
            allowed = 0
            for model, bit in self._model_bits.items():
                if selector.type_allowed(model):
                    allowed |= bit
            mask &= (snapshot.column(MODELS) & allowed) != 0
        return PreFilterResult(mask=mask, order=npol.order), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        pre: _Pre = state.read(_KEY)
        static = node.static
        if not static.devices:
            return unresolvable(BAD_INVENTORY if static.inventory_error else NO_INVENTORY)
        reason = heartbeat_reason(static.heartbeat, state.now, self._expiry)
        if reason is not None:
            return unschedulable(reason)
        if pre.simple:
            reasons = pl.fits(static.devices, node.usages, pre.request.containers[0],
                              pre.request.choices.selector, self._scaling)
        else:
            result = self._placement(pre, node)
            reasons = result if isinstance(result, tuple) else ()
        return unschedulable(*reasons) if reasons else SUCCESS

    def _placement(self, pre: _Pre, node: NodeInfo) -> pl.Placement | tuple[str, ...]:
        result = pre.placements.get(node.name)
        if result is None:
            result = pre.placements[node.name] = pl.place(
                node.devices, node.usages, pre.request, self._scaling, pre.rank)
        return result

    # -- score -----------------------------------------------------------------------------

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        pre: _Pre | None = state.read(_KEY)
        if pre is None:
            return 0.0
        result = self._placement(pre, node)
        if isinstance(result, tuple):
            return 0.0
        return pre.node_policy.score(node, result)

    # -- reserve ---------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        pre: _Pre | None = state.read(_KEY)
        if pre is None:
            return SUCCESS
        info = state.snapshot.get(node) if state.snapshot is not None else None
        if info is None:
            return unschedulable(f"node {node} is gone")
        result = self._placement(pre, info)
        if isinstance(result, tuple):
            return unschedulable(*result)
        state.write(ASSIGNMENT_KEY, result.assignment(node, info.devices))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        state.write(ASSIGNMENT_KEY, None)

    # -- requeueing ------------------------------------------------------------------------

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        if event.resource == "pod":
            return event.action == "delete" and event.freed is not None
        return event.action == "add" or bool(
            event.changes & {"inventory", "heartbeat", "allocatable"})
