"""The vGPU plugin's GPU rankings: a GPU policy by name (built in, or a plugin's), or HAMi's
sort of the node's GPU list for a pod whose GPU policy is HAMi's
(:mod:`vgpu_scheduler.placement.hami_rank`), made anew for each placement on a node."""

from __future__ import annotations

from collections.abc import Callable

from vgpu.annotations import PodChoices
from vgpu.hami_fields import BINPACK, SPREAD, parse_gpu_policy
from vgpu_scheduler.framework.interfaces import GpuPolicy
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.placement import hami_rank
from vgpu_scheduler.placement.place import GpuRanker

#: The pod's GPU ranking for one placement on a node.
Ranking = Callable[[NodeInfo], GpuRanker]


def builtin(rank: GpuRanker) -> GpuPolicy:
    return lambda node, cands: rank(cands)


def on_node(policy: GpuPolicy) -> Ranking:
    return lambda node: lambda cands: policy(node, cands)


def hami(choices: PodChoices, default_policy: str, scaling: float) -> Ranking | None:
    """HAMi's ranking for a pod whose GPU policy is HAMi's (``hami.io/``), or that gives
    HAMi's scoring weights and no policy (they weigh the default policy when it is one
    HAMi has, else HAMi's default, spread); None for any other pod."""
    policy = choices.hami_gpu
    if policy is None and choices.weights is not None and choices.gpu_policy is None:
        policy = parse_gpu_policy(default_policy if default_policy in (BINPACK, SPREAD)
                                  else SPREAD)
    if policy is None:
        return None
    ranking = hami_rank.HamiRanking(policy, choices.weights, choices.selector.numa_bind)
    return lambda node: ranking.on(node.devices, scaling)
