"""Where to preempt: the nodes worth a simulation, the simulation over a sample of them,
and the choice among the candidates (kube's ``findCandidates``, ``DryRunPreemption`` and
``pickOneNodeForPreemption``).

Only nodes the filters rejected as UNSCHEDULABLE can be helped by removing pods; an
UNSCHEDULABLE_AND_UNRESOLVABLE node (no inventory, a taint, a selector mismatch) cannot.
The diagnosis names some nodes and only counts others (bulk explanations): unnamed nodes
are tried whenever some bulk explanation was resolvable, and the simulation itself turns
away those that were not. The simulation stops once it has ``wanted`` candidates, at
least one of them breaking no PodDisruptionBudget, starting from an offset that moves
between attempts, so that on a large cluster a preemption costs a bounded number of
simulations and different pods look at different nodes first.

Once a candidate breaking no budget is found, a node that cannot rank above the best one
(its :func:`.victims.bound`) cannot be chosen: it is passed over, and simulated only if
where the simulation stops depends on it (whether it is a candidate counts towards
``wanted``). The candidates and the choice are then kube's, less the candidates that
could not have been chosen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.diagnosis import Diagnosis, summarize
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import Code, Status, unresolvable
from vgpu_scheduler.plugins.kube.default_preemption.victims import (
    NO_VICTIMS,
    Candidate,
    Dominated,
    Rank,
    earliest_start,
)

NOT_HELPFUL = "Preemption is not helpful for scheduling"

#: kube's DefaultPreemptionArgs defaults: simulate until this share of the potential
#: nodes, and at least this many, are candidates.
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100

Positions = npt.NDArray[np.int64]


def wanted_candidates(potential: int, percentage: int = MIN_CANDIDATE_NODES_PERCENTAGE,
                      absolute: int = MIN_CANDIDATE_NODES_ABSOLUTE) -> int:
    """How many candidates the simulation looks for among ``potential`` nodes."""
    return min(max(potential * percentage // 100, absolute), potential)


def potential_nodes(diagnosis: Diagnosis, snapshot: Snapshot) -> Positions:
    """Snapshot positions of the nodes that removing pods could help, in position order."""
    if diagnosis.pod_status is not None:
        # A PreFilter turned the pod away, so the PreFilters after it wrote nothing that
        # their Filters could read in a simulation: no node is tried (kube would try its
        # nodes and get errors from those Filters).
        return np.zeros(0, dtype=np.int64)
    mask = snapshot.mask()
    if any(status.code is Code.UNSCHEDULABLE for status, _ in diagnosis.groups):
        for name, status in diagnosis.statuses.items():
            if status.code is not Code.UNSCHEDULABLE:
                pos = snapshot.positions.get(name)
                if pos is not None:
                    mask[pos] = False
    else:
        named = np.zeros(len(mask), dtype=np.bool_)
        for name, status in diagnosis.statuses.items():
            pos = snapshot.positions.get(name)
            if pos is not None and status.code is Code.UNSCHEDULABLE:
                named[pos] = True
        mask &= named
    return np.flatnonzero(mask).astype(np.int64)


#: Simulates one node: the rank to beat (None: choose the victims whatever they rank).
Simulate = Callable[[NodeInfo, Rank | None], Candidate | Dominated | Status]
#: The best rank a candidate on the node could reach (None: cannot tell).
Bound = Callable[[NodeInfo], Rank | None]


class _Found:
    """The candidates so far, as kube keeps them: two bounded lists, and a count of
    those that were not kept (dominated)."""

    def __init__(self, wanted: int) -> None:
        self.wanted = wanted
        self.clean: list[Candidate] = []
        self.breaking: list[Candidate] = []
        self.dominated = 0
        self.best: Rank | None = None
        self.statuses: dict[str, Status] = {}

    def take(self, node: NodeInfo, result: Candidate | Dominated | Status) -> None:
        if isinstance(result, Status):
            self.statuses[node.name] = result
        elif isinstance(result, Dominated):
            self.dominated += 1
        else:
            found = self.clean if result.violations == 0 else self.breaking
            if len(found) < self.wanted:
                found.append(result)
                if found is self.clean:
                    # Ties go to the first found (pick_one), so the bar is inclusive.
                    now = rank(result)
                    self.best = now if self.best is None else max(self.best, now)

    def count(self) -> int:
        return len(self.clean) + len(self.breaking) + self.dominated

    def enough(self) -> bool:
        return bool(self.clean) and self.count() >= self.wanted


def dry_run(simulate: Simulate, nodes: Sequence[NodeInfo], offset: int, wanted: int,
            bound: Bound | None = None) -> tuple[list[Candidate], dict[str, Status]]:
    """Simulate nodes from ``offset`` on (wrapping around) until ``wanted`` candidates are
    found and one of them breaks no budget; candidates breaking none come first. Each
    list keeps at most ``wanted`` (kube's bounded candidate lists). With ``bound``, nodes
    that cannot beat the best candidate are passed over (the module docstring). Returns
    the candidates that can be chosen and the statuses of the nodes simulated that are
    none."""
    found = _Found(wanted)
    passed: list[NodeInfo] = []
    for i in range(len(nodes)):
        node = nodes[(offset + i) % len(nodes)]
        if found.best is not None and bound is not None:
            best = bound(node)
            if best is not None and best <= found.best:
                passed.append(node)
                continue
            if found.count() + len(passed) >= wanted:
                # The simulation may have stopped among the nodes passed over: find out
                # which of them are candidates, in order, before this node is tried.
                for other in passed:
                    found.take(other, simulate(other, found.best))
                    if found.enough():
                        return found.clean + found.breaking, found.statuses
                passed = []
        found.take(node, simulate(node, found.best))
        if found.enough():
            break
    return found.clean + found.breaking, found.statuses


def rank(candidate: Candidate) -> Rank:
    """Bigger is better, criterion by criterion (kube's ``pickOneNodeForPreemption``):
    fewer budget violations, a lower highest victim priority, a smaller sum of victim
    priorities (each shifted by 2^31 so that more pods never sum to less), fewer victims,
    and the latest start among the highest-priority victims."""
    victims = candidate.victims
    highest = max((v.priority for v in victims), default=-math.inf)
    return (-candidate.violations, -highest,
            -sum(v.priority + 2**31 for v in victims), -len(victims),
            earliest_start(victims))


def pick_one(candidates: Sequence[Candidate]) -> Candidate:
    """The best candidate; ties go to the first (``max`` keeps the first maximum)."""
    return max(candidates, key=rank)


def nothing_helps(total: int, potential: int, statuses: dict[str, Status]) -> str:
    """Why preemption cannot help, kube's way: the simulated nodes' reasons, the potential
    nodes without lower-priority pods, and the nodes preemption cannot help at all."""
    no_victims = potential - len(statuses)
    groups = [(unresolvable(NO_VICTIMS), no_victims),
              (unresolvable(NOT_HELPFUL), total - potential)]
    diagnosis = Diagnosis(total, dict(statuses), groups=[(s, n) for s, n in groups if n > 0])
    return "preemption: " + summarize(diagnosis)
