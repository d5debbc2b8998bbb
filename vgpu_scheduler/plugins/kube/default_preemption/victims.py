"""Which pods to evict on one node so that the preemptor fits (kube's
``SelectVictimsOnNode``).

Every pod of strictly lower priority leaves the node at once; if the preemptor does not
fit even then, the node is no candidate. Otherwise the pods are given back one by one,
most important first (higher priority, then longer running), those whose eviction would
break a PodDisruptionBudget before the others; a pod stays when the preemptor still fits
with it, and is a victim when it does not. "Fits" is the profile's whole Filter chain on
the node as it would be, so for a GPU pod it is a real per-GPU placement of every
container (memory, compute and split slots on the same GPUs), not a total of what is
freed; the PreFilter extensions hear of every pod taken away or given back.

A lower-priority pod that is only nominated to the node (its own preemption is waiting
for victims) is no victim: it is not running, its room is simply taken (kube's
scheduler likewise ignores lower-priority nominations and removes them). A pod still
being bound (assumed, or held at Permit) is no victim either until it is bound.

A node that cannot beat the best candidate found so far needs no choice of victims
(:class:`Dominated`): :func:`bound` is the best rank any choice on it could reach, from
the fewest victims whose CPU, memory and pod slot would let NodeResourcesFit pass
(:func:`least_victims`). The simulation (:mod:`.candidates`) passes over such nodes; on a
cluster of alike nodes (upstream's PreemptionBasic) one node is simulated in full and
the others are told apart by a few sums, and the choice is the same (a property test
holds it to the full simulation's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vgpu import meta, times
from vgpu.cluster.port import Obj
from vgpu.pods import node_name
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import Status, unresolvable
from vgpu_scheduler.plugins.kube.default_preemption.budgets import Budget, violations
from vgpu_scheduler.plugins.kube.default_preemption.trial import Trial

NO_VICTIMS = "No preemption victims found for incoming pod"

#: The latest object of a pod on the node, as the watch last showed it (the cache keeps
#: the version the pod was placed with: no deletion mark, no conditions, no start time).
Fresh = Callable[[NodePod], Obj]


def start_time(pod: Obj, now: float) -> float:
    """``status.startTime`` in epoch seconds; a pod that has not started counts as
    starting now (kube's ``GetPodStartTime``)."""
    started = times.epoch(meta.mapping(pod.get("status")).get("startTime"))
    return now if started is None else started


@dataclass(frozen=True, slots=True)
class Victim:
    pod: NodePod
    #: The pod as the watch last showed it.
    obj: Obj
    start: float

    @property
    def info(self) -> PodInfo:
        return self.pod.info

    @property
    def priority(self) -> int:
        return self.pod.info.priority

    @property
    def importance(self) -> tuple[int, float]:
        """Sorts the most important first: higher priority, then started earlier."""
        return (-self.pod.info.priority, self.start)


#: A candidate's rank in kube's ``pickOneNodeForPreemption``: bigger is better.
Rank = tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Dominated:
    """A candidate whose victims were not chosen: it cannot rank above the cutoff."""

    node: str


@dataclass(frozen=True)
class Candidate:
    """A node where the preemptor fits once ``victims`` are gone."""

    node: str
    #: Most important first.
    victims: tuple[Victim, ...]
    #: Keys of the victims whose eviction breaks a PodDisruptionBudget.
    breaking: frozenset[str]
    #: Lower-priority pods nominated here whose nomination the preemptor takes over.
    displaced: tuple[NodePod, ...]
    #: The node without the victims and the displaced: where the preemptor fits.
    room: NodeInfo

    @property
    def violations(self) -> int:
        return len(self.breaking)


def lower_priority(pod: PodInfo, node: NodeInfo, fresh: Fresh,
                   now: float) -> tuple[list[Victim], list[NodePod]]:
    """The node's pods the preemptor may evict, and the nominations it may displace."""
    victims: list[Victim] = []
    displaced: list[NodePod] = []
    for placed in node.pods.values():
        if placed.info.priority >= pod.priority:
            continue
        if placed.nominated:
            displaced.append(placed)
            continue
        obj = fresh(placed)
        if node_name(obj) is not None:
            victims.append(Victim(placed, obj, start_time(obj, now)))
    return victims, displaced


def least_victims(pod: PodInfo, node: NodeInfo, victims: Sequence[Victim]) -> int:
    """How many of ``victims`` must go, at least, before NodeResourcesFit lets ``pod`` on
    ``node``: its CPU, memory and pod slot, each freed by the largest victims first. 0 when
    those already fit (what is short is elsewhere, a GPU say: no bound); more than there
    are when even all of them would not do."""
    s = node.static
    infos = [v.pod.info for v in victims]
    least = 0
    for request, requested, allocatable, sizes in (
            (pod.cpu_milli, node.requested_cpu, s.alloc_cpu, [i.cpu_milli for i in infos]),
            (pod.memory, node.requested_memory, s.alloc_memory, [i.memory for i in infos]),
            (1, node.pod_count, s.alloc_pods, [1] * len(infos))):
        short = requested + request - allocatable
        if request <= 0 or short <= 0:
            continue  # (a request of zero is never refused)
        freed = count = 0
        for amount in sorted(sizes, reverse=True):
            if freed >= short:
                break
            freed += amount
            count += 1
        least = max(least, count if freed >= short else len(infos) + 1)
    return least


def best_possible(victims: Sequence[Victim], least: int) -> Rank:
    """The best rank a choice of at least ``least`` (>= 1) of ``victims`` could reach:
    no budget broken, the ``least`` lowest priorities, the latest start of any."""
    lowest = sorted(v.priority for v in victims)[:least]
    return (0, -lowest[-1], -sum(p + 2**31 for p in lowest), -least,
            max(v.start for v in victims))


Lower = tuple[list[Victim], list[NodePod]]


#: The bound of a node that is no candidate whatever goes: below any rank.
NO_CANDIDATE: Rank = (-math.inf,)


def bound(pod: PodInfo, node: NodeInfo, lower: Lower) -> Rank | None:
    """The best rank a candidate on ``node`` could reach (valid where NodeResourcesFit is
    a Filter for the pod), or None: nothing to tell (lower-priority nominations to take
    over, which may be room enough, or nothing short in CPU, memory or pod slots)."""
    victims, displaced = lower
    if displaced or not victims:
        return None
    least = least_victims(pod, node, victims)
    if least > len(victims):
        return NO_CANDIDATE
    return best_possible(victims, least) if least else None


def select_victims(handle: Handle, state: CycleState, pod: PodInfo, node: NodeInfo, *,
                   budgets: Sequence[Budget], fresh: Fresh, now: float,
                   cutoff: Rank | None = None,
                   lower: Lower | None = None) -> Candidate | Dominated | Status:
    """The fewest, least important victims on ``node`` (see the module docstring), or
    why the node cannot take the pod even with preemption. ``state`` is the caller's
    clone: the PreFilter extensions write into it. With ``cutoff`` (the rank of the best
    candidate breaking no budget found so far, when NodeResourcesFit is a Filter for the
    pod), a candidate that cannot rank above it is :class:`Dominated`. ``lower``: the
    node's :func:`lower_priority` pods, when the caller has them."""
    victims, displaced = ([*lower[0]], [*lower[1]]) if lower is not None else \
        lower_priority(pod, node, fresh, now)
    if not victims and not displaced:
        return unresolvable(NO_VICTIMS)
    trial = Trial(handle, state, pod, node)
    failed = trial.remove([*displaced, *(v.pod for v in victims)])
    if failed is not None:
        return failed
    status = trial.fits()
    if not status.ok:
        # Without pods to evict the node is as it was for the filters (the nominations
        # taken away are not running): kube's answer for a node with no victims.
        return status if victims else unresolvable(NO_VICTIMS)
    if cutoff is not None:
        best = bound(pod, node, (victims, displaced))
        if best is not None and best <= cutoff:
            return Dominated(node.name)
    chosen = _reprieve(trial, victims, budgets)
    if isinstance(chosen, Status):
        return chosen
    return Candidate(node.name, *chosen, tuple(displaced), trial.room)


def _reprieve(trial: Trial, victims: list[Victim], budgets: Sequence[Budget],
              ) -> tuple[tuple[Victim, ...], frozenset[str]] | Status:
    """Give the victims back most important first, those whose eviction would break a
    budget before the others; the victims are those the pod does not fit with (most
    important first), and the keys of those that break a budget."""
    victims.sort(key=lambda v: v.importance)
    broken = violations([v.info for v in victims], budgets)
    violating = [v for v, b in zip(victims, broken, strict=True) if b]
    others = [v for v, b in zip(victims, broken, strict=True) if not b]
    chosen: list[Victim] = []
    breaking: set[str] = set()
    for group, breaks in ((violating, True), (others, False)):
        for victim in group:
            kept = trial.give_back(victim.pod)
            if isinstance(kept, Status):
                return kept
            if not kept:
                chosen.append(victim)
                if breaks:
                    breaking.add(victim.info.key)
    if violating and others:
        chosen.sort(key=lambda v: v.importance)
    return tuple(chosen), frozenset(breaking)


def earliest_start(victims: Sequence[Victim]) -> float:
    """When the earliest of the highest-priority victims started (kube's
    ``GetEarliestPodStartTime``); infinitely late for none."""
    if not victims:
        return math.inf
    top = max(v.priority for v in victims)
    return min(v.start for v in victims if v.priority == top)
