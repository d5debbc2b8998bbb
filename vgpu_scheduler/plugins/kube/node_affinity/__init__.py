"""Filter: ``spec.nodeSelector`` and required node affinity; Score: preferred node affinity.

The matching of terms is kube's node affinity helper
(:mod:`vgpu_scheduler.plugins.helper.node_affinity`), which other plugins read too. A node's
score is the sum of the weights of the preferred terms it matches, scaled so the best
node gets 100 (kube-scheduler's NodeAffinity score).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.objects import SelectorTerm
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable
from vgpu_scheduler.plugins.helper.node_affinity import matches, term_matches
from vgpu_scheduler.plugins.helper.normalize_score import default_normalize

REASON = "node affinity/selector mismatch"


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
