"""Filter: ``spec.nodeSelector`` and required node affinity; Score: preferred node affinity.

The matching of terms is kube's node affinity helper
(:mod:`vgpu_scheduler.plugins.helper.node_affinity`), which other plugins read too. A node's
score is the sum of the weights of the preferred terms it matches, scaled so the best
node gets 100 (kube-scheduler's NodeAffinity score).

Both are kept per node and per selector, computed again only for the nodes that changed
(:mod:`vgpu_scheduler.framework.row_memo`): PreFilter hands the framework the nodes the
selector accepts as a mask, and the candidates are scored at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.objects import SelectorTerm
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.row_memo import RowMemo, Rows, per_node
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable
from vgpu_scheduler.plugins.helper.node_affinity import matches, term_matches
from vgpu_scheduler.plugins.helper.normalize_score import (
    default_normalize,
    default_normalize_array,
)

REASON = "node affinity/selector mismatch"


def preferred_score(labels: Mapping[str, str], node_name: str,
                    terms: Sequence[tuple[int, SelectorTerm]]) -> int:
    """The sum of the weights of the preferred terms the node matches."""
    return sum(weight for weight, term in terms if term_matches(term, labels, node_name))


class NodeAffinity:
    name = "NodeAffinity"

    def __init__(self, handle: Handle) -> None:
        del handle
        self._derived = RowMemo(64)

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        if not pod.preferred_terms:
            # Known now: no candidate scores differently from another.
            state.skip_score.add(self.name)
        selector, required = pod.node_selector, pod.required_terms
        if not selector and required is None:
            return None, SKIP

        def accepted(rows: Rows) -> npt.NDArray[np.bool_]:
            return per_node(snapshot, rows, lambda n: matches(
                n.static.labels, n.name, selector, required), np.bool_, False)

        key = ("required", tuple(sorted(selector.items())), required)
        return PreFilterResult(mask=self._derived.get(key, snapshot, accepted)), SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if matches(node.static.labels, node.name, pod.node_selector, pod.required_terms):
            return SUCCESS
        return unresolvable(REASON)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> float:
        return float(preferred_score(node.static.labels, node.name, pod.preferred_terms))

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[float]) -> None:
        default_normalize(scores)

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        terms = pod.preferred_terms

        def weights(rows: Rows) -> npt.NDArray[np.int64]:
            return per_node(snapshot, rows, lambda n: preferred_score(
                n.static.labels, n.name, terms), np.int64, 0)

        raw = self._derived.get(("preferred", terms), snapshot, weights)
        return default_normalize_array(raw[positions])

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        return event.resource == "node" and (event.action == "add" or "labels" in event.changes)
