"""The one plugin registry: a new plugin is one module plus one line here."""

from __future__ import annotations

from scheduler.framework.interfaces import PluginFactory
from scheduler.plugins import (
    allocation_gate,
    binder,
    fragmentation_aware,
    node_affinity,
    node_resources_fit,
    node_unschedulable,
    priority_sort,
    taint_toleration,
    vgpu,
)
from scheduler.simulate.baselines import (
    bestfit,
    dotprod,
    fgd,
    gpu_clustering,
    gpu_packing,
    random_score,
)

REGISTRY: dict[str, PluginFactory] = {
    "PrioritySort": priority_sort.PrioritySort,
    "NodeUnschedulable": node_unschedulable.NodeUnschedulable,
    "TaintToleration": taint_toleration.TaintToleration,
    "NodeAffinity": node_affinity.NodeAffinity,
    "NodeResourcesFit": node_resources_fit.NodeResourcesFit,
    "VGPU": vgpu.VGPU,
    "AllocationGate": allocation_gate.AllocationGate,
    "VGPUBinder": binder.VGPUBinder,
    # Placement policies that rank nodes by themselves (the vGPU plugin's score weight 0).
    "BestFit": bestfit.BestFit,
    "DotProd": dotprod.DotProd,
    "GpuClustering": gpu_clustering.GpuClustering,
    "GpuPacking": gpu_packing.GpuPacking,
    "RandomScore": random_score.RandomScore,
    "FGD": fgd.FGD,
    "FragmentationAware": fragmentation_aware.FragmentationAware,
}
