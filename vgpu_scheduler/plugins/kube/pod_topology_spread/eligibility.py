"""Which nodes a spread constraint counts: its node inclusion policies as masks over the
snapshot positions.

``nodeAffinityPolicy: Honor`` counts only nodes that match the pod's node selector and
required node affinity (NodeAffinity's matching,
:mod:`vgpu_scheduler.plugins.helper.node_affinity`); ``nodeTaintsPolicy: Honor`` only nodes
whose NoSchedule/NoExecute taints the pod tolerates (TaintToleration's,
:mod:`vgpu_scheduler.plugins.helper.taints`). The masks depend on node labels and taints
alone, so they are kept per pod shape until a node's labels or taints change (the index's
``static_version``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.spread import HONOR, SpreadConstraint
from vgpu_scheduler.plugins.helper.node_affinity import matches
from vgpu_scheduler.plugins.helper.pod_index import PodIndex
from vgpu_scheduler.plugins.helper.taints import untolerated

Mask = npt.NDArray[np.bool_]
_KEEP = 64


def affinity_ok(pod: PodInfo, node: NodeInfo) -> bool:
    static = node.static
    return matches(static.labels, static.name, pod.node_selector, pod.required_terms)


def taints_ok(pod: PodInfo, node: NodeInfo) -> bool:
    return not node.static.taints or untolerated(node.static.taints, pod.tolerations) is None


def node_ok(pod: PodInfo, node: NodeInfo) -> Mapping[str, bool]:
    """Per policy, whether ``node`` passes it for ``pod``."""
    return {"affinity": affinity_ok(pod, node), "taints": taints_ok(pod, node)}


class Eligibility:
    def __init__(self) -> None:
        self._masks: OrderedDict[tuple[Any, ...], Mask] = OrderedDict()

    def _cached(self, index: PodIndex, key: tuple[Any, ...], build: Any) -> Mask:
        full = (id(index), index.static_version, len(index.nodes), *key)
        found = self._masks.get(full)
        if found is None:
            found = self._masks[full] = build()
            while len(self._masks) > _KEEP:
                self._masks.popitem(last=False)
        else:
            self._masks.move_to_end(full)
        return found

    def has_keys(self, index: PodIndex, keys: Sequence[str]) -> Mask:
        """Nodes that have every one of ``keys``."""
        ok = np.array([n is not None for n in index.nodes], dtype=np.bool_) if not keys else (
            np.ones(len(index.nodes), dtype=np.bool_))
        for key in keys:
            ok &= index.topology(key).codes >= 0
        return ok

    def affinity(self, index: PodIndex, pod: PodInfo) -> Mask | None:
        """None: the pod has no node selector or required node affinity."""
        if not pod.node_selector and pod.required_terms is None:
            return None
        key = ("affinity", tuple(sorted(pod.node_selector.items())), pod.required_terms)
        return self._cached(index, key, lambda: np.array(
            [n is not None and affinity_ok(pod, n) for n in index.nodes], dtype=np.bool_))

    def taints(self, index: PodIndex, pod: PodInfo) -> Mask:
        return self._cached(index, ("taints", pod.tolerations), lambda: np.array(
            [n is not None and taints_ok(pod, n) for n in index.nodes], dtype=np.bool_))

    def include(self, index: PodIndex, pod: PodInfo, constraint: SpreadConstraint,
                base: Mask) -> Mask:
        """``base`` narrowed by the constraint's policies."""
        ok = base
        if constraint.node_affinity_policy == HONOR:
            affinity = self.affinity(index, pod)
            if affinity is not None:
                ok = ok & affinity
        if constraint.node_taints_policy == HONOR:
            ok = ok & self.taints(index, pod)
        return ok
