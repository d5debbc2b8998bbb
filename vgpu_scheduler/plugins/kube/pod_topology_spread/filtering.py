"""PodTopologySpread's PreFilter state and Filter (``DoNotSchedule``), as
kube-scheduler's ``filtering.go``.

For each hard constraint: the eligible nodes are those with every constraint's topology
key that pass the constraint's node inclusion policies (the pod's node affinity when
``nodeAffinityPolicy`` is Honor, its tolerations of NoSchedule/NoExecute taints when
``nodeTaintsPolicy`` is Honor); their label values are the domains; a domain's count is
the matching pods (same namespace, not terminating) on its eligible nodes. A node passes
when ``count(domain) + (1 if the pod matches itself) - global minimum <= maxSkew``, the
global minimum being 0 while fewer domains than ``minDomains`` exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.spread import HONOR, SpreadConstraint
from vgpu_scheduler.framework.status import SUCCESS, Status, unresolvable, unschedulable
from vgpu_scheduler.plugins.helper.pod_index import PodIndex
from vgpu_scheduler.plugins.kube.pod_topology_spread.eligibility import Eligibility

NOT_MATCH = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = NOT_MATCH + " (missing required label)"
_NOT_MATCH = unschedulable(NOT_MATCH)
_MISSING_LABEL = unresolvable(MISSING_LABEL)
#: kube-scheduler's minimum when no domain is eligible: nothing is ever too skewed.
NO_DOMAIN = 2**31 - 1


@dataclass(frozen=True)
class Hard:
    """One constraint's counts, by the code its topology assigns each value."""

    constraint: SpreadConstraint
    self_match: bool
    code_of: Mapping[str, int]
    counts: npt.NDArray[np.int64]
    #: The values of eligible nodes: the domains.
    domains: npt.NDArray[np.bool_]
    #: The global minimum the skew is measured from.
    minimum: int

    def count(self, value: str) -> int:
        code = self.code_of.get(value)
        return int(self.counts[code]) if code is not None and code < len(self.counts) else 0


def _hard(constraint: SpreadConstraint, self_match: bool, code_of: Mapping[str, int],
          counts: npt.NDArray[np.int64], domains: npt.NDArray[np.bool_]) -> Hard:
    found = int(domains.sum())
    if found < constraint.min_domains:
        minimum = 0
    else:
        minimum = int(counts[domains].min()) if found else NO_DOMAIN
    return Hard(constraint, self_match, code_of, counts, domains, minimum)


@dataclass(frozen=True)
class FilterState:
    """Never changed once written (the PreFilter extensions write a new one)."""

    namespace: str
    hard: tuple[Hard, ...]


def counted(constraint: SpreadConstraint, namespace: str, other: PodInfo) -> bool:
    """Whether a pod counts in the constraint's domains (kube-scheduler's
    ``countPodsMatchSelector``): same namespace, not terminating, selected. A missing
    selector selects no pod and an empty one (``{}``) every pod, as
    ``LabelSelectorAsSelector`` reads them (see docs/scheduler.md#known-differences)."""
    return (other.namespace == namespace and not other.terminating
            and constraint.selects(other.labels))


def compute(index: PodIndex, pod: PodInfo, constraints: Sequence[SpreadConstraint],
            eligibility: Eligibility) -> FilterState:
    all_keys = eligibility.has_keys(index, [c.topology_key for c in constraints])
    hard = []
    for constraint in constraints:
        topology = index.topology(constraint.topology_key)
        eligible = eligibility.include(index, pod, constraint, all_keys)
        size = len(topology.values)
        domains = np.zeros(size, dtype=np.bool_)
        domains[topology.codes[eligible]] = True
        counts = np.zeros(size, dtype=np.int64)
        sel = constraint.selector
        if sel is not None:
            for group, nodes in index.groups.items():
                if (group.namespace == pod.namespace and not group.terminating
                        and sel.matches(group.labels)):
                    for pos, count in nodes.items():
                        if eligible[pos]:
                            counts[topology.codes[pos]] += count
        hard.append(_hard(constraint, constraint.selects(pod.labels), topology.code_of,
                          counts, domains))
    return FilterState(pod.namespace, tuple(hard))


def check(state: FilterState, labels: Mapping[str, str]) -> Status:
    for h in state.hard:
        value = labels.get(h.constraint.topology_key)
        if value is None:
            return _MISSING_LABEL
        if h.count(value) + h.self_match - h.minimum > h.constraint.max_skew:
            return _NOT_MATCH
    return SUCCESS


def mask(state: FilterState, index: PodIndex) -> npt.NDArray[np.bool_]:
    """The nodes :func:`check` accepts, for all snapshot positions at once."""
    ok = np.ones(len(index.nodes), dtype=np.bool_)
    for h in state.hard:
        codes = index.topology(h.constraint.topology_key).codes
        known = (codes >= 0) & (codes < len(h.counts))
        # One more slot, at 0, for nodes whose value is no domain.
        counts = np.append(h.counts, 0)[np.where(known, codes, len(h.counts))]
        ok &= (codes >= 0) & (counts + h.self_match - h.minimum <= h.constraint.max_skew)
    return ok


def with_pod(state: FilterState, other: PodInfo, node_labels: Mapping[str, str], *,
             node_ok: Mapping[str, bool], sign: int) -> FilterState:
    """The state with ``other`` added to (``sign`` 1) or removed from (-1) a node with
    ``node_labels``; ``node_ok`` says, per policy, whether the node passes it for ``pod``
    (kube-scheduler's ``updateWithPod``)."""
    if other.namespace != state.namespace:
        return state
    if any(h.constraint.topology_key not in node_labels for h in state.hard):
        return state
    hard = []
    for old in state.hard:
        c = old.constraint
        code = old.code_of.get(node_labels[c.topology_key])
        # A value unknown at PreFilter cannot come up: preemption tries snapshot nodes.
        if (c.selects(other.labels) and code is not None and code < len(old.counts)
                and (c.node_affinity_policy != HONOR or node_ok["affinity"])
                and (c.node_taints_policy != HONOR or node_ok["taints"])):
            counts = old.counts.copy()
            counts[code] += sign
            hard.append(_hard(c, old.self_match, old.code_of, counts, old.domains))
        else:
            hard.append(old)
    return replace(state, hard=tuple(hard))
