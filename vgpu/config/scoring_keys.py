"""How the scheduler section's scoring keys read together: the deprecated ``nodesToScore``
as ``percentageOfNodesToScore``, and what the scheduler warns about at start (a deprecated
key, a GPU placement score weighed above a soft rule pods state)."""

from __future__ import annotations

from typing import Protocol

#: Score plugins that rank GPU placements, and those that weigh what a pod states it
#: prefers (its tolerations, preferred node and pod affinity, ScheduleAnyway spread).
GPU_PLACEMENT_SCORES = ("VGPU", "FragmentationAware")
SOFT_RULE_SCORES = ("TaintToleration", "NodeAffinity", "PodTopologySpread", "InterPodAffinity")


class Section(Protocol):
    """What is read of the scheduler section (``SchedulerConfig``)."""

    @property
    def nodes_to_score(self) -> int: ...

    @property
    def percentage_of_nodes_to_score(self) -> int: ...

    @property
    def plugins(self) -> tuple[str, ...]: ...

    def weights(self) -> dict[str, int]: ...


def percentage_to_score(section: Section) -> int:
    """``percentageOfNodesToScore``, or the deprecated ``nodesToScore`` read as one: 0
    (every feasible node) as 100, a count as 0 (adaptive, which finds at least 100)."""
    if section.nodes_to_score == 0:
        return 100
    return section.percentage_of_nodes_to_score


def warnings(section: Section) -> list[str]:
    """Deprecated keys and how they were read, and a GPU placement score weighed above a
    soft rule (it could then outvote what pods prefer wholesale: never by default)."""
    out = []
    if section.nodes_to_score >= 0:
        out.append(f"scheduler.nodesToScore: {section.nodes_to_score} is deprecated and read "
                   f"as percentageOfNodesToScore: {percentage_to_score(section)} "
                   f"(kube-scheduler's count of feasible nodes to score, from a start that "
                   f"moves every cycle); set percentageOfNodesToScore instead")
    weights = section.weights()
    for gpu in GPU_PLACEMENT_SCORES:
        if gpu not in section.plugins:
            continue
        above = [f"{soft}={weights.get(soft, 1)}" for soft in SOFT_RULE_SCORES
                 if soft in section.plugins and weights.get(gpu, 1) > weights.get(soft, 1)]
        if above:
            out.append(f"scheduler.scoreWeights: {gpu}={weights.get(gpu, 1)} weighs the GPU "
                       f"placement policy above {', '.join(above)}: it can outvote what pods "
                       f"prefer there")
    return out
