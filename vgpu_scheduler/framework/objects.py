"""Parsed views of the standard Kubernetes fields the scheduler reads.

Pods and nodes arrive as plain dicts in API shape; these helpers turn the fields that
plugins consult on every cycle (taints, tolerations, node selectors, resource requests)
into small frozen values once, when the object changes, instead of per node per cycle.
Malformed fields raise :class:`vgpu.errors.RequestError` with the field's path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.errors import RequestError
from vgpu.request_fields import as_list, as_map

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


def parse_taints(node: Mapping[str, Any]) -> tuple[Taint, ...]:
    spec = as_map(node.get("spec"), "node spec")
    out: list[Taint] = []
    for i, raw in enumerate(as_list(spec.get("taints"), "spec.taints")):
        item = as_map(raw, f"spec.taints[{i}]")
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
    spec = as_map(pod.get("spec"), "pod spec")
    out: list[Toleration] = []
    for i, raw in enumerate(as_list(spec.get("tolerations"), "spec.tolerations")):
        item = as_map(raw, f"spec.tolerations[{i}]")
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
    for i, item in enumerate(as_list(raw, where)):
        entry = as_map(item, f"{where}[{i}]")
        key, operator = entry.get("key"), entry.get("operator")
        if not isinstance(key, str) or not key:
            raise RequestError(f"{where}[{i}].key must be a non-empty string")
        if operator not in OPERATORS:
            raise RequestError(f"{where}[{i}].operator {operator!r} is not one of "
                               f"{', '.join(OPERATORS)}")
        values = tuple(str(v) for v in as_list(entry.get("values"), f"{where}[{i}].values"))
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
    spec = as_map(pod.get("spec"), "pod spec")
    selector = as_map(spec.get("nodeSelector"), "spec.nodeSelector")
    return {str(k): str(v) for k, v in selector.items()}


def _node_affinity(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = as_map(pod.get("spec"), "pod spec")
    return as_map(as_map(spec.get("affinity"), "spec.affinity").get("nodeAffinity"),
                "spec.affinity.nodeAffinity")


def _term(raw: Any, where: str) -> SelectorTerm:
    term = as_map(raw, where)
    return SelectorTerm(_requirements(term.get("matchExpressions"), f"{where}.matchExpressions"),
                        _requirements(term.get("matchFields"), f"{where}.matchFields"))


def parse_preferred_terms(pod: Mapping[str, Any]) -> tuple[tuple[int, SelectorTerm], ...]:
    """The preferred node-affinity terms with their weights (1–100)."""
    where = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    out: list[tuple[int, SelectorTerm]] = []
    raw = _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution")
    for i, item in enumerate(as_list(raw, where)):
        entry = as_map(item, f"{where}[{i}]")
        weight = entry.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise RequestError(f"{where}[{i}].weight {weight!r} must be an integer from 1 to 100")
        out.append((weight, _term(entry.get("preference"), f"{where}[{i}].preference")))
    return tuple(out)


def parse_node_selector_terms(raw: Any, where: str) -> tuple[SelectorTerm, ...]:
    """The terms of a ``NodeSelector`` (``nodeSelectorTerms``): a pod's required node
    affinity, a PersistentVolume's ``spec.nodeAffinity.required``."""
    body = as_map(raw, where)
    return tuple(_term(item, f"{where}.nodeSelectorTerms[{i}]") for i, item in enumerate(
        as_list(body.get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")))


def parse_required_terms(pod: Mapping[str, Any]) -> tuple[SelectorTerm, ...] | None:
    """The required node-affinity terms, or ``None`` when the pod has none.

    An empty tuple is a required affinity that matches nothing, as in Kubernetes.
    """
    where = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    return parse_node_selector_terms(required, where)
