"""PodDisruptionBudgets as preemption weighs them: which victims would break a budget.

Read as kube-scheduler reads them: a budget selects pods of its own namespace by its
label selector (a missing or empty selector, or one that does not parse, selects nothing);
``status.disruptionsAllowed`` is how many of them may go now, and a pod already in
``status.disruptedPods`` has been counted by the API server, so evicting it takes nothing
more. Only the fields that ``policy/v1`` and ``policy/v1beta1`` share are read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from vgpu import meta
from vgpu.cluster.port import Obj
from vgpu.errors import RequestError
from vgpu.labels import LabelSelector, parse_selector
from vgpu_scheduler.framework.podinfo import PodInfo


@dataclass(frozen=True, slots=True)
class Budget:
    namespace: str
    selector: LabelSelector
    allowed: int
    #: Pods whose eviction the API server has processed but the budget's controller has
    #: not yet seen leave.
    disrupted: frozenset[str]

    def selects(self, pod: PodInfo) -> bool:
        return pod.namespace == self.namespace and self.selector.matches(pod.labels)


def _parse(obj: Obj) -> Budget | None:
    spec: Any = obj.get("spec") or {}
    status: Any = obj.get("status") or {}
    if not all(isinstance(part, dict) for part in (spec, status)):
        return None
    try:
        selector = parse_selector(spec.get("selector"), "spec.selector")
    except RequestError:
        return None
    if selector is None or selector.empty:
        return None
    allowed = status.get("disruptionsAllowed", 0)
    if isinstance(allowed, bool) or not isinstance(allowed, int):
        allowed = 0
    disrupted = status.get("disruptedPods")
    names = frozenset(str(k) for k in disrupted) if isinstance(disrupted, dict) else frozenset()
    return Budget(meta.namespace(obj, "default"), selector, allowed, names)


def parse_budgets(objs: Iterable[Obj]) -> list[Budget]:
    """The budgets that select anything; malformed ones are skipped."""
    return [b for b in map(_parse, objs) if b is not None]


def violations(pods: Sequence[PodInfo], budgets: Sequence[Budget]) -> list[bool]:
    """Per pod, in order: whether evicting it, after the pods before it, breaks a budget.

    Each matching budget gives up one disruption per pod (kube's
    ``filterPodsWithPDBViolation``), so with one disruption allowed the first matching pod
    is fine and the second is not; the order is the caller's (most important first).
    """
    left = [b.allowed for b in budgets]
    out = []
    for pod in pods:
        broken = False
        if pod.labels:  # a pod without labels matches no selector
            for i, budget in enumerate(budgets):
                if not budget.selects(pod) or pod.name in budget.disrupted:
                    continue
                left[i] -= 1
                broken = broken or left[i] < 0
        out.append(broken)
    return out
