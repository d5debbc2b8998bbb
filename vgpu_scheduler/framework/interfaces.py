"""The extension points: one tiny Protocol each, as in kube-scheduler's framework.

A plugin is any object with a ``name`` that implements some of these methods; the framework
finds out which at profile build time (``isinstance`` on these runtime-checkable
protocols), never per cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.diagnosis import Diagnosis
from vgpu_scheduler.framework.gpu_candidate import GpuCandidate
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import Status


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    def pre_enqueue(self, pod: PodInfo) -> Status:
        """Before a pod enters the active queue: anything but SUCCESS keeps it aside (not
        attempted, no event) until an update of the pod passes."""


@runtime_checkable
class QueueSortPlugin(Protocol):
    def sort_key(self, pod: PodInfo, arrival: int) -> tuple[Any, ...]:
        """Active-queue order: smaller keys pop first (a key, not kube's Less, for heapq)."""


@runtime_checkable
class PreFilterPlugin(Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        """SKIP: this plugin's Filter does not apply to this pod. A rejection fails the pod
        on every node."""


@runtime_checkable
class PreFilterExtensions(Protocol):
    """A PreFilter whose state depends on the pods already placed keeps it current when a
    plugin (preemption) tries a node with pods removed or added."""

    def add_pod(self, state: CycleState, pod: PodInfo, added: NodePod,
                node: NodeInfo) -> Status: ...

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: NodePod,
                   node: NodeInfo) -> Status: ...


@runtime_checkable
class FilterPlugin(Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status: ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    def post_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    diagnosis: Diagnosis) -> Status:
        """Runs when no node fits (kube uses it for preemption). SUCCESS: the plugin made
        room (victims are leaving; the pod's nomination holds the room) and no further
        PostFilter runs; the pod is retried when the cluster changes. The message ends the
        pod's FailedScheduling summary; ERROR makes the pod back off instead of parking."""


@runtime_checkable
class PreScorePlugin(Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo,
                  nodes: Sequence[NodeInfo]) -> Status: ...


@runtime_checkable
class ScorePlugin(Protocol):
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        """0 (worst) to 100 (best) unless the plugin also normalizes."""


@runtime_checkable
class ScoreExtensions(Protocol):
    def normalize_scores(self, state: CycleState, pod: PodInfo,
                         scores: list[float]) -> None:
        """Rescale this plugin's scores in place to 0..100."""


@runtime_checkable
class BulkScorePlugin(Protocol):
    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64] | None:
        """PreScore, Score and NormalizeScore at once for the candidates at ``positions``
        (the nodes the framework scores this cycle): their final scores, 0..100, what
        kube-scheduler's three steps give those nodes, in a new array the framework may
        change; None when the plugin has nothing to compare this cycle (PreScore's
        SKIP). The framework then calls none of the
        three per node. The candidates passed the PreFilter masks; the framework filters
        the one it picks (see :class:`~vgpu_scheduler.framework.cycle_state.
        PreFilterResult`)."""


@runtime_checkable
class ReservePlugin(Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None: ...


@runtime_checkable
class PermitPlugin(Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """WAIT holds the pod (its reservation kept) until the plugin calls
        ``handle.allow`` or ``handle.reject``; the scheduling cycle goes on meanwhile."""


@runtime_checkable
class PreBindPlugin(Protocol):
    def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status: ...


@runtime_checkable
class BindPlugin(Protocol):
    def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """SKIP hands the pod to the next binder; CONFLICT says the pod is bound already
        (or being deleted), so the host forgets its assumption and does not retry."""


@runtime_checkable
class PostBindPlugin(Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None: ...


@runtime_checkable
class EnqueueExtensions(Protocol):
    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        """Whether ``event`` may make ``pod``, which this plugin rejected, schedulable.
        A plugin without this method is woken by every event."""


@runtime_checkable
class Indexer(Protocol):
    def columns(self) -> Sequence[Column]:
        """Per-node aggregates this plugin wants maintained in the snapshot."""


@runtime_checkable
class Explainer(Protocol):
    def explain(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                positions: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64],
                                                           list[Status]] | None:
        """The plugin's Filter answer for many nodes at once, for failure diagnoses: per
        position an index into the returned statuses, -1 for "fits", -2 for "ask
        Filter"; None when it cannot answer for this pod. Must agree with Filter."""


GpuPolicy = Callable[[NodeInfo, Sequence[GpuCandidate]], list[GpuCandidate]]
"""A GPU choice policy: the GPUs of ``node`` that fit one vGPU of a container, best first.
It sees the whole node (free CPU and memory too), for policies that weigh fragmentation."""


@runtime_checkable
class GpuPolicyPlugin(Protocol):
    """Provides the GPU choice policy named ``gpu_policy`` (a pod selects it with
    ``vgpu.io/gpu-scheduler-policy``, the cluster with ``defaultGpuPolicy``)."""

    gpu_policy: str

    def rank_gpus(self, node: NodeInfo, cands: Sequence[GpuCandidate]) -> list[GpuCandidate]: ...


@runtime_checkable
class GpuPolicyUser(Protocol):
    def use_gpu_policies(self, policies: Mapping[str, GpuPolicy]) -> None:
        """Called once when the profile is built, with the GPU policies its plugins
        provide; raises ``ConfigError`` when a policy the plugin needs is missing."""


@runtime_checkable
class Ticker(Protocol):
    def tick(self, now: float) -> None:
        """Called by the host loop now and then (timeouts without events)."""
