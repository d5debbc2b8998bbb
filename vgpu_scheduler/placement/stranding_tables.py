""":func:`vgpu_scheduler.placement.stranding.delta` for every node at once, from per-state tables.

The definition lives in :mod:`vgpu_scheduler.placement.stranding`; this is the same arithmetic
vectorised with numpy over the GPU states nodes are in, so that scoring every node of a
1,000-node cluster is a few array operations. ``tests/simulate/test_stranding.py`` checks
that both agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.placement.shapes import MILLI, Shape
from vgpu_scheduler.placement.stranding import Workload

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


#: Rows of per-state tables kept before they are rebuilt from the states in use (a
#: long-running scheduler interns a new state with nearly every placement).
MAX_ROWS = 8192


class StrandingModel:
    """:func:`delta` for every node at once, from tables per GPU state.

    A GPU state (model, sorted free shares) is interned by the caller as an integer id
    (:class:`vgpu_scheduler.placement.shares.NodeStates`); ``states`` is that list, read as
    it grows.
    For each state in use the model keeps a row: the free shares (sorted ascending,
    left-padded with zeros to the widest node seen), ``L_i // g_s`` per shape and GPU, and
    each shape's instance count, so that a placement's effect is a few array operations
    over (nodes, shapes). Rows are built when a state is first scored; past
    :data:`MAX_ROWS` the tables start over with the states asked for. Shapes that differ
    only in the GPU models they accept share a column, weighed per model by the sum of
    their densities × frequencies, so constraints add no work per node.
    """

    def __init__(self, load: Workload, states: Sequence[tuple[str, tuple[int, ...]]]) -> None:
        self.load = load
        self._states = states
        # Shapes that differ only in the models they accept fit a node alike: one column
        # each, weighed per model by the sum of theirs.
        column: dict[tuple[int, int, int, int], int] = {}
        self._column_of = np.asarray(
            [column.setdefault((s.milli_cpu, s.milli_gpu, s.gpus, s.memory_mib), len(column))
             for s, _ in load.gpu_shapes], dtype=np.int64)
        shapes = list(column)
        self._milli = np.asarray([g for _, g, _, _ in shapes], dtype=np.int64)
        self._gpus = np.asarray([n for _, _, n, _ in shapes], dtype=np.int64)
        self._single = self._gpus == 1
        self._cpu = np.asarray([max(c, 1) for c, _, _, _ in shapes], dtype=np.int64)
        self._memory = np.asarray([max(m, 1) for _, _, _, m in shapes], dtype=np.int64)
        self._weight = np.asarray([p * s.total_milli_gpu for s, p in load.gpu_shapes],
                                  dtype=np.float64)
        sizes = load.cpu_only_sizes if load.contested else ()
        self._cpu_only = np.asarray([c for c, _ in sizes], dtype=np.int64)
        self._cpu_only_share = np.asarray([q for _, q in sizes], dtype=np.float64)
        self._model_ids: dict[str, int] = {}
        self._by_model = np.zeros((0, len(shapes)), dtype=np.float64)
        self._row_of = np.zeros(0, dtype=np.int64)
        self._clear()

    def _clear(self) -> None:
        shapes = len(self._milli)
        self._width = 0
        self._left = np.zeros((0, 0), dtype=np.int64)
        self._floors = np.zeros((0, shapes, 0), dtype=np.int16)  # shares ≤ 1000: fits
        self._inst = np.zeros((0, shapes), dtype=np.int64)
        self._count = np.zeros((0, shapes), dtype=np.int64)
        self._model_of = np.zeros(0, dtype=np.int64)
        self._row_of[:] = -1

    @property
    def rows(self) -> int:
        return len(self._left)

    def _rows_for(self, ids: IntArray) -> IntArray:
        if len(self._row_of) < len(self._states):
            grow = len(self._states) - len(self._row_of)
            self._row_of = np.concatenate([self._row_of, np.full(grow, -1, dtype=np.int64)])
        rows = self._row_of[ids]
        if (rows >= 0).all():
            return rows
        missing = np.unique(ids[rows < 0])
        if self.rows + len(missing) > max(MAX_ROWS, 2 * len(ids)):
            self._clear()
            missing = np.unique(ids)
        self._append(missing)
        return self._row_of[ids]

    def _append(self, ids: IntArray) -> None:
        pending = [self._states[i] for i in ids.tolist()]
        width = max(self._width, *(len(f) for _, f in pending))
        if width > self._width:
            pad = width - self._width
            self._left = np.pad(self._left, ((0, 0), (pad, 0)))
            self._floors = np.pad(self._floors, ((0, 0), (0, 0), (pad, 0)))
            self._width = width
        rows = np.zeros((len(pending), width), dtype=np.int64)
        model_of = np.zeros(len(pending), dtype=np.int64)
        for r, (model, free) in enumerate(pending):
            rows[r, width - len(free):] = sorted(free)
            if model not in self._model_ids:
                self._model_ids[model] = len(self._model_ids)
                weights = np.asarray(self.load.weights(model), dtype=np.float64) * self._weight
                row = np.bincount(self._column_of, weights=weights, minlength=len(self._milli))
                self._by_model = np.concatenate([self._by_model, row[None, :]])
            model_of[r] = self._model_ids[model]
        floors = rows[:, None, :] // self._milli[None, :, None]
        count = (floors > 0).sum(axis=2)
        self._row_of[ids] = np.arange(self.rows, self.rows + len(ids))
        self._left = np.concatenate([self._left, rows])
        self._floors = np.concatenate([self._floors, floors.astype(np.int16)])
        self._count = np.concatenate([self._count, count])
        self._inst = np.concatenate([self._inst, self._instances(floors.sum(axis=2), count)])
        self._model_of = np.concatenate([self._model_of, model_of])

    def _instances(self, floor_sum: IntArray, count: IntArray) -> IntArray:
        out: IntArray = np.where(self._single, floor_sum, count // self._gpus)
        return out

    def _fill(self, inst: IntArray, cpu: IntArray, memory: IntArray,
              weight: FloatArray) -> FloatArray:
        n = np.minimum(inst, np.minimum(np.maximum(cpu, 0)[:, None] // self._cpu,
                                        np.maximum(memory, 0)[:, None] // self._memory))
        out: FloatArray = (n * weight).sum(axis=1)
        return out

    def _cpu_for_gpus(self, cpu: IntArray) -> FloatArray:
        free = np.maximum(cpu, 0)
        if not len(self._cpu_only):
            return free.astype(np.float64)
        reach = ((free[:, None] // self._cpu_only) * (self._cpu_only * self._cpu_only_share)
                 ).sum(axis=1)
        out: FloatArray = free - self.load.contested * reach
        return out

    def _mix(self, idle: IntArray, cpu: IntArray, memory: IntArray) -> FloatArray:
        bound = idle.astype(np.float64)
        for free, per in ((self._cpu_for_gpus(cpu), self.load.cpu_per_milli),
                          (np.maximum(memory, 0), self.load.memory_per_milli)):
            if per > 0:
                bound = np.minimum(bound, free / per)
        return bound

    def deltas(self, ids: IntArray, cpu: IntArray, memory: IntArray,
               shape: Shape) -> FloatArray:
        """Growth of ``F`` per node (the best GPU for a share); +inf where it does not fit.

        ``ids`` are valid state ids; ``cpu`` (milli) and ``memory`` (MiB) are free.
        """
        ids = self._rows_for(np.asarray(ids, dtype=np.int64))
        cpu = np.asarray(cpu, dtype=np.int64)
        memory = np.asarray(memory, dtype=np.int64)
        left = self._left[ids]
        inst = self._inst[ids]
        weight = self._by_model[self._model_of[ids]]
        idle = left.sum(axis=1)
        cpu_after = cpu - shape.milli_cpu
        memory_after = memory - shape.memory_mib
        fits = (cpu_after >= 0) & (memory_after >= 0)
        demand = shape.milli_gpu * shape.gpus if shape.milli_gpu > 0 else 0
        before = self._fill(inst, cpu, memory, weight) + self._mix(idle, cpu, memory)
        base = before - demand - self._mix(idle - demand, cpu_after, memory_after)
        out = np.full(len(ids), np.inf)
        if shape.gpus == 0 or shape.milli_gpu <= 0:
            change = base - self._fill(inst, cpu_after, memory_after, weight)
            return np.where(fits, change, out)
        x = shape.milli_gpu
        if shape.gpus == 1 and x < MILLI:
            floors = self._floors[ids]
            count = self._count[ids]
            for j in range(self._width):
                column = left[:, j]
                ok = fits & (column >= x)
                if j > 0:
                    ok &= column != left[:, j - 1]  # the same free share: the same result
                if not ok.any():
                    continue
                new = (column - x)[:, None] // self._milli
                old = floors[:, :, j]
                moved = np.where(self._single, inst - old + new,
                                 (count - (old > 0) + (new > 0)) // self._gpus)
                change = base - self._fill(moved, cpu_after, memory_after, weight)
                out = np.where(ok, np.minimum(out, change), out)
            return out
        positions = np.arange(self._width)[None, :]
        first = self._width - (left >= x).sum(axis=1)  # fitting GPUs: a suffix, fullest first
        ok = fits & (self._width - first >= shape.gpus)
        taken = (positions >= first[:, None]) & (positions < (first + shape.gpus)[:, None])
        floors_after = (left - taken * x)[:, None, :] // self._milli[None, :, None]
        moved = self._instances(floors_after.sum(axis=2), (floors_after > 0).sum(axis=2))
        change = base - self._fill(moved, cpu_after, memory_after, weight)
        return np.where(ok, change, out)
