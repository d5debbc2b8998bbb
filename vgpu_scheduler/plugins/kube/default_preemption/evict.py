"""Carrying a preemption out: the victims leave through the Eviction API.

kube-scheduler deletes its victims outright, so a PodDisruptionBudget only steers which
node and victims it chooses. vgpu-scheduler evicts (``pods/eviction``; its RBAC has no
pod deletes), so the API server enforces every budget: a victim whose eviction is refused
(HTTP 429) stays, and this attempt gives up with an ERROR status, so the pod backs off
and is tried again with the budgets as they are then. Victims whose eviction could break
a budget are evicted first, so that a refusal comes before any other victim was
disturbed; victims evicted before a refusal stay evicted (they cannot be brought back),
and the next attempt counts what they freed.

After each eviction, as kube-scheduler does before its delete, the victim gets the
``DisruptionTarget`` condition with reason ``PreemptionByScheduler`` (which is how the
preemptor recognises, on its next attempt, that its victims are still terminating) and a
``Preempted`` event.
"""

from __future__ import annotations

import datetime as dt

from vgpu import logs, meta
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.errors import ClusterError, ConflictError, EvictionRefusedError, NotFoundError
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import SUCCESS, Status, error
from vgpu_scheduler.plugins.kube.default_preemption.victims import Candidate, Victim

_log = logs.get("vgpu.scheduler.preemption")

#: Events come from the scheduler as the host's do.
COMPONENT = "vgpu-scheduler"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def terminating_by_preemption(pod: Obj) -> bool:
    """Being deleted because a scheduler preempted it (kube's
    ``podTerminatingByPreemption``)."""
    if not meta.deleting(pod):
        return False
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == DISRUPTION_TARGET:
            return bool(cond.get("status") == "True"
                        and cond.get("reason") == PREEMPTION_BY_SCHEDULER)
    return False


def eviction_order(candidate: Candidate) -> list[Victim]:
    """Victims that break a budget first (the likeliest refusals), each group most
    important first; victims already being deleted need no call."""
    ordered = sorted(candidate.victims, key=lambda v: v.info.key not in candidate.breaking)
    return [v for v in ordered if not meta.deleting(v.obj)]


def _condition(victim: Victim, scheduler_name: str, now: float) -> dict[str, object]:
    """The victim's conditions with DisruptionTarget set. The status is merge-patched,
    which replaces the list, so the others are carried over from the watch's copy."""
    conditions = [c for c in (victim.obj.get("status") or {}).get("conditions") or []
                  if isinstance(c, dict) and c.get("type") != DISRUPTION_TARGET]
    stamp = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions.append({
        "type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER,
        "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": stamp,
    })
    return {"conditions": conditions}


def evict_victims(cluster: ClusterPort, preemptor: PodInfo, candidate: Candidate, *,
                  scheduler_name: str, now: float) -> Status:
    """Evict every victim of ``candidate``; SUCCESS, or the ERROR that stopped it."""
    for victim in eviction_order(candidate):
        info = victim.info
        try:
            cluster.evict(info.namespace, info.name, uid=info.uid)
        except (NotFoundError, ConflictError):
            continue  # gone already (a pod of the same name now is another pod)
        except EvictionRefusedError as exc:
            _log.info("preemption stopped: eviction refused", pod=preemptor.key,
                      victim=info.key, node=candidate.node, error=str(exc))
            return error(f"preemption: eviction of {info.key} on node {candidate.node} "
                         f"was refused by a PodDisruptionBudget; will retry")
        except ClusterError as exc:
            _log.warning("preemption stopped: eviction failed", pod=preemptor.key,
                         victim=info.key, node=candidate.node, error=str(exc))
            return error(f"preemption: evicting {info.key} failed: {exc}")
        _mark(cluster, preemptor, victim, node=candidate.node, scheduler_name=scheduler_name,
              now=now)
    return SUCCESS


def _mark(cluster: ClusterPort, preemptor: PodInfo, victim: Victim, *, node: str,
          scheduler_name: str, now: float) -> None:
    """The condition and the event; neither is worth failing a preemption over."""
    info = victim.info
    try:
        cluster.patch_status("pods", info.name, _condition(victim, scheduler_name, now),
                             info.namespace)
    except NotFoundError:
        pass  # already gone: nothing is terminating
    except ClusterError as exc:
        _log.warning("could not mark a preempted pod", pod=info.key, error=str(exc))
    try:
        cluster.record_event(victim.obj, "Normal", "Preempted",
                             f"Preempted by pod {preemptor.uid or preemptor.key} on node "
                             f"{node}", COMPONENT)
    except ClusterError as exc:
        _log.warning("could not record event", pod=info.key, error=str(exc))


def set_nominated_node(cluster: ClusterPort, pod: PodInfo, node: str | None) -> None:
    """``status.nominatedNodeName`` of a pending pod (None clears it)."""
    try:
        cluster.patch_status("pods", pod.name, {"nominatedNodeName": node}, pod.namespace)
    except ClusterError as exc:
        _log.warning("could not set the nominated node", pod=pod.key, node=node,
                     error=str(exc))
