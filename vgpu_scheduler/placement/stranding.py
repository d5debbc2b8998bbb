"""Stranded GPU of a node: the idle GPU its remaining capacity cannot serve.

FGD (:mod:`vgpu_simulate.baselines.fragmentation`) asks whether the *next* typical
task fits a node. On the Alibaba trace most late failures are not of that kind: the
failing pod's GPU is free somewhere, but every node with it free has run out of CPU or
host memory, eaten a task at a time by pods that each still "fitted". This measure looks
further ahead. For a node with free GPU shares ``L`` (per GPU), free CPU ``c`` and free
memory ``m``, and a workload of task shapes ``s`` with frequencies ``p_s``:

* ``fill_s``: the GPU that tasks of shape ``s`` alone could take on the node, placed one
  after another: ``g_s × k_s × min(instances_s(L), c // c_s, m // m_s)``, where a one-GPU
  shape fits ``Σ_i L_i // g_s`` times and a ``k_s``-GPU shape ``#{i: L_i ≥ g_s} // k_s``
  times;
* ``d_s``: the shape's density on the node's GPU model (:mod:`vgpu_scheduler.placement.demand`):
  0 when the shape excludes the model, else ``C / C(s)`` with ``C`` the cluster's GPUs and
  ``C(s)`` those on nodes that could hold the task alone (models it accepts, enough GPUs,
  CPU and memory), so a GPU that few tasks can do without weighs their claims on top of
  everyone else's; 1 for a task any node holds;
* ``mix``: the GPU the node's CPU and memory could feed at the GPU tasks' CPU and memory
  per milli-GPU: ``min(idle, c' / r_c, m / r_m)`` (:func:`demand.per_milli`), where
  ``c'`` is the free CPU less what CPU-only tasks will take of it when the cluster's
  spare CPU cannot hold them: the ``contested`` share (:func:`demand.contested`) of the
  CPU chunks of their sizes fit in ``c`` (:func:`cpu_for_gpus`), so CPU left in pieces
  too small for them counts fully;
* serviceable GPU ``U = Σ_s d_s × p_s × fill_s + mix``; stranded GPU ``F = idle − U``.

A placement's cost is the growth of ``F``; :func:`scores_from_deltas` turns it into FGD's
truncated score, so near-equal placements tie and the first node in order takes them (the
cluster fills node by node). Every shape is typical here (FGD keeps the 95 % most frequent):
a rare large-CPU shape is exactly the one that strands GPUs.

:func:`stranded` is the definition in plain Python;
:class:`vgpu_scheduler.placement.stranding_tables.StrandingModel` computes the
same for every node at once with numpy, from per-state tables (a node's GPU state is its
model and sorted free shares, interned as an integer id).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.placement import demand
from vgpu_scheduler.placement.shapes import MILLI, Shape, take_gpus

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Workload:
    """Task shapes with frequencies, and the GPU pods' CPU and memory per milli-GPU."""

    shapes: tuple[tuple[Shape, float], ...]
    cpu_per_milli: float
    memory_per_milli: float
    #: Per GPU model, each GPU shape's density there (:mod:`vgpu_scheduler.placement.demand`),
    #: in :attr:`gpu_shapes` order; a model not listed weighs each shape it allows by 1.
    density: tuple[tuple[str, tuple[float, ...]], ...] = ()
    #: The share of the CPU within their reach that CPU-only tasks take from GPU tasks
    #: (:func:`demand.contested`); 0 while the cluster's spare CPU holds them.
    contested: float = 0.0

    @property
    def cpu_only_sizes(self) -> tuple[tuple[int, float], ...]:
        """The CPU-only tasks' CPU requests, each with its share of those tasks."""
        sizes: dict[int, float] = {}
        for s, p in self.shapes:
            if not (s.gpus > 0 and s.milli_gpu > 0) and s.milli_cpu > 0:
                sizes[s.milli_cpu] = sizes.get(s.milli_cpu, 0.0) + p
        total = sum(sizes.values())
        return tuple((c, p / total) for c, p in sorted(sizes.items()))

    @property
    def gpu_shapes(self) -> tuple[tuple[Shape, float], ...]:
        return tuple((s, p) for s, p in self.shapes if s.gpus > 0 and s.milli_gpu > 0)

    def weights(self, model: str) -> tuple[float, ...]:
        """Each GPU shape's weight on a GPU of ``model``: its density, 0 where excluded."""
        for name, row in self.density:
            if name == model:
                return row
        return tuple(1.0 if s.allows(model) else 0.0 for s, _ in self.gpu_shapes)


def workload(shapes: Iterable[Shape], kinds: Mapping[demand.NodeKind, int] | None = None
             ) -> Workload:
    """Every distinct (CPU, GPU share, GPU count, models) shape with its frequency, each
    carrying the median memory of its tasks (memory varies too much to be part of a
    shape), and the mean ratios over the GPU tasks; with the cluster's nodes (``kinds``:
    how many of each), each shape's density per model and the ratios CPU-only tasks leave
    (:mod:`vgpu_scheduler.placement.demand`)."""
    tasks = list(shapes)
    load = _frequencies(tasks)
    if not kinds:
        return load
    cpu, memory = demand.per_milli(tasks, kinds)
    return dataclasses.replace(
        load, density=tuple(sorted(demand.densities(load.gpu_shapes, kinds).items())),
        cpu_per_milli=cpu, memory_per_milli=memory, contested=demand.contested(tasks, kinds))


def _frequencies(tasks: list[Shape]) -> Workload:
    if not tasks:
        return Workload((), 0.0, 0.0)
    memory: dict[Shape, list[int]] = {}
    for s in tasks:
        memory.setdefault(dataclasses.replace(s, memory_mib=0), []).append(s.memory_mib)
    counts = Counter(dataclasses.replace(s, memory_mib=0) for s in tasks)
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    typical = tuple((dataclasses.replace(s, memory_mib=int(statistics.median(memory[s]))),
                     n / len(tasks)) for s, n in ranked)
    gpu = [s for s in tasks if s.gpus > 0 and s.milli_gpu > 0]
    milli = sum(s.total_milli_gpu for s in gpu)
    if milli == 0:
        return Workload(typical, 0.0, 0.0)
    return Workload(typical, sum(s.milli_cpu for s in gpu) / milli,
                    sum(s.memory_mib for s in gpu) / milli)


def instances(gpu_left: Sequence[int], milli_gpu: int, gpus: int) -> int:
    """How many tasks of ``gpus`` × ``milli_gpu`` the free shares hold, one after another."""
    if gpus == 1:
        return sum(left // milli_gpu for left in gpu_left)
    return sum(1 for left in gpu_left if left >= milli_gpu) // gpus


def _ratio_bound(free: float, per_milli: float) -> float:
    return math.inf if per_milli <= 0 else max(free, 0) / per_milli


def fill(gpu_left: Sequence[int], cpu_left: int, memory_left: int, model: str,
         load: Workload) -> float:
    """``Σ_s p_s × fill_s``: the GPU typical tasks could take, one shape at a time."""
    total = 0.0
    for (s, p), weight in zip(load.gpu_shapes, load.weights(model), strict=True):
        if not weight:
            continue
        n = min(instances(gpu_left, s.milli_gpu, s.gpus), max(cpu_left, 0) // max(s.milli_cpu, 1),
                max(memory_left, 0) // max(s.memory_mib, 1))
        total += weight * p * n * s.total_milli_gpu
    return total


def cpu_for_gpus(cpu_left: int, load: Workload) -> float:
    """``c'``: the free CPU less the ``contested`` share of what CPU-only tasks could take,
    ``Σ_o q_o × c_o × ⌊c / c_o⌋`` over their sizes ``c_o`` with shares ``q_o``."""
    cpu = max(cpu_left, 0)
    if not load.contested:
        return float(cpu)
    reach = sum(q * size * (cpu // size) for size, q in load.cpu_only_sizes)
    return cpu - load.contested * reach


def mix(idle: int, cpu_left: int, memory_left: int, load: Workload) -> float:
    """The GPU the node's CPU and memory can feed at the GPU tasks' average ratios."""
    return min(float(idle), _ratio_bound(cpu_for_gpus(cpu_left, load), load.cpu_per_milli),
               _ratio_bound(memory_left, load.memory_per_milli))


def serviceable(gpu_left: Sequence[int], cpu_left: int, memory_left: int, model: str,
                load: Workload) -> float:
    """``U``: the GPU the node can still serve (see the module docstring); the reference."""
    return (fill(gpu_left, cpu_left, memory_left, model, load)
            + mix(sum(gpu_left), cpu_left, memory_left, load))


def stranded(gpu_left: Sequence[int], cpu_left: int, memory_left: int, model: str,
             load: Workload) -> float:
    """``F = idle − U``: the node's idle GPU its remaining capacity cannot serve."""
    return sum(gpu_left) - serviceable(gpu_left, cpu_left, memory_left, model, load)


def after_placement(gpu_left: Sequence[int], shape: Shape, position: int | None
                    ) -> tuple[int, ...] | None:
    """Free shares after ``shape`` lands (a share on ``position``); None if it does not fit."""
    left = list(gpu_left)
    if shape.gpus == 0:
        return tuple(left)
    if shape.gpus == 1 and shape.milli_gpu < MILLI:
        if position is None or left[position] < shape.milli_gpu:
            return None
        left[position] -= shape.milli_gpu
        return tuple(left)
    taken = take_gpus(left, shape.milli_gpu, shape.gpus)
    if taken is None:
        return None
    for i in taken:
        left[i] -= shape.milli_gpu
    return tuple(left)


def delta(gpu_left: Sequence[int], cpu_left: int, memory_left: int, model: str,
          shape: Shape, *, load: Workload, position: int | None = None) -> float | None:
    """Growth of ``F`` when ``shape`` lands on the node; None when it does not fit."""
    after = after_placement(gpu_left, shape, position)
    if after is None or cpu_left < shape.milli_cpu or memory_left < shape.memory_mib:
        return None
    return (stranded(after, cpu_left - shape.milli_cpu, memory_left - shape.memory_mib,
                     model, load)
            - stranded(gpu_left, cpu_left, memory_left, model, load))


def scores_from_deltas(change: FloatArray) -> FloatArray:
    """FGD's truncated node score, ``int(sigmoid(−Δ/1000) × 100)`` (the FGD baseline's
    ``fgd_score_from_delta``), for an array: the same formula, the same truncation."""
    with np.errstate(over="ignore"):
        out: FloatArray = np.floor(100.0 / (1.0 + np.exp(change / MILLI)))
    return out
