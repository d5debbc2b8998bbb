"""Which PodDisruptionBudgets an eviction of a pod is charged to, as the API server decides.

A pod that is not running disrupts nothing by leaving: no budget guards it. A running pod
is guarded by every budget of its namespace whose selector matches its labels, except that
an unready pod of budgets that are all met serves nothing and is evicted regardless. The
in-memory cluster refuses the eviction while a guarding budget allows no disruption, and
otherwise takes one from each (the disruption controller, which refills them, is not
simulated).
"""

from __future__ import annotations

from collections.abc import Iterable

from vgpu import meta
from vgpu.cluster.port import Obj
from vgpu.errors import RequestError
from vgpu.labels import parse_selector


def guarding(budgets: Iterable[Obj], pod: Obj) -> list[Obj]:
    """The budgets an eviction of ``pod`` must respect, in the order given."""
    if meta.mapping(pod.get("status")).get("phase") != "Running":
        return []
    namespace = meta.namespace(pod, "default")
    found = [b for b in budgets
             if meta.namespace(b, "default") == namespace and _selects(b, pod)]
    if not _ready(pod) and all(_met(b) for b in found):
        return []
    return found


def allowed(budget: Obj) -> int:
    """``status.disruptionsAllowed``; 0 when missing or not a number."""
    value = meta.mapping(budget.get("status")).get("disruptionsAllowed", 0)
    return value if isinstance(value, int) else 0


def _ready(pod: Obj) -> bool:
    conditions = meta.mapping(pod.get("status")).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
               for c in conditions)


def _met(budget: Obj) -> bool:
    status = meta.mapping(budget.get("status"))
    return int(status.get("currentHealthy", 0)) >= int(status.get("desiredHealthy", 0))


def _selects(budget: Obj, pod: Obj) -> bool:
    try:
        selector = parse_selector(meta.mapping(budget.get("spec")).get("selector"), "selector")
    except RequestError:  # a malformed budget selects nothing
        return False
    return selector is not None and selector.matches(meta.labels_of(pod))
