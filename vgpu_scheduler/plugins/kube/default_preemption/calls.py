"""What a preemption asks of the API server, and in what order: the decision that
:mod:`.evict` carries out off the scheduling loop.

kube-scheduler deletes each victim (one DELETE), after patching the ``DisruptionTarget``
condition onto it where the API server has the PodDisruptionConditions feature (1.26 on),
records a ``Preempted`` event, clears the nominations it displaced, and sets the
preemptor's ``nominatedNodeName`` (one status PATCH). vgpu makes the same calls, no more,
with two differences, each for a reason:

* A victim leaves through the Eviction API (one POST instead of the DELETE), so that the
  API server enforces its PodDisruptionBudgets. Victims that would break a budget go
  first, so that a refusal comes before any other victim is disturbed.
* On a 1.26+ server the eviction itself gives the pod the condition, with reason
  ``EvictionByEvictionAPI``, over any it had: a condition patched before the eviction
  would be overwritten. So ``PreemptionByScheduler`` is patched just after the eviction,
  while the victim terminates (kube's count: one PATCH a victim), except for a victim
  with no grace period, which is gone by then. Before 1.26 no condition is written, as
  kube-scheduler writes none there, and a preemptor waits for any lower-priority pod
  terminating on its node (kube's rule without the feature).

The preemptor's ``nominatedNodeName`` is set last, once every victim is on its way out: a
preemption that fails then has nothing to take back, unless the pod already showed a
nomination (it is then cleared: a pod nominated where nothing is leaving would mislead).
Victims already being deleted need no call.
"""

from __future__ import annotations

from dataclasses import dataclass

from vgpu import meta
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.plugins.kube.default_preemption.victims import Candidate, Victim


@dataclass(frozen=True, slots=True)
class Evict:
    """POST the victim's ``pods/eviction`` (with its uid as the precondition)."""

    victim: Victim


@dataclass(frozen=True, slots=True)
class Mark:
    """Patch ``DisruptionTarget`` (reason ``PreemptionByScheduler``) onto the victim's
    status, by its uid."""

    victim: Victim


@dataclass(frozen=True, slots=True)
class Announce:
    """Record the victim's ``Preempted`` event."""

    victim: Victim


@dataclass(frozen=True, slots=True)
class Nominate:
    """Set a pending pod's ``status.nominatedNodeName`` (None clears it)."""

    pod: PodInfo
    node: str | None


Call = Evict | Mark | Announce | Nominate


@dataclass(frozen=True)
class Plan:
    calls: tuple[Call, ...]
    #: What is sent instead of the rest once a call fails.
    on_failure: tuple[Call, ...] = ()


def eviction_order(candidate: Candidate) -> list[Victim]:
    """Victims that break a budget first (the likeliest refusals), each group most
    important first; victims already being deleted need no call."""
    ordered = sorted(candidate.victims, key=lambda v: v.info.key not in candidate.breaking)
    return [v for v in ordered if not meta.deleting(v.obj)]


def _lingers(victim: Victim) -> bool:
    """Whether the victim is still there, terminating, once its eviction returns: a
    bound pod is deleted gracefully unless its grace period is zero or it has ended."""
    spec = meta.mapping(victim.obj.get("spec"))
    phase = meta.mapping(victim.obj.get("status")).get("phase")
    return spec.get("terminationGracePeriodSeconds") != 0 and phase not in (
        "Succeeded", "Failed")


def plan(preemptor: PodInfo, candidate: Candidate, *, nominated: str | None,
         conditions: bool) -> Plan:
    """The calls of ``preemptor``'s preemption on ``candidate``: the nominations it takes
    over cleared, each victim evicted (and marked, with ``conditions``) and announced,
    then the preemptor nominated. ``nominated`` is the node its ``nominatedNodeName``
    shows now."""
    calls: list[Call] = [Nominate(placed.info, None) for placed in candidate.displaced]
    for victim in eviction_order(candidate):
        calls.append(Evict(victim))
        if conditions and _lingers(victim):
            calls.append(Mark(victim))
        calls.append(Announce(victim))
    if nominated != candidate.node:
        calls.append(Nominate(preemptor, candidate.node))
    undo = (Nominate(preemptor, None),) if nominated is not None else ()
    return Plan(tuple(calls), undo)
