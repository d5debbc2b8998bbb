"""Label selectors (``metav1.LabelSelector``): parsed once, matched many times.

Pod affinity terms, topology spread constraints, PodDisruptionBudgets and the workloads
that own pods all select pods this way. The semantics are Kubernetes': the requirements
of ``matchLabels`` and ``matchExpressions`` are ANDed; an empty selector matches every
object and a missing one (None) matches none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.errors import RequestError
from vgpu.request_fields import as_map

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")

# Kubernetes' label syntax (apimachinery's IsQualifiedName and IsValidLabelValue): the API
# server refuses anything else, and kube-scheduler fails a pod whose selector breaks it.
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_VALUE_RULE = ("a label value must be empty or at most 63 characters of alphanumerics, "
               "'-', '_' or '.', starting and ending with an alphanumeric")
_KEY_RULE = ("a label key must be a name of at most 63 alphanumerics, '-', '_' or '.' "
             "(starting and ending with an alphanumeric), optionally prefixed by a DNS "
             "subdomain and '/'")


def valid_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and _NAME.fullmatch(name) is not None


def valid_value(value: str) -> bool:
    return not value or (len(value) <= 63 and _NAME.fullmatch(value) is not None)


def _check_key(key: str, where: str) -> None:
    if not valid_key(key):
        raise RequestError(f"{where}: invalid label key {key!r}: {_KEY_RULE}")


def _check_values(values: Any, where: str) -> None:
    for value in values:
        if not valid_value(value):
            raise RequestError(f"{where}: invalid label value {value!r}: {_VALUE_RULE}")


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
    _check_key(key, f"{where}.key")
    _check_values(values, f"{where}.values")
    return LabelRequirement(key, str(operator), frozenset(values))


def parse_selector(raw: Any, where: str) -> LabelSelector | None:
    """A selector from its API shape; None when ``raw`` is None (selects nothing)."""
    if raw is None:
        return None
    body = as_map(raw, where)
    requirements = []
    for k, v in as_map(body.get("matchLabels"), f"{where}.matchLabels").items():
        key, value = str(k), str(v)
        _check_key(key, f"{where}.matchLabels")
        _check_values((value,), f"{where}.matchLabels[{key}]")
        requirements.append(LabelRequirement(key, "In", frozenset({value})))
    expressions = body.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise RequestError(f"{where}.matchExpressions must be a list")
    requirements += [_expression(e, f"{where}.matchExpressions[{i}]")
                     for i, e in enumerate(expressions)]
    return LabelSelector(tuple(requirements))


def from_labels(labels: Mapping[str, str]) -> LabelSelector:
    """The selector that a plain label map stands for (a Service's or a
    ReplicationController's ``spec.selector``): every pair must be present."""
    return LabelSelector(tuple(LabelRequirement(k, "In", frozenset({v}))
                               for k, v in sorted(labels.items())))
