"""Label selectors (``metav1.LabelSelector``): parsed once, matched many times.

Pod affinity terms, topology spread constraints, PodDisruptionBudgets and the workloads
that own pods all select pods this way. The semantics are Kubernetes': the requirements
of ``matchLabels`` and ``matchExpressions`` are ANDed; an empty selector matches every
object and a missing one (None) matches none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.errors import RequestError
from vgpu.fields import as_map

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return labels.get(self.key) in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        return self.key not in labels  # DoesNotExist


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


EVERYTHING = LabelSelector()


def _expression(raw: Any, where: str) -> LabelRequirement:
    item = as_map(raw, where)
    key, operator = item.get("key"), item.get("operator")
    if not isinstance(key, str) or not key:
        raise RequestError(f"{where}.key must be a non-empty string")
    if operator not in OPERATORS:
        raise RequestError(f"{where}.operator {operator!r} is not one of {', '.join(OPERATORS)}")
    values = item.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise RequestError(f"{where}.values must be a list of strings")
    if operator in ("In", "NotIn") and not values:
        raise RequestError(f"{where}: {operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise RequestError(f"{where}: {operator} takes no values")
    return LabelRequirement(key, str(operator), frozenset(values))


def parse_selector(raw: Any, where: str) -> LabelSelector | None:
    """A selector from its API shape; None when ``raw`` is None (selects nothing)."""
    if raw is None:
        return None
    body = as_map(raw, where)
    requirements = [LabelRequirement(str(k), "In", frozenset({str(v)}))
                    for k, v in as_map(body.get("matchLabels"), f"{where}.matchLabels").items()]
    expressions = body.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise RequestError(f"{where}.matchExpressions must be a list")
    requirements += [_expression(e, f"{where}.matchExpressions[{i}]")
                     for i, e in enumerate(expressions)]
    return LabelSelector(tuple(requirements))


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """An object's labels as strings; empty when it has none (or malformed metadata)."""
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping):
        return {}
    return {str(k): str(v) for k, v in labels.items()}
