"""Which taint keeps a pod off a node (kube's ``v1helper.FindMatchingUntoleratedTaint``
with the NoSchedule and NoExecute effects): what TaintToleration filters on and which nodes
PodTopologySpread counts when ``nodeTaintsPolicy`` is Honor."""

from __future__ import annotations

from collections.abc import Sequence

from vgpu_scheduler.framework.objects import PREFER_NO_SCHEDULE, Taint, Toleration


def untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first taint that keeps the pod off the node, or None."""
    for taint in taints:
        if taint.effect == PREFER_NO_SCHEDULE:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None
