"""The placement policies ``vgpu simulate`` compares, as scheduler profiles.

A policy is a scheduler configuration: which plugins of the registry run, with what
weights, and which GPU and node policies the vGPU plugin uses. The vGPU plugin always
filters and picks GPUs; a policy with its own score plugin sets the vGPU plugin's score
weight to 0 so that its plugin alone ranks nodes. The paper's baselines and ours get their
workload (the trace's pod shapes) and randomness from the replay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from vgpu.config import Config, SchedulerConfig
from vgpu.errors import ConfigError
from vgpu_scheduler.framework.handle import Handle, PluginFactory
from vgpu_scheduler.placement.shapes import Shape
from vgpu_scheduler.plugins.gpu import fragmentation_aware
from vgpu_scheduler.plugins.registry import REGISTRY
from vgpu_simulate.baselines import (
    bestfit,
    dotprod,
    fgd,
    gpu_clustering,
    gpu_packing,
    random_score,
)
from vgpu_simulate.gorand import GoRand

#: The profile's plugins besides the policy's own; no allocation gate, since no node agent
#: runs in a replay to report allocations.
BASE_PLUGINS = ("PrioritySort", "NodeUnschedulable", "TaintToleration", "NodeAffinity",
                "NodeResourcesFit")
#: FaultDomain and MpsUser as in the default profile: they step aside while no pod keeps to
#: its namespace and no GPU runs MPS, so the published figures stay what they are.
TAIL_PLUGINS = ("FaultDomain", "MpsUser", "VGPU", "VGPUBinder")

PluginBuilder = Callable[[Handle, Sequence[Shape], GoRand], object]


@dataclass(frozen=True)
class SimPolicy:
    name: str
    description: str
    gpu_policy: str
    node_policy: str = "binpack"
    plugin: str | None = None  # a score plugin of the registry that ranks nodes alone
    build: PluginBuilder | None = None

    def config(self) -> Config:
        plugins = (*BASE_PLUGINS, *((self.plugin,) if self.plugin else ()), *TAIL_PLUGINS)
        weights = ("VGPU=0",) if self.plugin else ()
        return Config(default_gpu_policy=self.gpu_policy, default_node_policy=self.node_policy,
                      scheduler=SchedulerConfig(plugins=plugins, score_weights=weights,
                                                percentage_of_nodes_to_score=100, bind_workers=0))

    def registry(self, workload: Sequence[Shape], rng: GoRand) -> Mapping[str, PluginFactory]:
        if self.plugin is None or self.build is None:
            return REGISTRY
        build = self.build
        return {**REGISTRY, self.plugin: lambda handle: build(handle, workload, rng)}


POLICIES: dict[str, SimPolicy] = {p.name: p for p in (
    SimPolicy("lowest-task-count", "vgpu's default: binpack nodes, least-loaded GPU",
              "lowest-task-count", "binpack"),
    SimPolicy("binpack", "binpack nodes and GPUs", "binpack", "binpack"),
    SimPolicy("spread", "spread over nodes and GPUs", "spread", "spread"),
    SimPolicy("random", "paper baseline Random: a random feasible node and GPU", "random",
              plugin=random_score.RandomScore.name,
              build=lambda h, w, r: random_score.RandomScore(h, seed=r.int63())),
    SimPolicy("dotprod", "paper baseline DotProd: least aligned free resources", "binpack",
              plugin=dotprod.DotProd.name, build=lambda h, w, r: dotprod.DotProd(h)),
    SimPolicy("clustering", "paper baseline GpuClustering: nodes holding the pod's kind",
              "binpack", plugin=gpu_clustering.GpuClustering.name,
              build=lambda h, w, r: gpu_clustering.GpuClustering(h)),
    SimPolicy("packing", "paper baseline GpuPacking: used GPUs, then used nodes", "binpack",
              plugin=gpu_packing.GpuPacking.name,
              build=lambda h, w, r: gpu_packing.GpuPacking(h)),
    SimPolicy("bestfit", "paper baseline BestFit: least free CPU and GPU left", "binpack",
              plugin=bestfit.BestFit.name, build=lambda h, w, r: bestfit.BestFit(h)),
    SimPolicy("fgd", "paper's FGD: least growth of fragmentation (truncated score)",
              fgd.FGD.gpu_policy, plugin=fgd.FGD.name,
              build=lambda h, w, r: fgd.FGD(h, workload=w)),
    SimPolicy("fragmentation-aware",
              "vgpu's: least growth of the GPU that GPUs, CPU and memory left cannot serve",
              fragmentation_aware.FragmentationAware.gpu_policy,
              plugin=fragmentation_aware.FragmentationAware.name,
              build=lambda h, w, r: fragmentation_aware.FragmentationAware(h, workload=w)),
    SimPolicy("fragmentation-aware-online",
              "fragmentation-aware, the workload learned from the pods seen so far (the "
              "deployment's mode; no trace given)",
              fragmentation_aware.FragmentationAware.gpu_policy,
              plugin=fragmentation_aware.FragmentationAware.name,
              build=lambda h, w, r: fragmentation_aware.FragmentationAware(h)),
    SimPolicy("waiting-aware",
              "fragmentation-aware-online that also weighs the shapes of the pods that "
              "waited, by their GPU-seconds pending (for --churn)",
              fragmentation_aware.FragmentationAware.gpu_policy,
              plugin=fragmentation_aware.FragmentationAware.name,
              build=lambda h, w, r: fragmentation_aware.FragmentationAware(h, waiting=True)),
)}

DEFAULT = "lowest-task-count"
BEST = "fragmentation-aware"


def get(name: str) -> SimPolicy:
    policy = POLICIES.get(name)
    if policy is None:
        raise ConfigError(f"--policy {name!r}: unknown; known: {', '.join(POLICIES)}")
    return policy
