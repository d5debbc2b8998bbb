"""vgpu's fragmentation-aware placement: FGD's fragmentation measure, steadier ranking.

The node score is the growth of the node's expected fragmented GPU for the cluster's
workload (:mod:`scheduler.fragmentation`), as in FGD, but in whole steps of
:data:`QUANTUM` milli-GPU instead of FGD's truncated sigmoid: placements whose
fragmentation growth differs by less than a step are equally good, and among equals the
first node in snapshot order wins, so the cluster fills node by node instead of
scattering pods over nodes whose fragmentation differs by noise. GPU choice on a node:
the GPU whose use grows fragmentation least, exactly.
"""

from __future__ import annotations

import math

from scheduler.fragmentation import Choice
from scheduler.plugins.fgd import FGD, register_gpu_policy

#: Fragmentation growth below one step (milli-GPU) counts as equal.
QUANTUM = 100.0


class FragmentationAware(FGD):
    name = "FragmentationAware"
    gpu_policy = "fragmentation-aware"

    def value(self, choice: Choice) -> float:
        return float(math.floor(-choice.delta / QUANTUM))

    def gpu_value(self, choice: Choice) -> float:
        return -choice.delta


register_gpu_policy(FragmentationAware.gpu_policy)
