"""HAMi's node policies (``hami.io/node-scheduler-policy``, or ``hami-binpack`` and
``hami-spread`` by vgpu's names; docs/hami-migration.md#node-policies), with HAMi's score
and HAMi's moment.

HAMi scores a node before the pod is placed (``ComputeDefaultScore``), over all the
node's GPUs: ``10 × (Σ tasks / Σ split + Σ cores used / Σ cores + Σ MiB used / Σ MiB)``,
in float32, and 0 when a total is 0. Binpack takes the highest score, spread the lowest.
vgpu's own ``binpack`` and ``spread`` weigh the node with the pod placed instead (the
mean of its memory and compute shares): another formula at another moment, and kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vgpu.devices import Device, Usage, memory_capacity
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.row_memo import ALL, Rows
from vgpu_scheduler.framework.snapshot import Snapshot

#: HAMi's util.Weight.
WEIGHT = 10
#: The highest score: every slot, all compute and all memory of every GPU taken.
TOP = 3 * WEIGHT

_F32 = np.float32
Sums = tuple[int, int, int, int, int, int]


def sums(devices: Sequence[Device], usages: Sequence[Usage], scaling: float) -> Sums:
    """Tasks, slots, cores used, cores, MiB used and schedulable MiB over the GPUs."""
    used = slots = cores = cores_total = memory = memory_total = 0
    for d, u in zip(devices, usages, strict=True):
        used += u.tasks
        slots += d.split
        cores += u.cores
        cores_total += d.cores
        memory += u.memory_mib
        memory_total += memory_capacity(d, scaling)
    return used, slots, cores, cores_total, memory, memory_total


def _formula(s: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """HAMi's score from the six sums (one row each), float32 step by step as in Go."""
    with np.errstate(divide="ignore", invalid="ignore"):
        total = s[0] / s[1] + s[2] / s[3] + s[4] / s[5]
        result: npt.NDArray[np.float32] = _F32(WEIGHT) * total
    result[(s[1] == 0) | (s[3] == 0) | (s[5] == 0)] = 0
    return result


def score(node: NodeInfo) -> float:
    """HAMi's score of the node as it is, before the pod."""
    values = np.array(sums(node.devices, node.usages, node.scaling), dtype=np.float32)
    return float(_formula(values.reshape(6, 1))[0])


def scores(snapshot: Snapshot, rows: Rows = ALL) -> npt.NDArray[np.float64]:
    """:func:`score` for the snapshot positions ``rows`` (0 where there is no node)."""
    positions = np.arange(len(snapshot.nodes))[rows]
    table = np.zeros((6, len(positions)), dtype=np.float32)
    nodes = snapshot.nodes
    for i, pos in enumerate(positions.tolist()):
        node = nodes[pos]
        if node is not None:
            table[:, i] = sums(node.devices, node.usages, node.scaling)
    return _formula(table).astype(np.float64)
