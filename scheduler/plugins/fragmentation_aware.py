"""vgpu's fragmentation-aware placement: FGD's ranking over every resource the scheduler checks.

Nodes are ranked as FGD ranks them (:mod:`scheduler.plugins.fgd`): by the growth of the
node's expected fragmented GPU for the cluster's workload, through FGD's truncated
sigmoid, so that near-equal placements tie and the first node in snapshot order takes
them (the cluster fills node by node instead of scattering pods over nodes whose
fragmentation differs by noise: with exact scores the same measure leaves 12 % of the GPUs
unallocated instead of 5 %).

The difference is the measure. FGD asks whether a typical task fits a node's GPUs and CPU;
the scheduler also refuses a node whose host memory is short, and in the paper's trace
memory is why as many GPU pods fail as CPU is. Here a typical task that lacks memory on a
node cannot use its GPUs either. Each typical shape (as FGD defines them, from CPU and GPU)
carries the median memory of the tasks of that shape: memory varies too much to be part of
the shape itself. GPUs on the chosen node are chosen as FGD chooses them, with the same
measure.
"""

from __future__ import annotations

from scheduler.plugins.fgd import FGD, register_gpu_policy


class FragmentationAware(FGD):
    name = "FragmentationAware"
    gpu_policy = "fragmentation-aware"
    uses_memory = True


register_gpu_policy(FragmentationAware.gpu_policy)
