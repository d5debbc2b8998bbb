"""The built-in GPU and node placement policies, by name (the names of :mod:`vgpu.policy`).

A GPU policy ranks the GPUs of the chosen node that fit a container; a node policy scores
a node with the pod placed on it, and may compute that score for every node at once from
snapshot columns (so the framework scores many candidates at once). Policies that need more than
a node's GPUs (the fragmentation-aware one weighs the whole workload) are plugins that
provide a GPU policy (:class:`vgpu_scheduler.framework.interfaces.GpuPolicyPlugin`); the
framework hands those to the vGPU plugin beside the built-in ones here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.row_memo import ALL, Rows
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.placement import hami_node
from vgpu_scheduler.placement.place import GpuRanker, Placement


def used_share(c: GpuCandidate) -> float:
    """How full the GPU is: the mean of its memory share (of the schedulable, scaled
    memory) and its compute share."""
    memory = c.usage.memory_mib / (c.capacity_mib or 1)
    return (memory + c.usage.cores / (c.device.cores or 1)) / 2


def lowest_task_count(cands: Sequence[GpuCandidate]) -> list[GpuCandidate]:
    """HAMi's default: the GPU running the fewest tasks, then the lowest index."""
    return sorted(cands, key=lambda c: (c.usage.tasks, c.device.index))


def binpack(cands: Sequence[GpuCandidate]) -> list[GpuCandidate]:
    """The fullest GPU first, keeping empty GPUs whole for large requests."""
    return sorted(cands, key=lambda c: (-used_share(c), c.device.index))


def spread(cands: Sequence[GpuCandidate]) -> list[GpuCandidate]:
    """The emptiest GPU first."""
    return sorted(cands, key=lambda c: (used_share(c), c.device.index))


GPU_POLICIES: Mapping[str, GpuRanker] = MappingProxyType({
    "lowest-task-count": lowest_task_count,
    "binpack": binpack,
    "spread": spread,
})


NodeScorer = Callable[[NodeInfo, Placement], float]
NodeScores = Callable[[Snapshot, "npt.NDArray[np.int64] | int", int, Rows],
                      "npt.NDArray[np.float64]"]

# Snapshot columns the vGPU plugin maintains for node policies (sums over healthy GPUs).
MEMORY_USED = "vgpu.memory_used"
MEMORY_TOTAL = "vgpu.memory_total"
CORES_USED = "vgpu.cores_used"
CORES_TOTAL = "vgpu.cores_total"
#: Schedulable memory of the node's first healthy GPU: what a percentage resolves against
#: in the node-level estimate (nodes carry one GPU model in practice).
CAPACITY = "vgpu.capacity"


@dataclass(frozen=True)
class NodePolicy:
    """Scores a node (0–100) with the pod placed on it.

    ``scores`` computes the same score for many nodes at once from snapshot columns (the
    rows given: all, or those changed since the last pod of the shape), given the MiB the
    pod would add on each of those nodes and the cores it adds, equal to ``score`` to the
    bit; the framework then reads the candidates' scores from it. A policy whose score
    needs to know exactly which GPUs the pod gets (a fragmentation measure) sets
    ``needs_placement``; otherwise it is given a :class:`Placement` with totals only.
    """

    score: NodeScorer
    scores: NodeScores | None = None
    needs_placement: bool = False


def utilization_after(node: NodeInfo, placement: Placement) -> float:
    """The node's GPU use (mean of memory and compute shares) with the pod placed."""
    if not node.gpu_memory_total or not node.gpu_cores_total:
        return 0.0
    mem = min((node.gpu_memory_used + placement.memory_mib) / node.gpu_memory_total, 1.0)
    cores = min((node.gpu_cores_used + placement.cores) / node.gpu_cores_total, 1.0)
    return (mem + cores) / 2


def utilization_after_all(snapshot: Snapshot, memory: npt.NDArray[np.int64] | int,
                          cores: int, rows: Rows = ALL) -> npt.NDArray[np.float64]:
    """:func:`utilization_after` for the snapshot positions ``rows`` at once.

    The columns are floats, totals infinite on a node without GPU memory or compute (its
    share is then 0, as :func:`utilization_after` says), and every step writes into the
    array the first one made: at 15,000 nodes the integer columns' conversions and the
    temporaries were 240 µs of each decision, these eight passes 60 µs. Integers below
    2**53 add exactly as floats, so the figures are the integer formula's to the bit.
    """
    mem: npt.NDArray[np.float64] = np.add(snapshot.column(MEMORY_USED)[rows], memory)
    np.divide(mem, snapshot.column(MEMORY_TOTAL)[rows], out=mem)
    np.minimum(mem, 1.0, out=mem)
    cpu: npt.NDArray[np.float64] = np.add(snapshot.column(CORES_USED)[rows], cores)
    np.divide(cpu, snapshot.column(CORES_TOTAL)[rows], out=cpu)
    np.minimum(cpu, 1.0, out=cpu)
    np.add(mem, cpu, out=mem)
    np.multiply(mem, 0.5, out=mem)
    return mem


def _binpack_scores(snapshot: Snapshot, memory: npt.NDArray[np.int64] | int, cores: int,
                    rows: Rows) -> npt.NDArray[np.float64]:
    used = utilization_after_all(snapshot, memory, cores, rows)
    return np.multiply(used, 100.0, out=used)


def _spread_scores(snapshot: Snapshot, memory: npt.NDArray[np.int64] | int, cores: int,
                   rows: Rows) -> npt.NDArray[np.float64]:
    free = np.subtract(1.0, utilization_after_all(snapshot, memory, cores, rows))
    return np.multiply(free, 100.0, out=free)


def _hami_binpack_scores(snapshot: Snapshot, memory: npt.NDArray[np.int64] | int, cores: int,
                         rows: Rows) -> npt.NDArray[np.float64]:
    # The scalar score's operations in its order, so that the two agree to the bit.
    return np.multiply(hami_node.scores(snapshot, rows), 100.0) / hami_node.TOP


def _hami_spread_scores(snapshot: Snapshot, memory: npt.NDArray[np.int64] | int, cores: int,
                        rows: Rows) -> npt.NDArray[np.float64]:
    free = np.subtract(1.0, hami_node.scores(snapshot, rows) / hami_node.TOP)
    return np.multiply(free, 100.0, out=free)


NODE_POLICIES: Mapping[str, NodePolicy] = MappingProxyType({
    "binpack": NodePolicy(
        lambda n, p: 100.0 * utilization_after(n, p), _binpack_scores),
    "spread": NodePolicy(
        lambda n, p: 100.0 * (1.0 - utilization_after(n, p)), _spread_scores),
    # HAMi's: its score of the node before the pod, whatever the pod adds (.hami_node).
    "hami-binpack": NodePolicy(
        lambda n, p: 100.0 * hami_node.score(n) / hami_node.TOP, _hami_binpack_scores),
    "hami-spread": NodePolicy(
        lambda n, p: 100.0 * (1.0 - hami_node.score(n) / hami_node.TOP), _hami_spread_scores),
})
