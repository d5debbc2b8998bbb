"""Parsed views of the standard Kubernetes fields the scheduler reads.

Pods and nodes arrive as plain dicts in API shape; these helpers turn the fields that
plugins consult on every cycle (taints, tolerations, node selectors, resource requests)
into small frozen values once, when the object changes, instead of per node per cycle.
Malformed fields raise :class:`vgpu.errors.RequestError` with the field's path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from vgpu.errors import QuantityError, RequestError
from vgpu.quantity import parse_quantity

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)

#: The taint the node lifecycle controller puts on a cordoned node.
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    #: Empty: every effect.
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` (or ``matchFields``) entry of a node selector term."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """A node selector term: every expression and field requirement must hold."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RequestError(f"{where} must be a list")
    return value


def _map(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RequestError(f"{where} must be a mapping")
    return value


def parse_taints(node: Mapping[str, Any]) -> tuple[Taint, ...]:
    spec = _map(node.get("spec"), "node spec")
    out: list[Taint] = []
    for i, raw in enumerate(_list(spec.get("taints"), "spec.taints")):
        item = _map(raw, f"spec.taints[{i}]")
        key = item.get("key")
        if not isinstance(key, str) or not key:
            raise RequestError(f"spec.taints[{i}].key must be a non-empty string")
        effect = item.get("effect", NO_SCHEDULE)
        if effect not in EFFECTS:
            raise RequestError(f"spec.taints[{i}].effect {effect!r} is not one of "
                               f"{', '.join(EFFECTS)}")
        out.append(Taint(key, str(item.get("value") or ""), str(effect)))
    return tuple(out)


def parse_tolerations(pod: Mapping[str, Any]) -> tuple[Toleration, ...]:
    spec = _map(pod.get("spec"), "pod spec")
    out: list[Toleration] = []
    for i, raw in enumerate(_list(spec.get("tolerations"), "spec.tolerations")):
        item = _map(raw, f"spec.tolerations[{i}]")
        operator = item.get("operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise RequestError(f"spec.tolerations[{i}].operator {operator!r} is not Equal or "
                               "Exists")
        effect = item.get("effect") or ""
        if effect and effect not in EFFECTS:
            raise RequestError(f"spec.tolerations[{i}].effect {effect!r} is not one of "
                               f"{', '.join(EFFECTS)}")
        out.append(Toleration(str(item.get("key") or ""), str(operator),
                              str(item.get("value") or ""), str(effect)))
    return tuple(out)


def _requirements(raw: Any, where: str) -> tuple[Requirement, ...]:
    out: list[Requirement] = []
    for i, item in enumerate(_list(raw, where)):
        entry = _map(item, f"{where}[{i}]")
        key, operator = entry.get("key"), entry.get("operator")
        if not isinstance(key, str) or not key:
            raise RequestError(f"{where}[{i}].key must be a non-empty string")
        if operator not in OPERATORS:
            raise RequestError(f"{where}[{i}].operator {operator!r} is not one of "
                               f"{', '.join(OPERATORS)}")
        values = tuple(str(v) for v in _list(entry.get("values"), f"{where}[{i}].values"))
        if operator in ("In", "NotIn") and not values:
            raise RequestError(f"{where}[{i}]: {operator} needs at least one value")
        if operator in ("Exists", "DoesNotExist") and values:
            raise RequestError(f"{where}[{i}]: {operator} takes no values")
        if operator in ("Gt", "Lt"):
            if len(values) != 1:
                raise RequestError(f"{where}[{i}]: {operator} needs exactly one value")
            try:
                int(values[0])
            except ValueError:
                raise RequestError(f"{where}[{i}]: {operator} value {values[0]!r} is not an "
                                   "integer") from None
        out.append(Requirement(key, str(operator), values))
    return tuple(out)


def parse_node_selector(pod: Mapping[str, Any]) -> dict[str, str]:
    spec = _map(pod.get("spec"), "pod spec")
    selector = _map(spec.get("nodeSelector"), "spec.nodeSelector")
    return {str(k): str(v) for k, v in selector.items()}


def parse_required_terms(pod: Mapping[str, Any]) -> tuple[SelectorTerm, ...] | None:
    """The required node-affinity terms, or ``None`` when the pod has none.

    An empty tuple is a required affinity that matches nothing, as in Kubernetes.
    """
    spec = _map(pod.get("spec"), "pod spec")
    where = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    affinity = _map(_map(spec.get("affinity"), "spec.affinity").get("nodeAffinity"),
                    "spec.affinity.nodeAffinity")
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    required = _map(required, where)
    terms: list[SelectorTerm] = []
    for i, raw in enumerate(_list(required.get("nodeSelectorTerms"),
                                  f"{where}.nodeSelectorTerms")):
        term = _map(raw, f"{where}.nodeSelectorTerms[{i}]")
        terms.append(SelectorTerm(
            _requirements(term.get("matchExpressions"),
                          f"{where}.nodeSelectorTerms[{i}].matchExpressions"),
            _requirements(term.get("matchFields"), f"{where}.nodeSelectorTerms[{i}].matchFields"),
        ))
    return tuple(terms)


# --- resources ---------------------------------------------------------------------------

def _amount(raw: Any, where: str) -> Fraction:
    try:
        return parse_quantity(raw)
    except QuantityError as exc:
        raise QuantityError(f"{where}: {exc}") from None


def milli(raw: Any, where: str) -> int:
    """CPU quantity → millicores, rounded up as the API server does."""
    return math.ceil(_amount(raw, where) * 1000)


def whole(raw: Any, where: str) -> int:
    """Memory (bytes) or count quantity, rounded up."""
    return math.ceil(_amount(raw, where))


def _container_requests(container: Mapping[str, Any], where: str) -> tuple[int, int]:
    resources = _map(container.get("resources"), f"{where}.resources")
    requests = _map(resources.get("requests"), f"{where}.resources.requests")
    limits = _map(resources.get("limits"), f"{where}.resources.limits")
    cpu = requests.get("cpu", limits.get("cpu"))
    memory = requests.get("memory", limits.get("memory"))
    return (milli(cpu, f"{where} cpu") if cpu is not None else 0,
            whole(memory, f"{where} memory") if memory is not None else 0)


def pod_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(CPU millicores, memory bytes) the pod needs on a node, as kube-scheduler counts them:
    the larger of the sum of its containers and its largest init container, plus overhead.
    A container's limit stands in for a missing request."""
    spec = _map(pod.get("spec"), "pod spec")
    cpu = memory = 0
    for i, c in enumerate(_list(spec.get("containers"), "spec.containers")):
        c_cpu, c_mem = _container_requests(_map(c, f"spec.containers[{i}]"),
                                           f"spec.containers[{i}]")
        cpu += c_cpu
        memory += c_mem
    for i, c in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        c_cpu, c_mem = _container_requests(_map(c, f"spec.initContainers[{i}]"),
                                           f"spec.initContainers[{i}]")
        cpu, memory = max(cpu, c_cpu), max(memory, c_mem)
    overhead = _map(spec.get("overhead"), "spec.overhead")
    if "cpu" in overhead:
        cpu += milli(overhead["cpu"], "spec.overhead.cpu")
    if "memory" in overhead:
        memory += whole(overhead["memory"], "spec.overhead.memory")
    return cpu, memory


def node_allocatable(node: Mapping[str, Any]) -> tuple[int, int, int]:
    """(CPU millicores, memory bytes, pods) a node offers; capacity when allocatable is
    absent, 0 when both are."""
    status = _map(node.get("status"), "node status")
    alloc = _map(status.get("allocatable"), "status.allocatable") or _map(
        status.get("capacity"), "status.capacity")
    cpu = milli(alloc["cpu"], "status.allocatable.cpu") if "cpu" in alloc else 0
    memory = whole(alloc["memory"], "status.allocatable.memory") if "memory" in alloc else 0
    pods = whole(alloc["pods"], "status.allocatable.pods") if "pods" in alloc else 0
    return cpu, memory, pods
