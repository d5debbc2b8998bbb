"""vgpu's fragmentation-aware placement: least growth of stranded GPU.

A node's score is FGD's truncated score (``int(sigmoid(−Δ/1000) × 100)``) of the growth Δ
of the node's stranded GPU (:mod:`vgpu_scheduler.placement.stranding`): the idle GPU that the node's
remaining GPUs, CPU and host memory could not give to the cluster's workload, counting
repeated typical tasks and the workload's average CPU and memory per GPU rather than
whether one more task fits (FGD). Near-equal placements tie, and the first node in snapshot
order takes them, so the cluster fills node by node. On the chosen node a shared-GPU pod
goes to the GPU that leaves the most GPU serviceable (the lowest position on ties); whole
GPUs go to the fullest that fit. The GPU choice is the node-aware GPU policy
``fragmentation-aware`` of the vGPU plugin, so the assignment is written where every
assignment is.

PreFilter scores every node at once with numpy and hands the scores to the framework,
which reads the candidates' scores from them (with ``waiting``, each carries the tie term
too, below one point).
Scores are cached per pod shape and recomputed only for nodes whose GPU state, free CPU
or free memory changed since that shape was last scored.

The workload is given (the simulator passes its trace) or learned from the pods the
scheduler sees, with the GPU models each accepts (``use-gputype``, ``nouse-gputype``);
with ``waiting``, the learned workload also weighs the shapes of the pods that waited, by
the GPU-seconds they spent pending (:mod:`vgpu_scheduler.placement.waiting`), reweighed
every few minutes while pods wait, so that placements keep room for them, and nodes that
tie go fullest first;
the cluster's nodes (how many of each GPU model and count, CPU and memory) come from the
snapshot, and the model is rebuilt when they change, since how scarce a GPU is for the
tasks that need it depends on both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vgpu.cluster.port import Obj
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SUCCESS, Status
from vgpu_scheduler.placement import shares, stranding, stranding_tables
from vgpu_scheduler.placement.demand import NodeKind
from vgpu_scheduler.placement.shapes import MILLI, Shape, milli_of_percent
from vgpu_scheduler.placement.waiting import WaitingShapes

#: Pod shapes whose node scores are kept between cycles (each holds four arrays per node).
CACHED_SHAPES = 256
#: With ``waiting``: how often, while pods wait, the workload is reweighed (seconds).
REWEIGH_SECONDS = 300.0
#: With ``waiting``: below one score point, so it only orders nodes that tie.
TIE_WEIGHT = 0.5


@dataclass
class _Scored:
    """The inputs and scores of one pod shape's last scoring, per snapshot position."""

    ids: npt.NDArray[np.int64]
    cpu: npt.NDArray[np.int64]
    memory: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float64]


class FragmentationAware:
    name = "FragmentationAware"
    gpu_policy = "fragmentation-aware"

    def __init__(self, handle: Handle, workload: Iterable[Shape] | None = None, *,
                 waiting: bool = False) -> None:
        self._states = shares.NodeStates(self.name.lower())
        self._kinds = shares.NodeKinds(self.name.lower())
        self._cluster: dict[NodeKind, int] = {}
        self._cache: dict[Shape, _Scored] = {}
        self._shape: Shape | None = None
        self._handle = handle
        self._waiting: WaitingShapes | None = None
        self._seen: list[Shape] = []
        self._extra: list[Shape] | None = None
        self._reweighed = handle.now()
        self._set_workload(workload or ())
        if workload is None:
            rebuild = self._relearn if waiting else self._set_workload
            self._learned = shares.LearnedShapes(handle.config, self._learned_shape_of,
                                                 rebuild)
            handle.on_pod_event(self._learned.on_pod)
            if waiting:
                self._waiting = WaitingShapes(handle.config, self._learned_shape_of)
                handle.on_pod_event(self._on_pod)

    def _on_pod(self, old: Obj | None, new: Obj | None) -> None:
        assert self._waiting is not None
        if self._waiting.on_pod(old, new, self._handle.now()):
            self._reweigh()

    def _relearn(self, shapes: Iterable[Shape]) -> None:
        """New pods seen: rebuild with them and the waits as they stand."""
        self._seen = list(shapes)
        self._extra = None
        self._reweigh()

    def _reweigh(self) -> None:
        assert self._waiting is not None
        now = self._handle.now()
        self._reweighed = now
        extra = self._waiting.extra(len(self._seen), now)
        if extra != self._extra:
            self._extra = extra
            self._set_workload([*self._seen, *extra])

    def tick(self, now: float) -> None:
        if (self._waiting is not None and self._waiting.pending
                and now - self._reweighed >= REWEIGH_SECONDS):
            self._reweigh()

    def _set_workload(self, shapes: Iterable[Shape]) -> None:
        self._shapes = tuple(shapes)
        self._set_model()

    def _set_model(self) -> None:
        load = stranding.workload(self._shapes, self._cluster)
        self._model = stranding_tables.StrandingModel(load, self._states.states)
        self._cache.clear()

    @property
    def load(self) -> stranding.Workload:
        return self._model.load

    @staticmethod
    def _shape_of(pod: PodInfo) -> Shape:
        # What the pod takes from a node; the models it accepts change no node's score.
        return shares.pod_shape(pod, memory=True)

    @staticmethod
    def _learned_shape_of(pod: PodInfo) -> Shape:
        return shares.pod_shape(pod, memory=True, models=True)

    # -- framework -------------------------------------------------------------------------

    def columns(self) -> Sequence[Column]:
        return (*self._states.columns(), *self._kinds.columns())

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        cluster = self._kinds.of(snapshot)
        if cluster != self._cluster:
            self._cluster = cluster  # nodes came or went: what is scarce has changed
            self._set_model()
        shape = self._shape_of(pod)
        self._shape = shape
        ids, cpu = self._states.arrays(snapshot)
        memory = snapshot.column(self._states.memory_column)
        scored = self._cache.get(shape)
        if scored is None or len(scored.ids) != len(ids):
            if len(self._cache) >= CACHED_SHAPES:
                self._cache.clear()
            scored = self._cache[shape] = _Scored(ids.copy(), cpu.copy(), memory.copy(),
                                                  np.full(len(ids), -np.inf))
            changed = np.arange(len(ids))
        else:
            changed = np.flatnonzero((scored.ids != ids) | (scored.cpu != cpu)
                                     | (scored.memory != memory))
        if len(changed):
            scored.ids[changed] = ids[changed]
            scored.cpu[changed] = cpu[changed]
            scored.memory[changed] = memory[changed]
            present = changed[ids[changed] >= 0]
            scored.scores[changed] = -np.inf
            if len(present):
                scored.scores[present] = self._scores(ids[present], cpu[present],
                                                      memory[present], shape)
        order = scored.scores.copy()
        if self._waiting is not None:
            # Among nodes of the same score, the one with the least idle GPU: the emptier
            # nodes drain, and whole nodes come free for the large pods that wait.
            idle = self._states.idle(ids).astype(np.float64)
            order += TIE_WEIGHT * (1.0 - idle / (idle.max() + 1.0))
        return PreFilterResult(scores=order, scores_for=self.name), SUCCESS

    def _scores(self, ids: npt.NDArray[np.int64], cpu: npt.NDArray[np.int64],
                memory: npt.NDArray[np.int64], shape: Shape) -> npt.NDArray[np.float64]:
        """Node scores, −inf where the shape does not fit."""
        change = self._model.deltas(ids, cpu, memory, shape)
        fits = np.isfinite(change)
        out: npt.NDArray[np.float64] = np.where(
            fits, stranding.scores_from_deltas(np.where(fits, change, 0.0)), -np.inf)
        return out

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        ident = np.asarray([self._states.intern(node)], dtype=np.int64)
        value = self._scores(ident, np.asarray([shares.free_cpu(node)], dtype=np.int64),
                             np.asarray([shares.free_memory_mib(node)], dtype=np.int64),
                             self._shape_of(pod))[0]
        return 0.0 if value == -np.inf else float(value)

    # -- GPU choice (the node-aware GPU policy) --------------------------------------------

    def rank_gpus(self, node: NodeInfo, cands: Sequence[GpuCandidate]) -> list[GpuCandidate]:
        if not cands:
            return []
        free = list(shares.free_milli(node))
        share = milli_of_percent(cands[0].cores)
        shape = self._shape
        if shape is None or shape.milli_gpu != share or shape.gpus != 1 or share >= MILLI:
            return shares.fullest_first(node, cands)
        cpu = shares.free_cpu(node) - shape.milli_cpu
        memory = shares.free_memory_mib(node) - shape.memory_mib
        model = shares.model(node)
        ranked: list[tuple[float, int, GpuCandidate]] = []
        by_free: dict[int, float] = {}  # GPUs with the same free share: the same result
        for c in cands:
            served = by_free.get(free[c.position])
            if served is None:
                after = list(free)
                after[c.position] = max(0, after[c.position] - share)
                served = by_free[free[c.position]] = stranding.fill(after, cpu, memory, model,
                                                                     self.load)
            ranked.append((-served, c.position, c))
        ranked.sort(key=lambda t: (t[0], t[1]))
        return [c for _, _, c in ranked]

