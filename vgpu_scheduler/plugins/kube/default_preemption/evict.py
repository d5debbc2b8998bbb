"""Carrying a preemption out: the calls :mod:`.calls` decided, through the cluster port,
on the host's preemption executor (off the scheduling loop).

kube-scheduler deletes its victims outright, so a PodDisruptionBudget only steers which
node and victims it chooses. vgpu-scheduler evicts (``pods/eviction``; its RBAC has no
pod deletes), so the API server enforces every budget: a victim whose eviction is refused
(HTTP 429) stays, and the preemption stops there; the host then gives up the pod's
nomination and tries it again after a backoff, with the budgets as they are then.
Victims evicted before a refusal stay evicted (they cannot be brought back), and the
next attempt counts what they freed.

A victim found gone, or replaced by another pod of its name, needs nothing more; a
condition or an event that does not go through is logged, never worth failing a
preemption over (the eviction it follows went through).
"""

from __future__ import annotations

import datetime as dt

from vgpu import logs, meta, times
from vgpu.cluster.fence import FencedError
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.errors import ClusterError, ConflictError, EvictionRefusedError, NotFoundError
from vgpu_scheduler.framework.handle import Clock
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.plugins.kube.default_preemption.calls import (
    Announce,
    Call,
    Evict,
    Mark,
    Nominate,
    Plan,
)

_log = logs.get("vgpu.scheduler.preemption")

#: Events come from the scheduler as the host's do.
COMPONENT = "vgpu-scheduler"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def terminating_by_preemption(pod: Obj, conditions: bool = True) -> bool:
    """Being deleted because a scheduler preempted it (kube's
    ``podTerminatingByPreemption``). Without ``conditions`` (an API server before 1.26,
    where nobody writes the condition) every pod being deleted counts, as in kube."""
    if not meta.deleting(pod):
        return False
    if not conditions:
        return True
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == DISRUPTION_TARGET:
            return bool(cond.get("status") == "True"
                        and cond.get("reason") == PREEMPTION_BY_SCHEDULER)
    return False


def disruption_target(scheduler_name: str, now: float) -> dict[str, str]:
    return {"type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER,
            "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
            "lastTransitionTime": times.format_time(dt.datetime.fromtimestamp(now, dt.UTC))}


class Carrier:
    """Sends one preemption's calls for ``preemptor`` on ``node``."""

    def __init__(self, cluster: ClusterPort, preemptor: PodInfo, node: str, *,
                 scheduler_name: str, clock: Clock) -> None:
        self.cluster = cluster
        self.preemptor = preemptor
        self.node = node
        self.scheduler_name = scheduler_name
        self.clock = clock

    def run(self, plan: Plan) -> str | None:
        """Every call in order; None, or why the preemption stopped (after the plan's
        ``on_failure`` calls were sent)."""
        gone: set[str] = set()
        try:
            for call in plan.calls:
                if not isinstance(call, Nominate) and call.victim.info.pod_id in gone:
                    continue
                failure = self._send(call, gone)
                if failure is not None:
                    for undo in plan.on_failure:
                        self._send(undo, gone)
                    return failure
        except FencedError as exc:
            # This replica may no longer lead: nothing more goes out, undo included (the
            # next leader reads what went out from the API server).
            _log.info("preemption stopped: fenced", pod=self.preemptor.key, error=str(exc))
            return f"preemption: {exc}"
        return None

    def _send(self, call: Call, gone: set[str]) -> str | None:
        match call:
            case Evict(victim):
                return self._evict(victim.info, gone)
            case Mark(victim):
                self._mark(victim.info)
            case Announce(victim):
                self._announce(victim.obj)
            case Nominate(pod, node):
                set_nominated_node(self.cluster, pod, node)
        return None

    def _evict(self, info: PodInfo, gone: set[str]) -> str | None:
        try:
            self.cluster.evict(info.namespace, info.name, uid=info.uid)
        except (NotFoundError, ConflictError):
            gone.add(info.pod_id)  # gone already (a pod of the same name now is another)
        except EvictionRefusedError as exc:
            _log.info("preemption stopped: eviction refused", pod=self.preemptor.key,
                      victim=info.key, node=self.node, error=str(exc))
            return (f"preemption: eviction of {info.key} on node {self.node} was refused "
                    f"by a PodDisruptionBudget; will retry.")
        except ClusterError as exc:
            _log.warning("preemption stopped: eviction failed", pod=self.preemptor.key,
                         victim=info.key, node=self.node, error=str(exc))
            return f"preemption: evicting {info.key} failed: {exc}"
        return None

    def _mark(self, info: PodInfo) -> None:
        try:
            self.cluster.patch_annotations(
                "pods", info.name, {}, info.namespace, uid=info.uid, status=True,
                conditions=[disruption_target(self.scheduler_name, self.clock())])
        except (NotFoundError, ConflictError):
            pass  # gone already: nothing is terminating
        except ClusterError as exc:
            _log.warning("could not mark a preempted pod", pod=info.key, error=str(exc))

    def _announce(self, victim: Obj) -> None:
        try:
            self.cluster.record_event(victim, "Normal", "Preempted",
                                      f"Preempted by pod {self.preemptor.uid or self.preemptor.key}"
                                      f" on node {self.node}", COMPONENT)
        except ClusterError as exc:
            _log.warning("could not record event", pod=meta.name(victim), error=str(exc))


def set_nominated_node(cluster: ClusterPort, pod: PodInfo, node: str | None) -> None:
    """``status.nominatedNodeName`` of a pending pod (None clears it)."""
    try:
        cluster.patch_status("pods", pod.name, {"nominatedNodeName": node}, pod.namespace)
    except ClusterError as exc:
        _log.warning("could not set the nominated node", pod=pod.key, node=node,
                     error=str(exc))
