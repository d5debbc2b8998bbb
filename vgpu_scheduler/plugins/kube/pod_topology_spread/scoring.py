"""PodTopologySpread's PreScore and Score (``ScheduleAnyway``), as kube-scheduler's
``scoring.go``.

The domains of a constraint are the label values of the feasible nodes (a node lacking a
key is left out and scores 0, unless the constraints are the system defaults, which only
hostname needs); their counts are the matching pods on every node that passes the
constraint's inclusion policies. A node's raw score sums, per constraint,
``count × log(domains + 2) + maxSkew - 1`` (hostname counts the node's own pods), rounded;
NormalizeScore turns fewer matching pods into more points:
``100 × (max + min - score) / max``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.spread import HOSTNAME, SpreadConstraint
from vgpu_scheduler.plugins.helper.pod_index import PodIndex
from vgpu_scheduler.plugins.kube.pod_topology_spread.eligibility import Eligibility
from vgpu_scheduler.plugins.kube.pod_topology_spread.filtering import counted

MAX_NODE_SCORE = 100
#: kube-scheduler's ``invalidScore``: a node without the topology keys.
INVALID = -1.0


@dataclass(frozen=True)
class ScoreState:
    namespace: str
    #: The pod being scheduled: found nominated on a node, it does not count for itself.
    pod_id: str
    constraints: tuple[SpreadConstraint, ...]
    ignored: frozenset[str]
    #: Per constraint, matching pods per domain (hostname constraints count at Score).
    counts: tuple[Mapping[str, int], ...]
    weights: tuple[float, ...]


def _domains(constraints: tuple[SpreadConstraint, ...], feasible: Sequence[NodeInfo],
             require_all: bool) -> tuple[list[dict[str, int]], set[str]]:
    """Per constraint, the feasible nodes' values (at 0; hostname needs none); and the
    nodes to leave out for lacking a key."""
    keys = [c.topology_key for c in constraints]
    ignored: set[str] = set()
    domains: list[dict[str, int]] = [{} for _ in constraints]
    for node in feasible:
        labels = node.static.labels
        if require_all and any(k not in labels for k in keys):
            ignored.add(node.name)
            continue
        for i, c in enumerate(constraints):
            if c.topology_key != HOSTNAME:
                # Without require_all, a node lacking the key counts as the domain "".
                domains[i].setdefault(labels.get(c.topology_key, ""), 0)
    return domains, ignored


def _count(index: PodIndex, pod: PodInfo, constraint: SpreadConstraint,
           eligible: npt.NDArray[np.bool_], counts: dict[str, int]) -> None:
    sel = constraint.selector
    if sel is None:
        return
    key = constraint.topology_key
    for group, nodes in index.groups.items():
        if (group.namespace == pod.namespace and not group.terminating
                and sel.matches(group.labels)):
            for pos, count in nodes.items():
                value = index.labels(pos).get(key, "")
                if eligible[pos] and value in counts:
                    counts[value] += count
    found = index.node_pod(pod.pod_id)
    if found is not None and counted(constraint, pod.namespace, found[1].info):
        pos = index.where[pod.pod_id]
        value = index.labels(pos).get(key, "")
        if eligible[pos] and value in counts:
            counts[value] -= 1


def compute(index: PodIndex, pod: PodInfo, constraints: tuple[SpreadConstraint, ...], *,
            feasible: Sequence[NodeInfo], require_all: bool,
            eligibility: Eligibility) -> ScoreState:
    domains, ignored = _domains(constraints, feasible, require_all)
    weights = tuple(math.log((len(feasible) - len(ignored) if c.topology_key == HOSTNAME
                              else len(domains[i])) + 2)
                    for i, c in enumerate(constraints))
    base = eligibility.has_keys(index, [c.topology_key for c in constraints]
                                if require_all else [])
    for i, c in enumerate(constraints):
        if c.topology_key != HOSTNAME and domains[i]:
            _count(index, pod, c, eligibility.include(index, pod, c, base), domains[i])
    return ScoreState(pod.namespace, pod.pod_id, constraints, frozenset(ignored), tuple(domains),
                      weights)


def score(state: ScoreState, node: NodeInfo) -> float:
    if node.name in state.ignored:
        return INVALID
    labels = node.static.labels
    total = 0.0
    for i, c in enumerate(state.constraints):
        value = labels.get(c.topology_key)
        if value is None:
            continue
        if c.topology_key == HOSTNAME:
            count = sum(1 for key, p in node.pods.items()
                        if key != state.pod_id and counted(c, state.namespace, p.info))
        else:
            count = state.counts[i].get(value, 0)
        total += count * state.weights[i] + (c.max_skew - 1)
    # Go's math.Round: halves away from zero (the total is never negative).
    return float(math.floor(total + 0.5))


def normalize(values: list[float]) -> None:
    valid = [int(v) for v in values if v != INVALID]
    low = min(valid, default=0)
    high = max([0, *valid])
    for i, value in enumerate(values):
        if value == INVALID:
            values[i] = 0.0
        elif high == 0:
            values[i] = float(MAX_NODE_SCORE)
        else:
            values[i] = float(MAX_NODE_SCORE * (high + low - int(value)) // high)


def matching(index: PodIndex, pod: PodInfo,
             constraint: SpreadConstraint) -> npt.NDArray[np.int64]:
    """Per position, the pods the constraint counts (the pod itself, found nominated on a
    node, left out)."""
    found = np.zeros(len(index.nodes), dtype=np.int64)
    if constraint.selector is None:
        return found
    for group, nodes in index.groups.items():
        if (group.namespace == pod.namespace and not group.terminating
                and constraint.selects(group.labels)):
            found[np.fromiter(nodes.keys(), np.int64, len(nodes))] += np.fromiter(
                nodes.values(), np.int64, len(nodes))
    me = index.node_pod(pod.pod_id)
    if me is not None and counted(constraint, pod.namespace, me[1].info):
        found[index.where[pod.pod_id]] -= 1
    return found


def _domain_codes(index: PodIndex, key: str, require_all: bool) -> npt.NDArray[np.int64]:
    """Per position, the code of the node's value of ``key``; without ``require_all`` a
    node lacking the key is in the domain "" (its code, or one past the last)."""
    topology = index.topology(key)
    codes = topology.codes.astype(np.int64)
    if not require_all:
        codes[codes < 0] = topology.code_of.get("", len(topology.values))
    return codes


def score_array(index: PodIndex, pod: PodInfo, constraints: tuple[SpreadConstraint, ...],
                positions: npt.NDArray[np.int64], *, require_all: bool,
                eligibility: Eligibility,
                counted_pods: Sequence[npt.NDArray[np.int64]]) -> npt.NDArray[np.float64]:
    """:func:`compute`, :func:`score` and :func:`normalize` of the candidates at
    ``positions`` at once, the same float operations in the same order;
    ``counted_pods`` is :func:`matching` of each constraint."""
    labelled = [index.topology(c.topology_key).codes[positions] >= 0 for c in constraints]
    ignored = np.zeros(len(positions), dtype=np.bool_)
    if require_all:
        for has in labelled:
            ignored |= ~has
    kept = ~ignored
    base = eligibility.has_keys(index, [c.topology_key for c in constraints]
                                if require_all else [])
    raw = np.zeros(len(positions), dtype=np.float64)
    for c, has, pods in zip(constraints, labelled, counted_pods, strict=True):
        if c.topology_key == HOSTNAME:
            weight = math.log(int(kept.sum()) + 2)
            count = pods[positions]
        else:
            codes = _domain_codes(index, c.topology_key, require_all)
            domains = np.unique(codes[positions][kept])
            weight = math.log(len(domains) + 2)
            in_domain = np.zeros(int(codes.max(initial=0)) + 2, dtype=np.bool_)
            in_domain[domains] = True
            counting = eligibility.include(index, pod, c, base) & in_domain[codes]
            per_domain = np.bincount(codes[counting], weights=pods[counting],
                                     minlength=len(in_domain))
            count = per_domain[codes[positions]]
        raw += np.where(has, count * weight + (c.max_skew - 1), 0.0)
    raw = np.floor(raw + 0.5)
    raw[ignored] = INVALID
    return normalize_array(raw, ignored)


def normalize_array(raw: npt.NDArray[np.float64],
                    ignored: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """:func:`normalize` of many nodes' scores at once."""
    valid = raw[~ignored].astype(np.int64)
    low = int(valid.min()) if len(valid) else 0
    high = max(int(valid.max()), 0) if len(valid) else 0
    if high == 0:
        out = np.full(len(raw), float(MAX_NODE_SCORE))
    else:
        out = (MAX_NODE_SCORE * (high + low - raw.astype(np.int64)) // high).astype(np.float64)
    out[ignored] = 0.0
    return out
