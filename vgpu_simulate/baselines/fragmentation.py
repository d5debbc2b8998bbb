"""GPU fragmentation of a node with respect to a workload, as defined by FGD.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent" (USENIX ATC'23), §4: given the distribution of task shapes ("typical
pods": CPU, GPU share per GPU, GPU count, allowed models, with their frequencies), a node's
fragmentation is the expected amount of its idle GPU that the next task cannot use:

* a task asking for no GPU, or one the node's GPU model excludes, cannot use any of the
  node's idle GPU, so all of it counts;
* a task that does not fit on the node (too few GPUs with enough free share, or too little
  free CPU) cannot use any of it either;
* a task that fits can use the GPUs with at least its share free; the idle share on the
  others counts as fragmented.

Everything here is pure arithmetic on milli-GPU (1000 = one GPU) and milli-CPU. The
decision of a node's score is :func:`fgd_score`, used by the FGD and fragmentation-aware
plugins; :class:`FragModel` caches node fragmentation by state, since it only changes when
that node's free CPU crosses a shape's CPU request or its GPU shares change.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vgpu_scheduler.placement.shapes import MILLI, Shape, take_gpus

#: The FGD artifact's settings for the paper runs: shapes covering 95 % of tasks, CPU-only
#: tasks included, every task weighted 1.
POPULARITY_THRESHOLD = 0.95


def typical_shapes(shapes: Iterable[Shape],
                   threshold: float = POPULARITY_THRESHOLD) -> tuple[tuple[Shape, float], ...]:
    """The most frequent shapes covering ``threshold`` of tasks, with renormalised frequencies.

    Shapes are taken most frequent first (ties: larger shape first, as the artifact's
    reverse sort does) until their count reaches the threshold.
    """
    counts = Counter(shapes)
    total = sum(counts.values())
    if total == 0:
        return ()
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    expected = threshold * total
    chosen: list[tuple[Shape, int]] = []
    covered = 0
    for shape, count in ranked:
        if covered >= expected:
            break
        chosen.append((shape, count))
        covered += count
    return tuple((shape, count / covered) for shape, count in chosen)


def memory_free(shapes: Iterable[Shape]) -> list[Shape]:
    return [dataclasses.replace(s, memory_mib=0) for s in shapes]


def fits_gpus(gpu_left: Sequence[int], milli_gpu: int, gpus: int) -> bool:
    """Whether ``gpus`` distinct GPUs each have ``milli_gpu`` free."""
    enough = 0
    for left in gpu_left:
        if left >= milli_gpu:
            enough += 1
            if enough >= gpus:
                return True
    return False


def node_fragmentation(cpu_left: int, gpu_left: Sequence[int], model: str,
                       typical: Sequence[tuple[Shape, float]]) -> float:
    """Expected fragmented milli-GPU of a node (FGD's ``F_n(M)``), straight from the definition.

    FGD looks at CPU and GPU only. :class:`FragModel` computes the same value faster; this is
    the reference.
    """
    idle = sum(gpu_left)
    frag = 0.0
    for shape, p in typical:
        if shape.milli_gpu == 0 or not shape.allows(model):
            frag += p * idle
        elif fits_gpus(gpu_left, shape.milli_gpu, shape.gpus) and cpu_left >= shape.milli_cpu:
            frag += p * sum(left for left in gpu_left if left < shape.milli_gpu)
        else:
            frag += p * idle
    return frag


def sigmoid(x: float) -> float:
    if x < -700:
        return 0.0
    return 1.0 / (1.0 + math.exp(-x))


@dataclass(frozen=True)
class Choice:
    """A node's score for a task and the GPUs the task would take there."""

    score: int
    gpus: tuple[int, ...]
    delta: float  # fragmentation after − before (negative: the placement reduces it)


MAX_SCORE = 100


def fgd_score_from_delta(delta: float) -> int:
    """FGD's node score: ``int(sigmoid(−Δ/1000) × 100)``, truncated as the artifact does."""
    return int(sigmoid(-delta / MILLI) * MAX_SCORE)


class FragModel:
    """Node fragmentation for one workload distribution, with a cache by node state.

    The fragmentation depends on free CPU only through which shapes' requests it covers,
    and on the GPUs only through the multiset of their free shares, so the cache key is
    (model, bucket, sorted free shares) where the bucket is how many distinct CPU requests
    of the GPU shapes the node covers; nodes in the same state share entries.
    """

    def __init__(self, typical: Sequence[tuple[Shape, float]]) -> None:
        self.typical = tuple(typical)
        self._no_gpu = sum(p for s, p in self.typical if s.milli_gpu == 0)
        self._gpu_shapes = tuple((s, p) for s, p in self.typical if s.milli_gpu > 0)
        self._cpu_steps = sorted({s.milli_cpu for s, _ in self._gpu_shapes})
        self._cache: dict[tuple[str, int, tuple[int, ...]], float] = {}
        self._by_model: dict[str, tuple[float, tuple[tuple[int, int, int, float], ...]]] = {}

    def _shapes_for(self, model: str) -> tuple[float, tuple[tuple[int, int, int, float], ...]]:
        entry = self._by_model.get(model)
        if entry is None:
            excluded = self._no_gpu + sum(p for s, p in self._gpu_shapes if not s.allows(model))
            usable = tuple(
                (s.milli_gpu, s.gpus, bisect.bisect_left(self._cpu_steps, s.milli_cpu), p)
                for s, p in self._gpu_shapes if s.allows(model))
            entry = (excluded, usable)
            self._by_model[model] = entry
        return entry

    def bucket(self, cpu_left: int) -> int:
        """The CPU bucket of a node: how many of :attr:`cpu_steps` its free CPU covers."""
        return bisect.bisect_right(self._cpu_steps, cpu_left)

    @property
    def cpu_steps(self) -> tuple[int, ...]:
        """The distinct CPU requests of the GPU shapes, ascending: the bucket bounds."""
        return tuple(self._cpu_steps)

    def fragmentation(self, cpu_left: int, gpu_left: Sequence[int], model: str) -> float:
        return self.fragmentation_bucketed(self.bucket(cpu_left), tuple(sorted(gpu_left)),
                                           model)

    def fragmentation_bucketed(self, bucket: int, sorted_left: tuple[int, ...],
                               model: str) -> float:
        key = (model, bucket, sorted_left)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        excluded, usable = self._shapes_for(model)
        idle = sum(sorted_left)
        frag = excluded * idle
        for milli_gpu, gpus, cpu_rank, p in usable:
            # sorted ascending: GPUs with enough free share are a suffix
            first = bisect.bisect_left(sorted_left, milli_gpu)
            if len(sorted_left) - first >= gpus and cpu_rank < bucket:
                frag += p * sum(sorted_left[:first])
            else:
                frag += p * idle
        self._cache[key] = frag
        return frag

    def best_choice(self, cpu_left: int, gpu_left: Sequence[int], model: str,
                    shape: Shape) -> Choice | None:
        """Where on this node ``shape`` goes to grow fragmentation least, and FGD's score.

        A shared-GPU task (one GPU, less than all of it) tries every GPU it fits on and keeps
        the one with the best score (lowest index on ties, as the artifact compares
        truncated scores); other tasks take :func:`take_gpus`. None when the GPUs do not
        fit.
        """
        return self.choice(self.bucket(cpu_left), self.bucket(cpu_left - shape.milli_cpu),
                           gpu_left, model, shape)

    def choice(self, bucket_before: int, bucket_after: int, gpu_left: Sequence[int], model: str,
               shape: Shape) -> Choice | None:
        """:meth:`best_choice` with the free CPU before and after given as CPU buckets."""
        before = self.fragmentation_bucketed(bucket_before, tuple(sorted(gpu_left)), model)
        if shape.gpus == 0:
            after = self.fragmentation_bucketed(bucket_after, tuple(sorted(gpu_left)), model)
            delta = after - before
            return Choice(fgd_score_from_delta(delta), (), delta)
        if shape.gpus == 1 and shape.milli_gpu < MILLI:
            best: Choice | None = None
            tried: set[int] = set()
            for i, left in enumerate(gpu_left):
                if left < shape.milli_gpu or left in tried:
                    continue  # same free share: same result, keep the lower index
                tried.add(left)
                after_left = list(gpu_left)
                after_left[i] = left - shape.milli_gpu
                after = self.fragmentation_bucketed(bucket_after, tuple(sorted(after_left)),
                                                    model)
                delta = after - before
                candidate = Choice(fgd_score_from_delta(delta), (i,), delta)
                if best is None or candidate.score > best.score:
                    best = candidate
            return best
        taken = take_gpus(gpu_left, shape.milli_gpu, shape.gpus)
        if taken is None:
            return None
        after_left = list(gpu_left)
        for i in taken:
            after_left[i] -= shape.milli_gpu
        after = self.fragmentation_bucketed(bucket_after, tuple(sorted(after_left)), model)
        delta = after - before
        return Choice(fgd_score_from_delta(delta), taken, delta)
