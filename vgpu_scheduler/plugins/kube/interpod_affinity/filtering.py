"""InterPodAffinity's PreFilter state and Filter, as kube-scheduler's ``filtering.go``.

PreFilter counts, per topology pair (label key, value), the existing pods that match every
required affinity term of the incoming pod, those matching each of its required
anti-affinity terms, and the existing pods whose required anti-affinity terms match the
incoming pod. Filter then looks a node's label values up in those counts. A pod whose
affinity no existing pod satisfies may still go where it would satisfy its own terms: the
first pod of a group that wants to be together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.affinity import AffinityTerm, matches_all
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import SUCCESS, Status, unresolvable, unschedulable
from vgpu_scheduler.plugins.helper.pod_index import PodIndex

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
_AFFINITY = unresolvable(AFFINITY)
_ANTI = unschedulable(ANTI_AFFINITY)
_EXISTING = unschedulable(EXISTING_ANTI_AFFINITY)

Pair = tuple[str, str]
Counts = Mapping[Pair, int]


@dataclass(frozen=True)
class FilterState:
    """Never changed once written: the PreFilter extensions write a new one, so that the
    cycle state's clones stay independent."""

    namespace: str
    labels: Mapping[str, str]
    ns_labels: Mapping[str, str]
    #: The incoming pod's required terms, namespace selectors resolved to names.
    affinity: tuple[AffinityTerm, ...]
    anti: tuple[AffinityTerm, ...]
    #: The incoming pod matches all of its own affinity terms.
    self_match: bool
    affinity_counts: Counts
    anti_counts: Counts
    existing_counts: Counts

    @property
    def active(self) -> bool:
        return bool(self.affinity or self.anti or self.existing_counts)


def _add(counts: dict[Pair, int], key: str, value: str | None, amount: int) -> None:
    if value is None:
        return
    pair = (key, value)
    total = counts.get(pair, 0) + amount
    if total:
        counts[pair] = total
    else:
        counts.pop(pair, None)


def compute(index: PodIndex, pod: PodInfo, ns_labels: Mapping[str, str],
            affinity: tuple[AffinityTerm, ...], anti: tuple[AffinityTerm, ...]) -> FilterState:
    existing: dict[Pair, int] = {}
    for term, nodes in index.required_anti.items():
        if term.matches(pod.namespace, pod.labels, ns_labels):
            for pos, count in nodes.items():
                _add(existing, term.topology_key, index.labels(pos).get(term.topology_key),
                     count)
    affinity_counts: dict[Pair, int] = {}
    anti_counts: dict[Pair, int] = {}
    if affinity or anti:
        for group, nodes in index.groups.items():
            if matches_all(affinity, group.namespace, group.labels):
                for pos, count in nodes.items():
                    labels = index.labels(pos)
                    for term in affinity:
                        _add(affinity_counts, term.topology_key,
                             labels.get(term.topology_key), count)
            for term in anti:
                if term.matches(group.namespace, group.labels):
                    for pos, count in nodes.items():
                        _add(anti_counts, term.topology_key,
                             index.labels(pos).get(term.topology_key), count)
    return FilterState(pod.namespace, pod.labels, ns_labels, affinity, anti,
                       matches_all(affinity, pod.namespace, pod.labels),
                       affinity_counts, anti_counts, existing)


def with_pod(state: FilterState, other: PodInfo, node_labels: Mapping[str, str],
             sign: int) -> FilterState:
    """The state with ``other`` added to (``sign`` 1) or removed from (-1) a node with
    ``node_labels`` (kube-scheduler's ``updateWithPod``)."""
    existing = dict(state.existing_counts)
    aff = other.pod_affinity
    for term in aff.required_anti if aff is not None else ():
        if term.matches(state.namespace, state.labels, state.ns_labels):
            _add(existing, term.topology_key, node_labels.get(term.topology_key), sign)
    affinity_counts = dict(state.affinity_counts)
    if matches_all(state.affinity, other.namespace, other.labels):
        for term in state.affinity:
            _add(affinity_counts, term.topology_key, node_labels.get(term.topology_key), sign)
    anti_counts = dict(state.anti_counts)
    for term in state.anti:
        if term.matches(other.namespace, other.labels):
            _add(anti_counts, term.topology_key, node_labels.get(term.topology_key), sign)
    return replace(state, affinity_counts=affinity_counts, anti_counts=anti_counts,
                   existing_counts=existing)


def check(state: FilterState, labels: Mapping[str, str]) -> Status:
    """The Filter answer for a node with ``labels``."""
    if state.affinity:
        exist = True
        for term in state.affinity:
            value = labels.get(term.topology_key)
            if value is None:
                return _AFFINITY  # every topology key must be on the node
            if state.affinity_counts.get((term.topology_key, value), 0) <= 0:
                exist = False
        if not exist and (state.affinity_counts or not state.self_match):
            return _AFFINITY
    for term in state.anti:
        value = labels.get(term.topology_key)
        if value is not None and state.anti_counts.get((term.topology_key, value), 0) > 0:
            return _ANTI
    existing = state.existing_counts
    if existing:
        if len(existing) > len(labels):
            if any(existing.get(pair, 0) > 0 for pair in labels.items()):
                return _EXISTING
        elif any(n > 0 and labels.get(key) == value for (key, value), n in existing.items()):
            return _EXISTING
    return SUCCESS


def _codes(index: PodIndex, key: str, values: Iterable[str]) -> npt.NDArray[np.int32]:
    code_of = index.topology(key).code_of
    return np.fromiter((code_of[v] for v in values if v in code_of), dtype=np.int32)


def _pairs_by_key(counts: Counts) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for (key, value), n in counts.items():
        if n > 0:
            out.setdefault(key, []).append(value)
    return out


def mask(state: FilterState, index: PodIndex) -> npt.NDArray[np.bool_]:
    """The nodes :func:`check` accepts, for all snapshot positions at once."""
    ok = np.ones(len(index.nodes), dtype=np.bool_)
    if state.affinity:
        present = _pairs_by_key(state.affinity_counts)
        every = np.ones_like(ok)
        for term in state.affinity:
            codes = index.topology(term.topology_key).codes
            ok &= codes >= 0
            every &= np.isin(codes, _codes(index, term.topology_key,
                                           present.get(term.topology_key, ())))
        if state.affinity_counts or not state.self_match:
            ok &= every
    anti = _pairs_by_key(state.anti_counts)
    for key in {term.topology_key for term in state.anti}:
        ok &= ~np.isin(index.topology(key).codes, _codes(index, key, anti.get(key, ())))
    for key, values in _pairs_by_key(state.existing_counts).items():
        ok &= ~np.isin(index.topology(key).codes, _codes(index, key, values))
    return ok
