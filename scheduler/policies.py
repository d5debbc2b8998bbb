"""GPU and node placement policies, by name (the names of :mod:`vgpu.policy`).

A GPU policy ranks the GPUs of the chosen node that fit a container; a node policy scores
a node with the pod placed on it and may name a snapshot column that ranks nodes the same
way before placement (so that when only some feasible nodes are scored, the likely best
are the ones visited). A new policy is one function plus one line in a table here, or a
call to :func:`register_gpu_policy` / :func:`register_node_policy` from another module
(the simulator's fragmentation-aware policy does that).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scheduler.nodeinfo import NodeInfo
from scheduler.placement import Candidate, GpuRanker, Placement
from vgpu.devices import memory_capacity


def _used_share(c: Candidate, scaling: float = 1.0) -> float:
    cap = memory_capacity(c.device, scaling) or 1
    return (c.usage.memory_mib / cap + c.usage.cores / (c.device.cores or 1)) / 2


def lowest_task_count(cands: Sequence[Candidate]) -> list[Candidate]:
    """HAMi's default: the GPU running the fewest tasks, then the lowest index."""
    return sorted(cands, key=lambda c: (c.usage.tasks, c.device.index))


def binpack(cands: Sequence[Candidate]) -> list[Candidate]:
    """The fullest GPU first, keeping empty GPUs whole for large requests."""
    return sorted(cands, key=lambda c: (-_used_share(c), c.device.index))


def spread(cands: Sequence[Candidate]) -> list[Candidate]:
    """The emptiest GPU first."""
    return sorted(cands, key=lambda c: (_used_share(c), c.device.index))


GPU_POLICIES: dict[str, GpuRanker] = {
    "lowest-task-count": lowest_task_count,
    "binpack": binpack,
    "spread": spread,
}


NodeScorer = Callable[[NodeInfo, Placement], float]


@dataclass(frozen=True)
class NodePolicy:
    score: NodeScorer
    #: (snapshot column, descending) visiting nodes best-first before placement; None: any.
    order: tuple[str, bool] | None = None


def utilization_after(node: NodeInfo, placement: Placement) -> float:
    """The node's GPU use (mean of memory and compute shares) with the pod placed."""
    if not node.gpu_memory_total or not node.gpu_cores_total:
        return 0.0
    mem = min((node.gpu_memory_used + placement.memory_mib) / node.gpu_memory_total, 1.0)
    cores = min((node.gpu_cores_used + placement.cores) / node.gpu_cores_total, 1.0)
    return (mem + cores) / 2


UTILIZATION_COLUMN = "vgpu.utilization"

NODE_POLICIES: dict[str, NodePolicy] = {
    "binpack": NodePolicy(lambda n, p: 100.0 * utilization_after(n, p),
                          (UTILIZATION_COLUMN, True)),
    "spread": NodePolicy(lambda n, p: 100.0 * (1.0 - utilization_after(n, p)),
                         (UTILIZATION_COLUMN, False)),
}


def register_gpu_policy(name: str, ranker: GpuRanker) -> None:
    GPU_POLICIES[name] = ranker


def register_node_policy(name: str, policy: NodePolicy) -> None:
    NODE_POLICIES[name] = policy
