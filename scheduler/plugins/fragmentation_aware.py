"""vgpu's fragmentation-aware placement: FGD's measure and node ranking, exact GPU choice.

Nodes are ranked as FGD ranks them (:mod:`scheduler.plugins.fgd`): by the growth of the
node's expected fragmented GPU for the cluster's workload, through FGD's truncated
sigmoid, so that near-equal placements tie and the first node in snapshot order takes
them (the cluster fills node by node instead of scattering pods over nodes whose
fragmentation differs by noise: with exact scores the same measure leaves 12 % of the GPUs
unallocated instead of 5 %). On the chosen node a shared-GPU pod goes to the GPU whose use
grows fragmentation least, exactly, and on equal growth to the fullest GPU; FGD compares
truncated scores there too and takes the lowest index.
"""

from __future__ import annotations

from scheduler.fragmentation import Choice
from scheduler.plugins.fgd import FGD, register_gpu_policy


class FragmentationAware(FGD):
    name = "FragmentationAware"
    gpu_policy = "fragmentation-aware"

    def gpu_value(self, choice: Choice) -> float:
        return -choice.delta

    def gpu_key(self, value: float, free: int, position: int) -> tuple[float, ...]:
        return (-round(value, 6), free, position)


register_gpu_policy(FragmentationAware.gpu_policy)
