"""The extension points: one tiny Protocol each, as in kube-scheduler's framework.

A plugin is any object with a ``name`` that implements some of these methods; the framework
finds out which at profile build time (``isinstance`` on these runtime-checkable
protocols), never per cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from scheduler.framework.candidate import Candidate
from scheduler.framework.diagnosis import Diagnosis
from scheduler.framework.nodeinfo import NodeInfo
from scheduler.framework.podinfo import PodInfo
from scheduler.framework.snapshot import Column, Snapshot
from scheduler.framework.status import Status
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.codecs import Assignment
from vgpu.config import Config

Clock = Callable[[], float]
"""Seconds since the epoch; injected everywhere so that decisions never read the wall clock."""


class CycleState:
    """Per-pod, per-cycle scratch space shared by the plugins of one scheduling attempt."""

    __slots__ = ("_data", "now", "skip_filter", "skip_score", "snapshot")

    def __init__(self, now: float, snapshot: Snapshot | None = None) -> None:
        self.now = now
        self.snapshot = snapshot
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)


@dataclass(frozen=True)
class PreFilterResult:
    """What a PreFilter plugin knows about the whole node set before per-node filtering.

    ``mask`` (over snapshot positions) and ``node_names`` must each be a superset of the
    nodes the plugin's Filter would accept: the framework still runs every Filter on what
    is left, so a loose mask costs time, never correctness. ``order_key`` (over positions,
    higher first) ranks the candidates: when only ``nodesToScore`` feasible nodes are
    scored, the filters visit candidates best-first by it, so a policy that can compute its
    score for every node in one vectorised step gets the best node whatever the limit.
    ``ranks_for`` names the score plugin whose ranking ``order_key`` reproduces exactly;
    when it is the profile's only weighted scorer, the first feasible node in that order
    is the best of all feasible nodes and the filters stop there.
    """

    mask: npt.NDArray[np.bool_] | None = None
    node_names: frozenset[str] | None = None
    order_key: npt.NDArray[np.float64] | None = None
    ranks_for: str | None = None


@dataclass(frozen=True)
class ClusterEvent:
    """A change that may make unschedulable pods schedulable (kube's QueueingHint input)."""

    resource: Literal["pod", "node"]
    action: Literal["add", "update", "delete"]
    node: str
    #: Node updates: which facts changed (labels, taints, unschedulable, allocatable,
    #: inventory, heartbeat).
    changes: frozenset[str] = frozenset()
    #: Pod deletions: the GPU slices that were freed.
    freed: Assignment | None = None
    obj: Obj | None = None


class Handle(Protocol):
    """What the host gives plugins: configuration, the cluster, the clock, waiting pods."""

    @property
    def config(self) -> Config: ...

    @property
    def cluster(self) -> ClusterPort | None: ...

    def now(self) -> float: ...

    def node_info(self, name: str) -> NodeInfo | None: ...

    def allow(self, pod_key: str, plugin: str) -> None:
        """Let a pod waiting at Permit go on to binding (when every waiting plugin allowed)."""

    def reject(self, pod_key: str, plugin: str, reason: str) -> None:
        """Fail a pod waiting at Permit: it is unreserved and retried after a backoff."""

    def on_pod_event(self, handler: Callable[[Obj | None, Obj | None], None]) -> None:
        """Also call ``handler(old, new)`` for every pod add/update/delete the host sees."""

    def claim_gpus(self, pod_key: str, assignment: Assignment) -> None:
        """Reserve: the GPU slices the pod takes on the node it is being reserved on. The
        host counts them in its cache from this cycle on, so that the next decision never
        hands out the same slice; Unreserve (or a failed binding) gives them back."""


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
class FilterPlugin(Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status: ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    def post_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    diagnosis: Diagnosis) -> Status:
        """Runs when no node fits (kube uses it for preemption); SUCCESS means the plugin
        made room and the pod should be retried at once."""


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


GpuPolicy = Callable[[NodeInfo, Sequence[Candidate]], list[Candidate]]
"""A GPU choice policy: the GPUs of ``node`` that fit one vGPU of a container, best first.
It sees the whole node (free CPU and memory too), for policies that weigh fragmentation."""


@runtime_checkable
class GpuPolicyPlugin(Protocol):
    """Provides the GPU choice policy named ``gpu_policy`` (a pod selects it with
    ``vgpu.io/gpu-scheduler-policy``, the cluster with ``defaultGpuPolicy``)."""

    gpu_policy: str

    def rank_gpus(self, node: NodeInfo, cands: Sequence[Candidate]) -> list[Candidate]: ...


@runtime_checkable
class GpuPolicyUser(Protocol):
    def use_gpu_policies(self, policies: Mapping[str, GpuPolicy]) -> None:
        """Called once when the profile is built, with the GPU policies its plugins
        provide; raises ``ConfigError`` when a policy the plugin needs is missing."""


@runtime_checkable
class Ticker(Protocol):
    def tick(self, now: float) -> None:
        """Called by the host loop now and then (timeouts without events)."""


PluginFactory = Callable[[Handle], Any]
"""Builds a plugin for a profile; a registry entry."""

ArgsMap = Mapping[str, Any]
