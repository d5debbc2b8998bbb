"""The pods of the snapshot, indexed for the plugins that count pods across nodes.

InterPodAffinity and PodTopologySpread ask, every cycle, "how many pods matching this
selector are in each topology domain" and "which existing pods' terms match this pod".
Scanning every pod of every node for that is thousands of selector matches per decision.
Instead, pods are grouped by what matching reads (namespace, labels, terminating), and
existing pods' affinity terms by term, each with the nodes (snapshot positions) they are
on and how many: a selector is matched once per distinct group, then only the nodes that
hold that group are visited. Node label values are kept per topology key as integer codes
per position, so that masks over all nodes are numpy operations.

The index follows the snapshot incrementally: a column holds each position's NodeInfo
identity, and only the positions whose NodeInfo changed since the last refresh are
re-read (and of those, only the pods that changed). One index is shared per snapshot.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.affinity import AffinityTerm, WeightedTerm
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.snapshot import Column, Snapshot

#: A column the plugins that use the index register: each position's NodeInfo identity.
NODE_ID = "node.identity"
COLUMNS = (Column(NODE_ID, np.int64, id, 0),)

Counts = dict[int, int]
"""Pods per snapshot position."""


@dataclass(frozen=True, slots=True)
class LabelGroup:
    """What selector matching reads of a pod; pods alike share one group."""

    namespace: str
    items: frozenset[tuple[str, str]]
    terminating: bool
    labels: Mapping[str, str] = field(compare=False, hash=False)


class Topology:
    """The values of one node label key as codes per snapshot position (-1: no label)."""

    def __init__(self, key: str, size: int) -> None:
        self.key = key
        self.codes: npt.NDArray[np.int32] = np.full(size, -1, dtype=np.int32)
        self.values: list[str] = []
        self.code_of: dict[str, int] = {}

    def set(self, pos: int, labels: Mapping[str, str] | None) -> None:
        value = None if labels is None else labels.get(self.key)
        if value is None:
            self.codes[pos] = -1
            return
        code = self.code_of.get(value)
        if code is None:
            code = self.code_of[value] = len(self.values)
            self.values.append(value)
        self.codes[pos] = code

    def grow(self, size: int) -> None:
        if size > len(self.codes):
            self.codes = np.concatenate(
                (self.codes, np.full(size - len(self.codes), -1, dtype=np.int32)))


def _bump(table: dict[Any, Counts], key: Any, pos: int, sign: int) -> None:
    nodes = table.get(key)
    if nodes is None:
        nodes = table[key] = {}
    count = nodes.get(pos, 0) + sign
    if count > 0:
        nodes[pos] = count
    else:
        nodes.pop(pos, None)
        if not nodes:
            del table[key]


class PodIndex:
    def __init__(self) -> None:
        self.generation = -1
        self.nodes: list[NodeInfo | None] = []
        self._ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.groups: dict[LabelGroup, Counts] = {}
        #: Existing pods' terms, by kind of term.
        self.required: dict[AffinityTerm, Counts] = {}
        self.required_anti: dict[AffinityTerm, Counts] = {}
        self.preferred: dict[WeightedTerm, Counts] = {}
        self.preferred_anti: dict[WeightedTerm, Counts] = {}
        #: Where each pod is, by uid (a nominated pod is found where it holds room).
        self.where: dict[str, int] = {}
        #: Bumped whenever a node's labels or taints, or the node set, change.
        self.static_version = 0
        self._topologies: dict[str, Topology] = {}

    # -- reading ---------------------------------------------------------------------------

    def labels(self, pos: int) -> Mapping[str, str]:
        node = self.nodes[pos]
        return node.static.labels if node is not None else {}

    def topology(self, key: str) -> Topology:
        found = self._topologies.get(key)
        if found is None:
            found = self._topologies[key] = Topology(key, len(self.nodes))
            for pos, node in enumerate(self.nodes):
                if node is not None:
                    found.set(pos, node.static.labels)
        return found

    def matching(self, namespace: str | None, selector_matches: Any) -> Iterator[Counts]:
        """The per-node counts of every group ``selector_matches(group)`` accepts (only
        groups of ``namespace`` when given)."""
        for group, nodes in self.groups.items():
            if (namespace is None or group.namespace == namespace) and selector_matches(group):
                yield nodes

    def node_pod(self, uid: str) -> tuple[NodeInfo, NodePod] | None:
        """The node a pod (by ``PodInfo.pod_id``) is counted on, and its entry there."""
        pos = self.where.get(uid)
        node = None if pos is None else self.nodes[pos]
        pod = None if node is None else node.pods.get(uid)
        return None if node is None or pod is None else (node, pod)

    # -- following the snapshot ------------------------------------------------------------

    def refresh(self, snapshot: Snapshot) -> PodIndex:
        if snapshot.generation == self.generation:
            return self
        size = len(snapshot.nodes)
        if NODE_ID in snapshot.columns:
            ids = snapshot.column(NODE_ID)
        else:  # a profile without the column: compare identities the slow way
            ids = np.fromiter((id(n) if n is not None else 0 for n in snapshot.nodes),
                              dtype=np.int64, count=size)
        if size > len(self.nodes):
            self.nodes.extend([None] * (size - len(self.nodes)))
            self._ids = np.concatenate((self._ids, np.zeros(size - len(self._ids), np.int64)))
            for topology in self._topologies.values():
                topology.grow(size)
        for pos in np.flatnonzero(ids != self._ids[:size]).tolist():
            self._update(pos, snapshot.nodes[pos])
        self._ids[:size] = ids
        self.generation = snapshot.generation
        return self

    def _update(self, pos: int, new: NodeInfo | None) -> None:
        old = self.nodes[pos]
        if old is not None and (new is None or new.name != old.name):
            self._apply(pos, old.pods.values(), -1)
            old = None
        if new is None:
            self._relabel(pos, None)
            self.nodes[pos] = None
            return
        if old is None:
            self._apply(pos, new.pods.values(), +1)
        elif old.pods is not new.pods:
            before, after = old.pods, new.pods
            # Unchanged pods keep their NodePod object from one NodeInfo to the next.
            self._apply(pos, [p for k, p in before.items() if after.get(k) is not p], -1)
            self._apply(pos, [p for k, p in after.items() if before.get(k) is not p], +1)
        if old is None or old.static.labels != new.static.labels or (
                old.static.taints != new.static.taints):
            self._relabel(pos, new.static.labels)
        self.nodes[pos] = new

    def _relabel(self, pos: int, labels: Mapping[str, str] | None) -> None:
        self.static_version += 1
        for topology in self._topologies.values():
            topology.set(pos, labels)

    def _apply(self, pos: int, pods: Iterable[NodePod], sign: int) -> None:
        for pod in pods:
            info = pod.info
            labels = info.labels
            _bump(self.groups, LabelGroup(info.namespace, frozenset(labels.items()),
                                          info.terminating, labels), pos, sign)
            if sign > 0:
                self.where[info.pod_id] = pos
            elif self.where.get(info.pod_id) == pos:
                del self.where[info.pod_id]
            aff = info.pod_affinity
            if aff is None:
                continue
            for term in aff.required:
                _bump(self.required, term, pos, sign)
            for term in aff.required_anti:
                _bump(self.required_anti, term, pos, sign)
            for weighted in aff.preferred:
                _bump(self.preferred, weighted, pos, sign)
            for weighted in aff.preferred_anti:
                _bump(self.preferred_anti, weighted, pos, sign)


_INDEXES: weakref.WeakKeyDictionary[Snapshot, PodIndex] = weakref.WeakKeyDictionary()


def index_of(snapshot: Snapshot) -> PodIndex:
    """The snapshot's index, brought up to date with it."""
    index = _INDEXES.get(snapshot)
    if index is None:
        index = _INDEXES[snapshot] = PodIndex()
    return index.refresh(snapshot)
