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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.framework.interfaces import (
    ASSIGNMENT_KEY,
    ClusterEvent,
    CycleState,
    Handle,
    PreFilterResult,
)
from scheduler.framework.nodeinfo import NodeInfo
from scheduler.framework.podinfo import PodInfo
from scheduler.framework.snapshot import Column, Snapshot
from scheduler.framework.status import (
    SKIP,
    SUCCESS,
    Code,
    Status,
    unresolvable,
    unschedulable,
)
from scheduler.placement import place as pl
from scheduler.placement import policies
from scheduler.placement import vectorfit as vf
from vgpu.annotations import GpuSelector
from vgpu.devices import largest_percent, memory_capacity, takes_tasks
from vgpu.errors import ConfigError
from vgpu.requests import PodRequest

NO_INVENTORY = "no vGPU inventory"
BAD_INVENTORY = "unreadable GPU inventory"
NO_HEARTBEAT = "no GPU heartbeat"
STALE = "GPU heartbeat expired"

_KEY = "vgpu/pre"
GPU_CORES = "vgpu.gpu_free_cores"
GPU_MEMORY = "vgpu.gpu_free_memory"
GPU_PERCENT = "vgpu.gpu_fit_percent"
#: GPUs per node kept one by one in the index; a node with more is indexed by its best
#: GPU in every slot, which keeps the mask a superset.
WIDTH = 8
# Raw per-GPU state, for explaining failures without a Python loop over every GPU.
RAW = "vgpu.gpu_raw"
RAW_FIELDS = ("present", "healthy", "tasks", "split", "memory_used", "capacity",
              "cores_used", "cores", "model_bits")
DEVICES = "vgpu.devices"
INVENTORY = "vgpu.inventory"
HEARTBEAT = "vgpu.heartbeat"
MODELS = "vgpu.models"


@dataclass
class _Pre:
    request: PodRequest
    rank: Callable[[NodeInfo], pl.GpuRanker]
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
        if policies.ranker_for(self._gpu_policy) is None:
            raise ConfigError(f"defaultGpuPolicy: {self._gpu_policy!r} is not available in this "
                              f"scheduler; use one of {', '.join(policies.gpu_policy_names())}")
        if self._node_policy not in policies.NODE_POLICIES:
            raise ConfigError(f"defaultNodePolicy: {self._node_policy!r} is not available; use "
                              f"one of {', '.join(policies.NODE_POLICIES)}")
        # One bit per GPU model seen, so a type selector is one AND over a column.
        self._model_bits: dict[str, int] = {}
        self._per_gpu_memo: tuple[NodeInfo, tuple[list[int], list[int], list[int]]] | None = None
        self._raw_memo: tuple[NodeInfo, list[list[int]]] | None = None
        self._statuses: dict[tuple[Any, ...], Status] = {}

    # -- indexes ---------------------------------------------------------------------------

    def _models(self, node: NodeInfo) -> int:
        bits = 0
        for d in node.devices:
            bits |= self._model_bit(d.model)
        return bits

    def _per_gpu(self, node: NodeInfo) -> tuple[list[int], list[int], list[int]]:
        """Per GPU slot: free cores, free MiB and the largest percentage that fits; -1 for
        a GPU that takes no task whatever the request (unhealthy, no slot, all compute
        claimed) and for absent slots. Memoised per NodeInfo: three columns ask."""
        memo = self._per_gpu_memo
        if memo is not None and memo[0] is node:
            return memo[1]
        cores, memory, percent = [-1] * WIDTH, [-1] * WIDTH, [-1] * WIDTH
        if len(node.devices) > WIDTH:
            if node.usable:
                cores = [node.max_free_cores] * WIDTH
                memory = [node.max_free_memory] * WIDTH
                percent = [node.max_fit_percent] * WIDTH
        else:
            for i, (d, u) in enumerate(zip(node.devices, node.usages, strict=True)):
                if not takes_tasks(d, u):
                    continue
                cap = memory_capacity(d, self._scaling)
                free = cap - u.memory_mib
                cores[i] = d.cores - u.cores
                memory[i] = free
                pct = largest_percent(free, cap)
                percent[i] = -1 if pct is None else pct
        result = (cores, memory, percent)
        self._per_gpu_memo = (node, result)
        return result

    def _raw(self, node: NodeInfo) -> list[list[int]]:
        """Per field of ``RAW_FIELDS``, one value per GPU slot (memoised per NodeInfo)."""
        memo = self._raw_memo
        if memo is not None and memo[0] is node:
            return memo[1]
        rows = [[0] * WIDTH for _ in RAW_FIELDS]
        if len(node.devices) <= WIDTH:
            for i, (d, u) in enumerate(zip(node.devices, node.usages, strict=True)):
                values = (1, int(d.healthy), u.tasks, d.split, u.memory_mib,
                          memory_capacity(d, self._scaling), u.cores, d.cores,
                          self._model_bit(d.model))
                for row, value in zip(rows, values, strict=True):
                    row[i] = value
        self._raw_memo = (node, rows)
        return rows

    def _model_bit(self, model: str) -> int:
        bit = self._model_bits.get(model)
        if bit is None:
            # Past 62 models every new one shares the last bit: masks stay supersets.
            bit = self._model_bits[model] = 1 << min(len(self._model_bits), 62)
        return bit

    def _capacity(self, node: NodeInfo) -> int:
        for d in node.devices:
            if d.healthy:
                return memory_capacity(d, self._scaling)
        return 0

    def columns(self) -> Sequence[Column]:
        return (
            Column(GPU_CORES, np.int32, lambda n: self._per_gpu(n)[0], -1, WIDTH),
            Column(GPU_MEMORY, np.int64, lambda n: self._per_gpu(n)[1], -1, WIDTH),
            Column(GPU_PERCENT, np.int32, lambda n: self._per_gpu(n)[2], -1, WIDTH),
            Column(HEARTBEAT, np.float64,
                   lambda n: -math.inf if n.static.heartbeat is None else n.static.heartbeat,
                   -math.inf),
            Column(policies.MEMORY_USED, np.int64, lambda n: n.gpu_memory_used, 0),
            Column(policies.MEMORY_TOTAL, np.int64, lambda n: n.gpu_memory_total, 0),
            Column(policies.CORES_USED, np.int64, lambda n: n.gpu_cores_used, 0),
            Column(policies.CORES_TOTAL, np.int64, lambda n: n.gpu_cores_total, 0),
            Column(policies.CAPACITY, np.int64, self._capacity, 0),
            Column(MODELS, np.int64, self._models, 0),
            Column(RAW, np.int64, self._raw, 0, (len(RAW_FIELDS), WIDTH)),
            Column(DEVICES, np.int64, lambda n: len(n.devices), 0),
            Column(INVENTORY, np.int8,
                   lambda n: 0 if n.devices else 2 if n.static.inventory_error else 1, 1),
        )

    # -- filter ----------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        request = pod.gpu
        if request is None or not request.is_gpu_pod:
            state.skip_score.add(self.name)
            return None, SKIP
        choices = request.choices
        gpu_policy = choices.gpu_policy or self._gpu_policy
        node_policy = choices.node_policy or self._node_policy
        rank = policies.ranker_for(gpu_policy)
        if rank is None:
            return None, unresolvable(f"GPU policy {gpu_policy!r} is not available")
        npol = policies.NODE_POLICIES.get(node_policy)
        if npol is None:
            return None, unresolvable(f"node policy {node_policy!r} is not available")
        simple = len(request.containers) == 1 and not choices.selector.numa_bind
        state.write(_KEY, _Pre(request, rank, npol, simple))

        mask = snapshot.column(HEARTBEAT) >= state.now - self._expiry
        cores = snapshot.column(GPU_CORES)
        for c in request.containers:
            ok = cores >= c.cores
            if c.memory_mib is not None:
                ok &= snapshot.column(GPU_MEMORY) >= c.memory_mib
            elif c.memory_percent is not None:
                ok &= snapshot.column(GPU_PERCENT) >= c.memory_percent
            mask &= ok.sum(axis=1) >= min(c.count, WIDTH)
        allowed = self._allowed_models(choices.selector)
        if allowed is not None:
            mask &= (snapshot.column(MODELS) & allowed) != 0
        order = None
        if npol.order is not None:
            capacity = snapshot.column(policies.CAPACITY)
            added = np.zeros(len(capacity), dtype=np.int64)
            for c in request.containers:
                added += c.count * (c.memory_mib if c.memory_mib is not None
                                    else capacity * (c.memory_percent or 100) // 100)
            order = npol.order(snapshot, added, sum(c.count * c.cores
                                                    for c in request.containers))
        return PreFilterResult(mask=mask, order_key=order,
                               ranks_for=None if npol.needs_placement else self.name), SUCCESS

    def _allowed_models(self, selector: GpuSelector) -> int | None:
        if not (selector.use_types or selector.nouse_types):
            return None
        allowed = 0
        for model, bit in self._model_bits.items():
            if selector.type_allowed(model):
                allowed |= bit
        return allowed

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
                node.devices, node.usages, pre.request, self._scaling, pre.rank(node))
        return result

    def _status(self, code: Code, reasons: tuple[str, ...]) -> Status:
        key = (code, reasons)
        status = self._statuses.get(key)
        if status is None:
            status = self._statuses[key] = Status(code, reasons)
        return status

    def explain(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                positions: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64],
                                                           list[Status]] | None:
        """What :meth:`filter` says about the nodes at ``positions``, all at once: per
        position an index into the returned statuses (-1: fits, -2: ask ``filter``).
        None when the request is not one this can explain (several containers, NUMA
        binding, UUID selectors)."""
        pre: _Pre | None = state.read(_KEY)
        if pre is None or not pre.simple:
            return None
        selector = pre.request.choices.selector
        if selector.use_uuids or selector.nouse_uuids:
            return None
        request = pre.request.containers[0]
        table: list[Status] = []
        index: dict[Status, int] = {}

        def code_of(status: Status) -> int:
            if status not in index:
                index[status] = len(table)
                table.append(status)
            return index[status]

        out = np.full(len(positions), -1, dtype=np.int64)
        devices = snapshot.column(DEVICES)[positions]
        out[devices > WIDTH] = -2
        inventory = snapshot.column(INVENTORY)[positions]
        out[inventory == 1] = code_of(self._status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                                   (NO_INVENTORY,)))
        out[inventory == 2] = code_of(self._status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                                   (BAD_INVENTORY,)))
        heartbeat = snapshot.column(HEARTBEAT)[positions]
        open_ = out == -1
        out[open_ & (heartbeat == -math.inf)] = code_of(self._status(Code.UNSCHEDULABLE,
                                                                     (NO_HEARTBEAT,)))
        out[open_ & (heartbeat != -math.inf) & (state.now - heartbeat > self._expiry)] = (
            code_of(self._status(Code.UNSCHEDULABLE, (STALE,))))
        open_ = out == -1
        out[open_ & (devices < request.count)] = code_of(
            self._status(Code.UNSCHEDULABLE, (pl.TOO_FEW_GPUS,)))
        open_ = out == -1
        if not open_.any():
            return out, table
        rows = positions[open_]
        block = snapshot.column(RAW)[rows]
        raw = [block[:, k, :] for k in range(len(RAW_FIELDS))]
        raw[0] = raw[0].astype(np.bool_)
        raw[1] = raw[1].astype(np.bool_)
        gpus = vf.GpuColumns(*raw)
        codes = vf.classify(gpus, cores=request.cores, memory_mib=request.memory_mib,
                            memory_percent=request.memory_percent,
                            allowed_models=self._allowed_models(selector))
        fitting, masks = vf.node_reasons(codes)
        result = np.full(len(rows), -1, dtype=np.int64)
        failing = fitting < request.count
        for mask in np.unique(masks[failing]).tolist():
            reasons = vf.reasons_of(mask) or (pl.TOO_FEW_GPUS,)
            result[failing & (masks == mask)] = code_of(self._status(Code.UNSCHEDULABLE,
                                                                     reasons))
        out[open_] = result
        return out, table

    # -- score -----------------------------------------------------------------------------

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        pre: _Pre | None = state.read(_KEY)
        if pre is None:
            return 0.0
        if not pre.node_policy.needs_placement:
            return pre.node_policy.score(node, self._estimate(pre.request, node))
        result = self._placement(pre, node)
        if isinstance(result, tuple):
            return 0.0
        return pre.node_policy.score(node, result)

    def _estimate(self, request: PodRequest, node: NodeInfo) -> pl.Placement:
        """The pod's totals on ``node``, as the vectorised order computes them."""
        capacity = self._capacity(node)
        memory = cores = 0
        for c in request.containers:
            memory += c.count * (c.memory_mib if c.memory_mib is not None
                                 else capacity * (c.memory_percent or 100) // 100)
            cores += c.count * c.cores
        return pl.Placement((), memory, cores)

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
