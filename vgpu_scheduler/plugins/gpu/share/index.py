"""The vGPU plugin's per-node index: snapshot columns of GPU facts, and the bulk
explanation of why nodes do not fit.

PreFilter compares a pod's request with these columns (usable GPUs, largest free compute and
memory and memory percentage per GPU slot, heartbeat, models) to keep only nodes that could fit:
necessary conditions only, so the exact Filter never misses one. When none fits, ``explain``
gives Filter's answer for many nodes at once (:mod:`vgpu_scheduler.placement.vectorfit`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vgpu import heartbeat
from vgpu.annotations import GpuSelector
from vgpu.devices import largest_percent, memory_capacity, takes_tasks
from vgpu.requests import ContainerRequest
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodeStatic
from vgpu_scheduler.framework.row_memo import RowMemo, Rows
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import Code, Status
from vgpu_scheduler.placement import place as pl
from vgpu_scheduler.placement import policies
from vgpu_scheduler.placement import vectorfit as vf

NO_INVENTORY = "no vGPU inventory"
BAD_INVENTORY = "unreadable GPU inventory"
NO_HEARTBEAT = "no GPU heartbeat"
STALE = "GPU heartbeat expired"
#: The heartbeat column's value for a node whose kubelet advertises none of the device
#: plugin's devices (the agent is gone): no time is this, so no node with it is fresh.
PLUGIN_GONE = -1.0


def insufficient(resource: str) -> str:
    """kube-scheduler's words for a node without the resource (NodeResourcesFit)."""
    return f"Insufficient {resource}"

GPU_CORES = "vgpu.gpu_free_cores"
GPU_MEMORY = "vgpu.gpu_free_memory"
GPU_PERCENT = "vgpu.gpu_fit_percent"
#: GPUs per node kept one by one; a node with more has its best GPU in every slot (a superset).
WIDTH = 8
# Raw per-GPU state, for explaining failures without a Python loop over every GPU.
RAW = "vgpu.gpu_raw"
RAW_FIELDS = ("present", "healthy", "tasks", "split", "memory_used", "capacity",
              "cores_used", "cores", "model_bits", "cordoned")
DEVICES = "vgpu.devices"
INVENTORY = "vgpu.inventory"
HEARTBEAT = "vgpu.heartbeat"
MODELS = "vgpu.models"

Codes = npt.NDArray[np.int64]

def heartbeat_reason(beat: float | None, now: float, expiry: float) -> str | None:
    """Why a node's heartbeat keeps it from taking GPU pods; None when it is fresh."""
    if beat is None:
        return NO_HEARTBEAT
    if not heartbeat.fresh(beat, now, expiry):
        return STALE
    return None


def _totals(node: NodeInfo) -> tuple[float, float]:
    """The node's GPU memory and compute totals for the utilization columns; both infinite
    when either is none, so that the node's share reads 0 with no special case."""
    if node.gpu_memory_total <= 0 or node.gpu_cores_total <= 0:
        return math.inf, math.inf
    return float(node.gpu_memory_total), float(node.gpu_cores_total)


def plugin_gone(static: NodeStatic, resource: str) -> bool:
    """Whether the node's kubelet advertises 0 devices of ``resource``: its device plugin
    (the node agent) is gone, whatever its heartbeat says; the kubelet would refuse every
    GPU pod bound there for good (issue 36, case 6). A node whose status names no such
    resource (never had a plugin, or an in-memory node) is left to the heartbeat."""
    return static.alloc_other.get(resource, -1) == 0


class GpuIndex:
    """The columns and their bulk reading, for one memory scaling and the device plugin's
    resource name."""

    def __init__(self, scaling: float, resource: str = "nvidia.com/gpu") -> None:
        self._scaling = scaling
        self.resource = resource
        # One bit per GPU model seen, so a type selector is one AND over a column.
        self._model_bits: dict[str, int] = {}
        self._per_gpu_memo: tuple[NodeInfo, tuple[list[int], list[int], list[int]]] | None = None
        self._raw_memo: tuple[NodeInfo, list[list[int]]] | None = None
        self._statuses: dict[tuple[Code, tuple[str, ...]], Status] = {}
        self._ids: dict[Status, int] = {}
        self._table: list[Status] = []
        self._gpu_answers = RowMemo(16)

    # -- columns ---------------------------------------------------------------------------

    def columns(self) -> Sequence[Column]:
        return (
            # The narrowest types for vgpu.limits' bounds: PreFilter reads every slot of
            # every node (at 15,000 nodes, 50 µs a decision for a 64-bit column alone).
            Column(GPU_CORES, np.int8, lambda n: self._per_gpu(n)[0], -1, WIDTH),
            Column(GPU_MEMORY, np.int32, lambda n: self._per_gpu(n)[1], -1, WIDTH),
            Column(GPU_PERCENT, np.int8, lambda n: self._per_gpu(n)[2], -1, WIDTH),
            Column(HEARTBEAT, np.float64, self._heartbeat, -math.inf),
            Column(policies.MEMORY_USED, np.float64, lambda n: float(n.gpu_memory_used), 0.0),
            Column(policies.MEMORY_TOTAL, np.float64, lambda n: _totals(n)[0], math.inf),
            Column(policies.CORES_USED, np.float64, lambda n: float(n.gpu_cores_used), 0.0),
            Column(policies.CORES_TOTAL, np.float64, lambda n: _totals(n)[1], math.inf),
            Column(policies.CAPACITY, np.int64, self.capacity, 0),
            Column(MODELS, np.int64, self._models, 0),
            Column(RAW, np.int64, self._raw, 0, (len(RAW_FIELDS), WIDTH)),
            Column(DEVICES, np.int64, lambda n: len(n.devices), 0),
            Column(INVENTORY, np.int8,
                   lambda n: 0 if n.devices else 2 if n.static.inventory_error else 1, 1),
        )

    def _heartbeat(self, node: NodeInfo) -> float:
        if plugin_gone(node.static, self.resource):
            return PLUGIN_GONE
        return -math.inf if node.static.heartbeat is None else node.static.heartbeat

    def capacity(self, node: NodeInfo) -> int:
        """Schedulable memory of the node's first healthy GPU."""
        for d in node.devices:
            if d.healthy:
                return memory_capacity(d, self._scaling)
        return 0

    def _models(self, node: NodeInfo) -> int:
        bits = 0
        for d in node.devices:
            bits |= self._model_bit(d.model)
        return bits

    def _model_bit(self, model: str) -> int:
        bit = self._model_bits.get(model)
        if bit is None:
            # Past 62 models every new one shares the last bit: masks stay supersets.
            bit = self._model_bits[model] = 1 << min(len(self._model_bits), 62)
        return bit

    def allowed_models(self, selector: GpuSelector) -> int | None:
        """The model bits a type selector allows; None when it restricts no model."""
        if not (selector.use_types or selector.nouse_types):
            return None
        allowed = 0
        for model, bit in self._model_bits.items():
            if selector.type_allowed(model):
                allowed |= bit
        return allowed

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
                memory[i] = min(max(free, -1), 2**31 - 1)  # the int32 column
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
                          self._model_bit(d.model), int(d.cordoned))
                for row, value in zip(rows, values, strict=True):
                    row[i] = value
        self._raw_memo = (node, rows)
        return rows

    # -- reading ---------------------------------------------------------------------------

    def status(self, code: Code, *reasons: str) -> Status:
        """One Status object per distinct answer, numbered in the order first given: the
        summary counts nodes by object, and the per-GPU answers are kept by number."""
        key = (code, reasons)
        status = self._statuses.get(key)
        if status is None:
            status = self._statuses[key] = Status(code, reasons)
            self._ids[status] = len(self._table)
            self._table.append(status)
        return status

    def _id(self, code: Code, *reasons: str) -> int:
        return self._ids[self.status(code, *reasons)]

    def explain(self, snapshot: Snapshot, positions: npt.NDArray[np.int64], *, now: float,
                expiry: float, request: ContainerRequest,
                selector: GpuSelector) -> tuple[Codes, list[Status]]:
        """Filter's answer for one container alone at ``positions``: per position an index
        into the returned statuses, -1 for "fits", -2 for "ask Filter"."""
        out = np.full(len(positions), -1, dtype=np.int64)
        devices = snapshot.column(DEVICES)[positions]
        out[devices > WIDTH] = -2
        self._explain_node(snapshot, positions, now=now, expiry=expiry, request=request,
                           out=out)
        open_ = out == -1
        if open_.any():
            allowed = self.allowed_models(selector)
            # The per-GPU answer reads no clock: kept per request, updated row by row (a
            # full cluster turns away pod after pod of the same shape).
            key = (request.count, request.cores, request.memory_mib, request.memory_percent,
                   allowed)
            codes = self._gpu_answers.get(
                key, snapshot, lambda rows: self._explain_gpus(snapshot, rows, request,
                                                               allowed))
            out[open_] = codes[positions[open_]]
        return out, list(self._table)

    def _explain_node(self, snapshot: Snapshot, positions: npt.NDArray[np.int64], *,
                      now: float, expiry: float, request: ContainerRequest,
                      out: Codes) -> None:
        """The reasons that concern the node as a whole: inventory, heartbeat, GPU count."""
        silent = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        inventory = snapshot.column(INVENTORY)[positions]
        out[inventory == 1] = self._id(silent, NO_INVENTORY)
        out[inventory == 2] = self._id(silent, BAD_INVENTORY)
        beats = snapshot.column(HEARTBEAT)[positions]
        open_ = out == -1
        out[open_ & (beats == -math.inf)] = self._id(silent, NO_HEARTBEAT)
        out[open_ & (beats == PLUGIN_GONE)] = self._id(silent, insufficient(self.resource))
        stale = ((beats != -math.inf) & (beats != PLUGIN_GONE)
                 & ~(beats >= heartbeat.oldest_fresh(now, expiry)))
        out[open_ & stale] = self._id(silent, STALE)
        devices = snapshot.column(DEVICES)[positions]
        out[(out == -1) & (devices < request.count)] = self._id(silent, pl.TOO_FEW_GPUS)

    def _explain_gpus(self, snapshot: Snapshot, rows: Rows, request: ContainerRequest,
                      allowed: int | None) -> Codes:
        """The per-GPU reasons of the nodes at ``rows``, as if every node-level fact
        allowed the pod: a status number per row, -1 where it fits."""
        block = snapshot.column(RAW)[rows]
        raw = [block[:, k, :] for k in range(len(RAW_FIELDS))]
        raw[0] = raw[0].astype(np.bool_)
        raw[1] = raw[1].astype(np.bool_)
        raw[-1] = raw[-1].astype(np.bool_)
        codes = vf.classify(vf.GpuColumns(*raw), cores=request.cores,
                            memory_mib=request.memory_mib,
                            memory_percent=request.memory_percent, allowed_models=allowed)
        fitting, masks = vf.node_reasons(codes)
        result = np.full(len(fitting), -1, dtype=np.int64)
        failing = fitting < request.count
        if not failing.any():
            return result
        # The same GPUs with nothing on them: where even that is too little, no
        # preemption can help (as the exact filter says with fits_empty).
        idle = vf.fits_idle(vf.GpuColumns(*(field[failing] for field in raw)),
                            cores=request.cores, memory_mib=request.memory_mib,
                            memory_percent=request.memory_percent, allowed_models=allowed)
        hopeless = np.zeros(len(fitting), dtype=np.bool_)
        hopeless[failing] = idle.sum(axis=1) < request.count
        for mask in np.unique(masks[failing]).tolist():
            reasons = vf.reasons_of(mask) or (pl.TOO_FEW_GPUS,)
            for code, which in ((Code.UNSCHEDULABLE, ~hopeless),
                                (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, hopeless)):
                rows_ = failing & (masks == mask) & which
                if rows_.any():
                    result[rows_] = self._id(code, *reasons)
        return result
