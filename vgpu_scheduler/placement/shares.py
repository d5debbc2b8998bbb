"""A node and a pod in milli-GPU terms, for placement policies that reason in GPU shares.

The vGPU model grants each container a compute share (percent) and a memory slice per
GPU; the GPU-sharing literature (and the Alibaba trace) speaks of milli-GPU: 1000 = one
whole GPU. A GPU's free share is its free compute (a GPU that takes no further task has
none); a pod's share per GPU is its compute percent × 10.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu.devices import takes_tasks
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo, parse
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.placement.demand import NodeKind
from vgpu_scheduler.placement.shapes import MILLI, Shape, milli_of_percent

#: kube-scheduler's non-zero default: a pod asking for no CPU is counted as 100 millicores
#: when a policy compares requests (the artifact's fragmentation does the same).
DEFAULT_MILLI_CPU = 100
MIB = 1024 * 1024


def fullest_first(node: NodeInfo, cands: Sequence[GpuCandidate]) -> list[GpuCandidate]:
    """Whole GPUs (or several shares): the fullest GPUs that fit, then by position."""
    free = free_milli(node)
    return sorted(cands, key=lambda c: (free[c.position], c.position))


def free_milli(node: NodeInfo) -> tuple[int, ...]:
    """Free share of each GPU of the node, in device order."""
    out: list[int] = []
    for d, u in zip(node.devices, node.usages, strict=True):
        if not takes_tasks(d, u) or d.cores <= 0:
            out.append(0)
        else:
            out.append(max(0, d.cores - u.cores) * MILLI // d.cores)
    return tuple(out)


def free_cpu(node: NodeInfo) -> int:
    return node.static.alloc_cpu - node.requested_cpu


def free_memory_mib(node: NodeInfo) -> int:
    return (node.static.alloc_memory - node.requested_memory) // MIB


def model(node: NodeInfo) -> str:
    return node.devices[0].model if node.devices else ""


def pod_shape(pod: PodInfo, *, memory: bool = False, models: bool = False) -> Shape:
    """The pod as (CPU, share per GPU, GPU count[, memory][, the GPU models it accepts
    and refuses]); several GPU containers add up."""
    cpu = pod.cpu_milli or DEFAULT_MILLI_CPU
    mib = pod.memory // MIB if memory else 0
    if pod.gpu is None or not pod.gpu.is_gpu_pod:
        return Shape(cpu, 0, 0, memory_mib=mib)
    count = 0
    milli = 0
    for c in pod.gpu.containers:
        share = c.cores if c.cores > 0 else (c.memory_percent or 100)
        milli = max(milli, milli_of_percent(min(share, 100)))
        count += c.count
    if not models:
        return Shape(cpu, milli, count, memory_mib=mib)
    selector = pod.gpu.choices.selector
    return Shape(cpu, milli, count, selector.use_types, mib, selector.nouse_types)


@dataclass
class NodeStates:
    """Interns each node's GPU state (model, free shares sorted) as an integer id.

    Policies memoise per state id: 1,213 nodes of a cluster sit in far fewer distinct
    states, and a node's id only changes when a pod lands on or leaves it.
    """

    prefix: str

    def __post_init__(self) -> None:
        self._ids: dict[tuple[str, tuple[int, ...]], int] = {}
        self.states: list[tuple[str, tuple[int, ...]]] = []
        self._idle: list[int] = []

    @property
    def state_column(self) -> str:
        return f"{self.prefix}.state"

    @property
    def cpu_column(self) -> str:
        return f"{self.prefix}.free_cpu"

    @property
    def memory_column(self) -> str:
        return f"{self.prefix}.free_memory"

    def intern(self, node: NodeInfo) -> int:
        key = (model(node), tuple(sorted(free_milli(node))))
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self.states)
            self.states.append(key)
            self._idle.append(sum(key[1]))
        return found

    def idle(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Free milli-GPU of the nodes with these state ids (0 for empty positions)."""
        table = np.asarray([*self._idle, 0], dtype=np.int64)
        return table[np.where(ids >= 0, ids, len(self._idle))]

    def columns(self) -> tuple[Column, Column, Column]:
        return (Column(self.state_column, np.int64, self.intern, -1),
                Column(self.cpu_column, np.int64, free_cpu, -1),
                Column(self.memory_column, np.int64, free_memory_mib, -1))

    def arrays(self, snapshot: Snapshot) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        return snapshot.column(self.state_column), snapshot.column(self.cpu_column)


def node_kind(node: NodeInfo) -> NodeKind:
    return NodeKind(model(node), len(node.devices), node.static.alloc_cpu,
                    node.static.alloc_memory // MIB)


@dataclass
class NodeKinds:
    """How many nodes of each kind (GPU model and count, CPU, memory) the cluster has, from
    a snapshot column of interned kinds, for policies that weigh the workload against the
    cluster."""

    prefix: str

    def __post_init__(self) -> None:
        self._ids: dict[NodeKind, int] = {}
        self._kinds: list[NodeKind] = []

    @property
    def column(self) -> str:
        return f"{self.prefix}.kind"

    def _kind_id(self, node: NodeInfo) -> int:
        kind = node_kind(node)
        found = self._ids.get(kind)
        if found is None:
            found = self._ids[kind] = len(self._kinds)
            self._kinds.append(kind)
        return found

    def columns(self) -> tuple[Column]:
        return (Column(self.column, np.int64, self._kind_id, -1),)

    def of(self, snapshot: Snapshot) -> dict[NodeKind, int]:
        ids = snapshot.column(self.column)
        counts = np.bincount(ids[ids >= 0], minlength=len(self._kinds))
        return {k: int(n) for k, n in zip(self._kinds, counts.tolist(), strict=True) if n}


#: A learned workload is rebuilt once this many more pods were seen (and at least 5 %).
RELEARN_EVERY = 50


class LearnedShapes:
    """The shapes of the pods a scheduler has seen, for policies that weigh the workload
    when no trace gives it: fed by the host's pod events (:meth:`on_pod`), it hands the
    shapes seen so far to ``rebuild`` whenever enough new pods arrived."""

    def __init__(self, config: Config, shape_of: Callable[[PodInfo], Shape],
                 rebuild: Callable[[Iterable[Shape]], None]) -> None:
        self._config = config
        self._shape_of = shape_of
        self._rebuild = rebuild
        self._seen: Counter[Shape] = Counter()
        self._total = 0
        self._learned_at = 0

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        """A pod event: a new pod counts once, updates and deletions not at all."""
        if old is not None or new is None:
            return
        if self.add(self._shape_of(parse(new, self._config))):
            self._rebuild(self.shapes())

    def add(self, shape: Shape) -> bool:
        """Count a pod; True when the model should be rebuilt from :meth:`shapes`."""
        self._seen[shape] += 1
        self._total += 1
        if self._total - self._learned_at >= max(RELEARN_EVERY, self._learned_at // 20):
            self._learned_at = self._total
            return True
        return False

    def shapes(self) -> Iterator[Shape]:
        return self._seen.elements()
