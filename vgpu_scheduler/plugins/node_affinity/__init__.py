"""Filter: ``spec.nodeSelector`` and required node affinity; Score: preferred node affinity.

Terms are ORed, the requirements of a term ANDed; operators In, NotIn, Exists,
DoesNotExist, Gt, Lt on labels, and In/NotIn on the ``metadata.name`` field. A node's
score is the sum of the weights of the preferred terms it matches, scaled so the best
node gets 100 (kube-scheduler's NodeAffinity score).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.objects import Requirement, SelectorTerm
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable
from vgpu_scheduler.plugins.helper.normalize_score import default_normalize

REASON = "node affinity/selector mismatch"


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def requirement_matches(req: Requirement, value: str | None) -> bool:
    """``value`` is the label's value, None when the node lacks the label."""
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    have, want = _int(value), _int(req.values[0] if req.values else None)
    if have is None or want is None:
        return False
    return have > want if op == "Gt" else have < want


def term_matches(term: SelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    if not term.expressions and not term.fields:
        return False  # an empty term selects nothing, as in Kubernetes
    for req in term.expressions:
        if not requirement_matches(req, labels.get(req.key)):
            return False
    for req in term.fields:
        value = node_name if req.key == "metadata.name" else None
        if not requirement_matches(req, value):
            return False
    return True


def matches(labels: Mapping[str, str], node_name: str, node_selector: Mapping[str, str],
            terms: Sequence[SelectorTerm] | None) -> bool:
    for key, value in node_selector.items():
        if labels.get(key) != value:
            return False
    if terms is None:
        return True
    return any(term_matches(t, labels, node_name) for t in terms)


def preferred_score(labels: Mapping[str, str], node_name: str,
                    terms: Sequence[tuple[int, SelectorTerm]]) -> int:
    """The sum of the weights of the preferred terms the node matches."""
    return sum(weight for weight, term in terms if term_matches(term, labels, node_name))


class NodeAffinity:
    name = "NodeAffinity"

    def __init__(self, handle: Handle) -> None:
        del handle

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        if not pod.preferred_terms:
            # Known now, so the framework can still take the first feasible node when
            # no other score compares nodes.
            state.skip_score.add(self.name)
        if not pod.node_selector and pod.required_terms is None:
            return None, SKIP
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if matches(node.static.labels, node.name, pod.node_selector, pod.required_terms):
            return SUCCESS
        return unresolvable(REASON)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        return float(preferred_score(node.static.labels, node.name, pod.preferred_terms))

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[float]) -> None:
        default_normalize(scores)

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        return event.resource == "node" and (event.action == "add" or "labels" in event.changes)
