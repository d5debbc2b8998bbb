"""The workload against the cluster: how scarce each task's GPUs are, and how much CPU and
memory a GPU really needs when CPU-only tasks compete for them.

**Densities.** A task can use only some of the cluster's GPUs: those of the models it
accepts (``nvidia.com/use-gputype``, the trace's ``gpu_spec``; not those it refuses,
``nouse-gputype``) on nodes with enough GPUs, CPU and memory for it. When many tasks can
use only a few GPUs (pinned to a small model, or needing eight GPUs and 120 CPUs), each of
those GPUs is wanted by more tasks than the average GPU, and a task that could run
anywhere takes from them what the others will miss. A task is taken to be as likely to ask
for any GPU it could use: with ``C`` GPUs in the cluster and ``C(s)`` on the nodes that
could hold a task of shape ``s`` alone, a GPU it could use sees ``1 / C(s)`` of its tasks
against ``1 / C`` if every GPU were usable, and that ratio is the shape's *density*::

    density(s, m) = C / C(s)  if s accepts model m,  else 0

A shape every node can hold has density 1 (the measure without constraints); one pinned
to a model with a tenth of the GPUs has density 10. A model's GPUs then carry the claims
of the tasks that need them on top of everyone else's, and a task that can go anywhere
strands least where the fewest such tasks need the GPUs. (Sending the flexible demand
where loads come out even instead, the split a perfect scheduler would reach, makes every
model look equally costly to a flexible task and leaves to chance which scarce model fills
first; see ``docs/fragmentation-constraints.md``.)

**CPU and memory per GPU.** The measure feeds idle GPUs at the GPU tasks' CPU and memory
per milli-GPU ``r``. CPU-only tasks bring ``q`` per milli-GPU of GPU demand; the cluster
has ``K / G`` per milli-GPU, so ``K / G − r`` is spare. While ``q`` fits in the spare the
CPU-only tasks take spare CPU and GPU tasks lose nothing. What does not fit,
``max(0, r + q − K / G)``, they take from the GPU tasks: that share of their demand,

    contested = min(1, max(0, r + q − K / G) / q),

is the share of the CPU they could take on a node (what chunks of their sizes fit in its
free CPU) that they will take there (:func:`vgpu_scheduler.placement.stranding.cpu_for_gpus`).
CPU left in pieces smaller than every CPU-only task is out of their reach and feeds GPUs
alone. (Before, a GPU was fed at ``r`` plus the excess per milli-GPU, as if CPU-only tasks
took CPU from every node in proportion to its idle GPUs; see
``docs/fragmentation-constraints.md``.) Memory keeps that simpler rule: no generated or
bundled workload runs out of it.

Nothing here is tuned: every number follows from the workload and the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from vgpu_scheduler.placement.shapes import MILLI, Shape


@dataclass(frozen=True, order=True)
class NodeKind:
    """What a node offers a task when empty: its GPU model and count, CPU and memory."""

    model: str
    gpus: int
    milli_cpu: int
    memory_mib: int

    def holds(self, shape: Shape) -> bool:
        """Whether a task of ``shape`` fits the node when nothing else runs there."""
        return (self.gpus >= shape.gpus and self.milli_cpu >= shape.milli_cpu
                and self.memory_mib >= shape.memory_mib
                and (shape.gpus == 0 or shape.allows(self.model)))


def densities(shapes: Sequence[tuple[Shape, float]], kinds: Mapping[NodeKind, int]
              ) -> dict[str, tuple[float, ...]]:
    """Per GPU model of the cluster, each of ``shapes``' (GPU shapes') density on it, see
    the module docstring; ``kinds`` counts the nodes of each kind."""
    gpu_kinds = [(k, n) for k, n in kinds.items() if k.gpus and n]
    if not gpu_kinds:
        return {}
    models = sorted({k.model for k, _ in gpu_kinds})
    # A real cluster has as many kinds as allocatable values; one array operation each.
    gpus = np.asarray([k.gpus for k, _ in gpu_kinds], dtype=np.int64)
    cpu = np.asarray([k.milli_cpu for k, _ in gpu_kinds], dtype=np.int64)
    memory = np.asarray([k.memory_mib for k, _ in gpu_kinds], dtype=np.int64)
    model_of = np.asarray([models.index(k.model) for k, _ in gpu_kinds], dtype=np.int64)
    total_of = gpus * np.asarray([n for _, n in gpu_kinds], dtype=np.int64)
    allows = np.asarray([[s.allows(m) for m in models] for s, _ in shapes],
                        dtype=np.bool_).reshape(len(shapes), len(models))
    holds = ((gpus[None, :] >= np.asarray([s.gpus for s, _ in shapes])[:, None])
             & (cpu[None, :] >= np.asarray([s.milli_cpu for s, _ in shapes])[:, None])
             & (memory[None, :] >= np.asarray([s.memory_mib for s, _ in shapes])[:, None])
             & allows[:, model_of])
    reach = (holds * total_of[None, :]).sum(axis=1)
    total = float(sum(k.gpus * n for k, n in kinds.items()))
    density = np.divide(total, reach, out=np.zeros(len(shapes)), where=reach > 0)
    return {m: tuple(np.where(allows[:, j], density, 0.0).tolist())
            for j, m in enumerate(models)}


def per_milli(tasks: Sequence[Shape], kinds: Mapping[NodeKind, int]) -> tuple[float, float]:
    """The CPU (milli) a milli-GPU of GPU tasks needs, and the memory (MiB) with CPU-only
    tasks' excess over the cluster's spare included (the module docstring); (0, 0)
    without GPU tasks."""
    gpu, cpu_only, milli = _split(tasks)
    if not milli:
        return 0.0, 0.0
    capacity = sum(k.gpus * n for k, n in kinds.items()) * MILLI
    memory = _with_excess(sum(s.memory_mib for s in gpu) / milli,
                          sum(s.memory_mib for s in cpu_only) / milli,
                          sum(k.memory_mib * n for k, n in kinds.items()) / max(capacity, 1))
    return sum(s.milli_cpu for s in gpu) / milli, memory


def contested(tasks: Sequence[Shape], kinds: Mapping[NodeKind, int]) -> float:
    """The share of the CPU within their reach that CPU-only tasks take from GPU tasks: the
    part of their demand the cluster's spare CPU cannot hold (the module docstring)."""
    gpu, cpu_only, milli = _split(tasks)
    others = sum(s.milli_cpu for s in cpu_only)
    capacity = sum(k.gpus * n for k, n in kinds.items()) * MILLI
    if not milli or not others or not capacity:
        return 0.0
    need = sum(s.milli_cpu for s in gpu)
    has = sum(k.milli_cpu * n for k, n in kinds.items()) * milli / capacity
    return min(1.0, max(need + others - has, 0.0) / others)


def _split(tasks: Sequence[Shape]) -> tuple[list[Shape], list[Shape], int]:
    gpu = [s for s in tasks if s.gpus and s.milli_gpu]
    cpu_only = [s for s in tasks if not (s.gpus and s.milli_gpu)]
    return gpu, cpu_only, sum(s.total_milli_gpu for s in gpu)


def _with_excess(need: float, others: float, has: float) -> float:
    """``need`` plus what ``others`` take beyond the spare ``has − need`` (per milli-GPU)."""
    return need + max(others - max(has - need, 0.0), 0.0) if has > 0 else need
