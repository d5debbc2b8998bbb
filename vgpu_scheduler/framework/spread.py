"""Topology spread constraints, parsed once per pod version (``PodInfo.spread``).

As kube-scheduler builds them: a missing ``minDomains`` is 1, ``nodeAffinityPolicy``
defaults to Honor and ``nodeTaintsPolicy`` to Ignore, and the keys of ``matchLabelKeys``
the pod has are ANDed into the label selector with the pod's values (a missing selector
stays one that selects nothing). Default constraints come from the scheduler's config and
get their selector per pod (:mod:`vgpu_scheduler.plugins.kube.pod_topology_spread.defaults`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.errors import RequestError
from vgpu.labels import LabelRequirement, LabelSelector, parse_selector, valid_key
from vgpu.request_fields import as_list, as_map

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
WHEN_UNSATISFIABLE = (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)
HONOR = "Honor"
IGNORE = "Ignore"
POLICIES = (HONOR, IGNORE)
#: The node label kube-scheduler counts per node at Score rather than per domain.
HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    #: None selects no pod (a constraint written without a labelSelector).
    selector: LabelSelector | None
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    def selects(self, labels: Mapping[str, str]) -> bool:
        return self.selector is not None and self.selector.matches(labels)


def _int(body: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestError(f"{where}.{key} {value!r} must be an integer of at least 1")
    return value


def _choice(body: Mapping[str, Any], key: str, where: str, choices: tuple[str, ...],
            default: str | None = None) -> str:
    value = body.get(key, default)
    if value not in choices:
        raise RequestError(f"{where}.{key} {value!r} is not one of {', '.join(choices)}")
    return str(value)


def with_match_label_keys(selector: LabelSelector | None, keys: Any, labels: Mapping[str, str],
                          where: str) -> LabelSelector | None:
    """kube-scheduler's merge of ``matchLabelKeys``: the pod's value of each key it has
    becomes one more requirement; keys it lacks are ignored."""
    keys = as_list(keys, where)
    for key in keys:
        if not isinstance(key, str) or not valid_key(key):
            raise RequestError(f"{where}: {key!r} is not a label key")
    if selector is None:
        return None
    extra = tuple(LabelRequirement(k, "In", frozenset({labels[k]})) for k in keys if k in labels)
    return LabelSelector(extra + selector.requirements) if extra else selector


def parse_constraint(raw: Any, labels: Mapping[str, str], where: str) -> SpreadConstraint:
    body = as_map(raw, where)
    key = body.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise RequestError(f"{where}.topologyKey must be a non-empty string")
    selector = parse_selector(body.get("labelSelector"), f"{where}.labelSelector")
    selector = with_match_label_keys(selector, body.get("matchLabelKeys"), labels,
                                     f"{where}.matchLabelKeys")
    min_domains = body.get("minDomains")
    return SpreadConstraint(
        max_skew=_int(body, "maxSkew", where),
        topology_key=key,
        when_unsatisfiable=_choice(body, "whenUnsatisfiable", where, WHEN_UNSATISFIABLE),
        selector=selector,
        min_domains=1 if min_domains is None else _int(body, "minDomains", where),
        node_affinity_policy=_choice(body, "nodeAffinityPolicy", where, POLICIES, HONOR),
        node_taints_policy=_choice(body, "nodeTaintsPolicy", where, POLICIES, IGNORE),
    )


def parse_constraints(pod: Mapping[str, Any],
                      labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    """``spec.topologySpreadConstraints``; malformed entries raise :class:`RequestError`."""
    spec = as_map(pod.get("spec"), "pod spec")
    where = "spec.topologySpreadConstraints"
    return tuple(parse_constraint(raw, labels, f"{where}[{i}]")
                 for i, raw in enumerate(as_list(spec.get("topologySpreadConstraints"), where)))
