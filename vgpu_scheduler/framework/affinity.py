"""Pod (anti-)affinity terms, parsed once per pod version (``PodInfo.pod_affinity``).

A term selects pods by labels, in a set of namespaces (its ``namespaces`` list, or the
pod's own namespace when it names none and has no ``namespaceSelector``) and, through
``namespaceSelector``, in the namespaces whose labels match. Matching follows
kube-scheduler's ``AffinityTerm.Matches``: the namespace is in the list or the namespace
labels match the selector (an empty selector matches every namespace, a missing one none),
and then the pod's labels match the label selector (a missing one matches no pod).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from vgpu.errors import RequestError
from vgpu.labels import LabelSelector, parse_selector
from vgpu.request_fields import as_list, as_map

NO_LABELS: Mapping[str, str] = MappingProxyType({})
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str],
                ns_labels: Mapping[str, str] = NO_LABELS) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` is selected; ``ns_labels`` are that
        namespace's labels (only a namespace selector reads them)."""
        if namespace not in self.namespaces:
            ns = self.namespace_selector
            if ns is None or not ns.matches(ns_labels):
                return False
        return self.selector is not None and self.selector.matches(labels)

    def resolve(self, namespaces: Iterable[tuple[str, Mapping[str, str]]]) -> AffinityTerm:
        """The term with its namespace selector turned into names (kube-scheduler does this
        for the incoming pod's terms, so that matching other pods needs no namespace
        labels); an empty selector stays, as it matches every namespace anyway."""
        ns = self.namespace_selector
        if ns is None or ns.empty:
            return self
        chosen = {name for name, labels in namespaces if ns.matches(labels)}
        return replace(self, namespaces=self.namespaces | chosen, namespace_selector=None)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """The pod-to-pod scheduling rules of ``spec.affinity``; None in PodInfo when it has
    none, so that the plugins' common case is one attribute check."""

    required: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred: tuple[WeightedTerm, ...] = ()
    preferred_anti: tuple[WeightedTerm, ...] = ()

    @property
    def uses_namespace_selector(self) -> bool:
        terms = (*self.required, *self.required_anti,
                 *(w.term for w in (*self.preferred, *self.preferred_anti)))
        return any(t.namespace_selector is not None for t in terms)

    @property
    def topology_keys(self) -> frozenset[str]:
        terms = (*self.required, *self.required_anti,
                 *(w.term for w in (*self.preferred, *self.preferred_anti)))
        return frozenset(t.topology_key for t in terms)


def _term(raw: Any, namespace: str, where: str) -> AffinityTerm:
    body = as_map(raw, where)
    names = as_list(body.get("namespaces"), f"{where}.namespaces")
    if not all(isinstance(n, str) for n in names):
        raise RequestError(f"{where}.namespaces must be a list of strings")
    topology_key = body.get("topologyKey") or ""
    if not isinstance(topology_key, str):
        raise RequestError(f"{where}.topologyKey must be a string")
    ns_selector = parse_selector(body.get("namespaceSelector"), f"{where}.namespaceSelector")
    if not names and ns_selector is None:
        names = [namespace]
    return AffinityTerm(parse_selector(body.get("labelSelector"), f"{where}.labelSelector"),
                        frozenset(names), ns_selector, topology_key)


def _weighted(raw: Any, namespace: str, where: str) -> WeightedTerm:
    body = as_map(raw, where)
    weight = body.get("weight")
    if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
        raise RequestError(f"{where}.weight {weight!r} must be an integer from 1 to 100")
    return WeightedTerm(weight, _term(body.get("podAffinityTerm"), namespace,
                                      f"{where}.podAffinityTerm"))


def _rules(affinity: Mapping[str, Any], field: str, namespace: str,
           ) -> tuple[tuple[AffinityTerm, ...], tuple[WeightedTerm, ...]]:
    where = f"spec.affinity.{field}"
    body = as_map(affinity.get(field), where)
    req, pref = f"{where}.{_REQUIRED}", f"{where}.{_PREFERRED}"
    return (tuple(_term(t, namespace, f"{req}[{i}]")
                  for i, t in enumerate(as_list(body.get(_REQUIRED), req))),
            tuple(_weighted(t, namespace, f"{pref}[{i}]")
                  for i, t in enumerate(as_list(body.get(_PREFERRED), pref))))


def parse_pod_affinity(pod: Mapping[str, Any], namespace: str) -> PodAffinity | None:
    """``spec.affinity.podAffinity`` and ``podAntiAffinity``; None when the pod has no
    term at all. Malformed terms raise :class:`RequestError` naming the field."""
    spec = as_map(pod.get("spec"), "pod spec")
    affinity = as_map(spec.get("affinity"), "spec.affinity")
    if affinity.get("podAffinity") is None and affinity.get("podAntiAffinity") is None:
        return None
    required, preferred = _rules(affinity, "podAffinity", namespace)
    required_anti, preferred_anti = _rules(affinity, "podAntiAffinity", namespace)
    if not (required or preferred or required_anti or preferred_anti):
        return None
    return PodAffinity(required, required_anti, preferred, preferred_anti)


def matches_all(terms: Iterable[AffinityTerm], namespace: str,
                labels: Mapping[str, str]) -> bool:
    """kube-scheduler's ``podMatchesAllAffinityTerms``: at least one term, all matching
    (terms already resolved, so no namespace labels are needed)."""
    found = False
    for term in terms:
        if not term.matches(namespace, labels):
            return False
        found = True
    return found
