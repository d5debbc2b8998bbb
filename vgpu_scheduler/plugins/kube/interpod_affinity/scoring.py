"""InterPodAffinity's PreScore and Score, as kube-scheduler's ``scoring.go``.

A node's score is the sum, over the topology pairs it has, of: the weights of the
incoming pod's preferred affinity terms per existing pod matching them (minus those of its
preferred anti-affinity terms), and, symmetrically, the weights of existing pods' preferred
affinity terms the incoming pod matches (minus their anti-affinity), plus
``hardPodAffinityWeight`` per existing pod whose required affinity the incoming pod
matches. NormalizeScore scales the sums min-max to 0..100, truncating as kube does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.affinity import WeightedTerm
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.plugins.helper.pod_index import Counts, PodIndex

MAX_NODE_SCORE = 100

Scores = dict[str, npt.NDArray[np.int64]]
"""Topology key → score per label value, by the code the index's topology gives the value
(a key is present once any term counted for it, as kube's map of topology pairs)."""


class _Tally:
    """The sums, added a term's whole table of nodes at a time."""

    def __init__(self, index: PodIndex) -> None:
        self.index = index
        self.scores: Scores = {}

    def _table(self, key: str) -> npt.NDArray[np.int64]:
        table = self.scores.get(key)
        if table is None:
            table = self.scores[key] = np.zeros(len(self.index.topology(key).values),
                                                dtype=np.int64)
        return table

    def nodes(self, nodes: Counts, key: str, amount: int) -> None:
        codes = self.index.topology(key).codes[np.fromiter(nodes.keys(), np.int64,
                                                           len(nodes))]
        counts = np.fromiter(nodes.values(), np.int64, len(nodes))
        labelled = codes >= 0
        if labelled.any():
            np.add.at(self._table(key), codes[labelled], amount * counts[labelled])

    def one(self, key: str, labels: Mapping[str, str], amount: int) -> None:
        value = labels.get(key)
        code = -1 if value is None else self.index.topology(key).code_of.get(value, -1)
        if code >= 0:
            self._table(key)[code] += amount


def compute(index: PodIndex, pod: PodInfo, ns_labels: Mapping[str, str], *,
            preferred: Sequence[WeightedTerm], preferred_anti: Sequence[WeightedTerm],
            hard_weight: int) -> Scores:
    """The score per topology pair, from every pod of the index. ``preferred`` and
    ``preferred_anti`` are the incoming pod's terms with namespace selectors resolved."""
    tally = _Tally(index)
    for sign, terms in ((1, preferred), (-1, preferred_anti)):
        for weighted in terms:
            term = weighted.term
            for group, nodes in index.groups.items():
                if term.matches(group.namespace, group.labels):
                    tally.nodes(nodes, term.topology_key, sign * weighted.weight)
    if hard_weight > 0:
        for term, nodes in index.required.items():
            if term.matches(pod.namespace, pod.labels, ns_labels):
                tally.nodes(nodes, term.topology_key, hard_weight)
    for sign, table in ((1, index.preferred), (-1, index.preferred_anti)):
        for weighted, nodes in table.items():
            if weighted.term.matches(pod.namespace, pod.labels, ns_labels):
                tally.nodes(nodes, weighted.term.topology_key, sign * weighted.weight)
    return tally.scores


def without(scores: Scores, index: PodIndex, pod: PodInfo, ns_labels: Mapping[str, str], *,
            other: PodInfo, node_labels: Mapping[str, str],
            preferred: Sequence[WeightedTerm], preferred_anti: Sequence[WeightedTerm],
            hard_weight: int) -> None:
    """Take back what ``other`` (the incoming pod itself, found nominated on a node)
    contributed to ``scores``: kube-scheduler's snapshot never holds the pod it
    schedules."""
    tally = _Tally(index)
    tally.scores = scores
    for sign, terms in ((-1, preferred), (1, preferred_anti)):
        for weighted in terms:
            if weighted.term.matches(other.namespace, other.labels):
                tally.one(weighted.term.topology_key, node_labels, sign * weighted.weight)
    aff = other.pod_affinity
    if aff is None:
        return
    if hard_weight > 0:
        for term in aff.required:
            if term.matches(pod.namespace, pod.labels, ns_labels):
                tally.one(term.topology_key, node_labels, -hard_weight)
    for sign, weighted_terms in ((-1, aff.preferred), (1, aff.preferred_anti)):
        for weighted in weighted_terms:
            if weighted.term.matches(pod.namespace, pod.labels, ns_labels):
                tally.one(weighted.term.topology_key, node_labels, sign * weighted.weight)


def score(scores: Scores, index: PodIndex, labels: Mapping[str, str]) -> int:
    total = 0
    for key, table in scores.items():
        value = labels.get(key)
        code = None if value is None else index.topology(key).code_of.get(value)
        if code is not None and code < len(table):
            total += int(table[code])
    return total


def normalize(values: list[float]) -> None:
    """Min-max to 0..100, truncated toward zero; all equal gives all 0. The share is taken
    before it is scaled, as kube-scheduler's float64 arithmetic does (29 of 100 is 28)."""
    if not values:
        return
    low, high = min(values), max(values)
    span = high - low
    for i, value in enumerate(values):
        values[i] = float(int(MAX_NODE_SCORE * ((value - low) / span))) if span > 0 else 0.0


def normalize_array(raw: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """:func:`normalize` of many nodes' scores at once."""
    if not len(raw):
        return np.zeros(0)
    low, high = int(raw.min()), int(raw.max())
    if high == low:
        return np.zeros(len(raw))
    share = (raw - low).astype(np.float64) / float(high - low)
    return np.trunc(float(MAX_NODE_SCORE) * share)


def score_array(scores: Scores, index: PodIndex,
                positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """:func:`score` of the nodes at ``positions`` at once, through the index's label
    codes."""
    raw = np.zeros(len(positions), dtype=np.int64)
    for key, table in scores.items():
        # One slot more, for code -1 (no such label): 0.
        padded = np.zeros(len(table) + 1, dtype=np.int64)
        padded[:len(table)] = table
        raw += padded[index.topology(key).codes[positions]]
    return raw
