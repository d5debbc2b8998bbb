"""The values of one scheduling attempt: its scratch space (with the GPU slices Reserve
claimed, the one place the assignment lives until the binding, the slices the pod would
claim on any node, and the GPUs plugins keep it off), and PreFilter's answers."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from vgpu.codecs import Assignment
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.snapshot import Snapshot

#: The key of :attr:`CycleState.assignment`.
ASSIGNMENT_KEY = "vgpu/assignment"
#: Where the plugin that places GPUs (``VGPU``) keeps its PreFilter state, a
#: :class:`Claimer`: :meth:`CycleState.claim_on` asks it. The state itself, not a second
#: entry, so that PreFilter writes once.
CLAIMER_KEY = "vgpu/claimer"
#: Where plugins that keep the pod off some GPUs leave their :class:`GpuBarrier`.
BARRIERS_KEY = "vgpu/barriers"
#: Where plugins that cap what the pod may hold over its GPUs leave their :class:`GpuBudget`.
BUDGETS_KEY = "vgpu/budgets"
_NONE_BARRED: Mapping[int, str] = MappingProxyType({})


class Claimer(Protocol):
    def claim_on(self, node: NodeInfo) -> Assignment | None:
        """The GPU slices the cycle's pod would take on ``node``, or None: it does not fit
        there."""


class GpuBarrier(Protocol):
    """What a plugin that keeps the cycle's pod off some GPUs tells the plugin that places
    GPUs (``VGPU``), through the framework, so that neither imports the other (as
    :class:`Claimer` does for preemption). Written at PreFilter, read at Filter, Score and
    Reserve, for any node, preemption's simulations included: it must answer from the
    ``NodeInfo`` it is given alone."""

    #: False when it bars nothing this cycle (it only stamps): the placing plugin may then
    #: answer for many nodes at once.
    active: bool

    def barred(self, node: NodeInfo) -> Mapping[int, str]:
        """Positions (in ``node.devices``) of the GPUs the pod may not take, each with the
        reason a diagnosis shows."""

    def stamp(self, assignment: Assignment) -> Assignment:
        """The assignment as Reserve keeps it: with what the barrier's decision relied on
        recorded in it (it then travels in the Binding)."""


class GpuBudget(Protocol):
    """A cap on what the cycle's pod may hold over all its GPUs (a namespace quota), told
    to the plugin that places GPUs so that, of the GPUs that fit, it takes ones within the
    cap when there are such: a percentage takes more MiB on a larger GPU. The plugin that
    wrote it still judges the placement at its Filter. Answers from the totals alone."""

    def allows(self, memory_mib: int, cores: int) -> bool:
        """Whether the pod may hold ``memory_mib`` MiB and ``cores`` percent of a GPU's
        compute over all its GPUs (init containers counted by the largest)."""


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

    @property
    def assignment(self) -> Assignment | None:
        """The GPU slices Reserve claimed for the pod on its node (None: not a GPU pod, or
        nothing reserved): the host assumes the pod with them in its cache, so that the next
        decision never hands out the same slice; the Permit gate and the binder read them."""
        found: Assignment | None = self._data.get(ASSIGNMENT_KEY)
        return found

    @assignment.setter
    def assignment(self, value: Assignment | None) -> None:
        self._data[ASSIGNMENT_KEY] = value

    @property
    def barriers(self) -> tuple[GpuBarrier, ...]:
        found: tuple[GpuBarrier, ...] = self._data.get(BARRIERS_KEY, ())
        return found

    def add_barrier(self, barrier: GpuBarrier) -> None:
        # A new tuple, never an append: a clone made after this keeps its own.
        self._data[BARRIERS_KEY] = (*self.barriers, barrier)

    def barred(self, node: NodeInfo) -> Mapping[int, str]:
        """The GPUs of ``node`` (by position) that the pod may not take, and why."""
        found: dict[int, str] = {}
        for barrier in self.barriers:
            if barrier.active:
                for position, why in barrier.barred(node).items():
                    found.setdefault(position, why)
        return found or _NONE_BARRED

    def add_budget(self, budget: GpuBudget) -> None:
        self._data[BUDGETS_KEY] = (*self._data.get(BUDGETS_KEY, ()), budget)

    def budget(self) -> Callable[[int, int], bool] | None:
        """Whether the pod may hold so much over its GPUs, by every budget written; None
        when no plugin wrote one."""
        budgets: tuple[GpuBudget, ...] = self._data.get(BUDGETS_KEY, ())
        if not budgets:
            return None
        if len(budgets) == 1:
            return budgets[0].allows
        return lambda memory, cores: all(b.allows(memory, cores) for b in budgets)

    def stamp(self, assignment: Assignment) -> Assignment:
        for barrier in self.barriers:
            assignment = barrier.stamp(assignment)
        return assignment

    def claim_on(self, node: NodeInfo) -> Assignment | None:
        """The GPU slices the pod of this cycle would take on ``node``, as Reserve would
        place them, or None: not a GPU pod, or it does not fit there. Preemption holds this
        claim on its nominated node, computed on the node without the victims; it is the
        framework's question, so that preemption asks it of no other plugin."""
        claimer: Claimer | None = self._data.get(CLAIMER_KEY)
        return None if claimer is None else claimer.claim_on(node)

    def clone(self) -> CycleState:
        """A copy whose writes the original does not see (what preemption tries a node
        with). Values are shared, not copied: a plugin that changes its state in
        ``add_pod``/``remove_pod`` writes a new value instead of mutating the old one."""
        other = copy.copy(self)
        other._data = dict(self._data)
        other.skip_filter = set(self.skip_filter)
        other.skip_score = set(self.skip_score)
        return other


@dataclass(frozen=True)
class PreFilterResult:
    """What a PreFilter plugin knows about the whole node set before per-node filtering.

    ``mask`` (over snapshot positions) and ``node_names`` must each be a superset of the
    nodes the plugin's Filter would accept: the framework still runs every Filter on the
    node it picks, so a loose mask costs time, never correctness; a tight one lets the
    framework count the candidates it scores without filtering each of them first.
    ``scores`` (over positions) is the Score of the plugin named ``scores_for`` for every
    node at once, exactly what its ``score`` would say of each: the framework then reads
    the candidates' scores from it instead of asking node by node. The first such array
    also breaks ties between candidates of equal total score. ``would_wait`` tells the
    nodes where the pod would wait at Permit behind a pod in flight (the allocation
    gate): such a node loses its GPU placement score, so that a burst goes on to a node
    that takes it at once while the user's soft rules keep their say; it is asked of the
    node the framework is about to pick, not of every node up front.
    """

    mask: npt.NDArray[np.bool_] | None = None
    node_names: frozenset[str] | None = None
    scores: npt.NDArray[np.float64] | None = None
    scores_for: str | None = None
    would_wait: Callable[[NodeInfo], bool] | None = None
