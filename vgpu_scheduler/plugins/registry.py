"""The one plugin registry of the product: a new plugin is one folder plus one line here
(its package, as kube-scheduler keeps one folder per plugin: kube-scheduler's own under
:mod:`vgpu_scheduler.plugins.kube`, vgpu's under :mod:`vgpu_scheduler.plugins.gpu`; helpers
that several plugins share live in :mod:`vgpu_scheduler.plugins.helper`). The names are the
ones a configuration's ``scheduler.plugins`` lists.

The simulator adds the FGD paper's baselines (:mod:`vgpu_simulate.baselines`) to
the profiles it builds; a cluster's scheduler knows only these.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from vgpu_scheduler.framework.handle import PluginFactory
from vgpu_scheduler.plugins.gpu import (
    allocation_gate,
    binder,
    fault_domain,
    fragmentation_aware,
    hami_quota,
    isolation_required,
    mps_user,
    node_reservation,
    quota_charge,
    share,
)
from vgpu_scheduler.plugins.kube import (
    default_preemption,
    image_locality,
    interpod_affinity,
    node_affinity,
    node_name,
    node_ports,
    node_resources_fit,
    node_unschedulable,
    node_volume_limits,
    pod_topology_spread,
    priority_sort,
    scheduling_gates,
    taint_toleration,
    volume_binding,
    volume_restrictions,
    volume_zone,
)

REGISTRY: Mapping[str, PluginFactory] = MappingProxyType({
    "SchedulingGates": scheduling_gates.SchedulingGates,
    "PrioritySort": priority_sort.PrioritySort,
    "NodeUnschedulable": node_unschedulable.NodeUnschedulable,
    "NodeName": node_name.NodeName,
    "TaintToleration": taint_toleration.TaintToleration,
    "NodeAffinity": node_affinity.NodeAffinity,
    "NodePorts": node_ports.NodePorts,
    "NodeResourcesFit": node_resources_fit.NodeResourcesFit,
    "VolumeRestrictions": volume_restrictions.VolumeRestrictions,
    "NodeVolumeLimits": node_volume_limits.NodeVolumeLimits,
    "VolumeBinding": volume_binding.VolumeBinding,
    "VolumeZone": volume_zone.VolumeZone,
    "PodTopologySpread": pod_topology_spread.PodTopologySpread,
    "InterPodAffinity": interpod_affinity.InterPodAffinity,
    "ImageLocality": image_locality.ImageLocality,
    "IsolationRequired": isolation_required.IsolationRequired,
    "FaultDomain": fault_domain.FaultDomain,
    "MpsUser": mps_user.MpsUser,
    "VGPU": share.VGPU,
    "HamiQuota": hami_quota.HamiQuota,
    "QuotaCharge": quota_charge.QuotaCharge,
    "DefaultPreemption": default_preemption.DefaultPreemption,
    "NodeReservation": node_reservation.NodeReservation,
    "AllocationGate": allocation_gate.AllocationGate,
    "VGPUBinder": binder.VGPUBinder,
    # Ranks nodes by itself (the vGPU plugin's score weight 0) and provides the GPU policy
    # "fragmentation-aware".
    "FragmentationAware": fragmentation_aware.FragmentationAware,
})
