"""Filter: a pod's GPUs keep within what Kubernetes' quota admission charged it.

The webhook charges a GPU pod its derived requests (``vgpu.io/memory-mib``, docs/quotas.md):
a memory percentage, or a whole GPU, against the largest GPU it may land on that the
webhook knows. A GPU larger than every one it knew (a node that joined after the pod was
created) would grant more than was charged, and the namespace's ResourceQuota would count
less than the pod holds. So PreFilter hands the charge to the plugin that places GPUs as a
budget (``CycleState.add_budget``): of a node's GPUs it takes ones whose grants stay within
the charge when there are such (only for a pod that could be granted more than its
charge on the largest GPU of the snapshot: the others, nearly all, cost one column
maximum). Where a ResourceQuota of the namespace caps
``vgpu.io/memory-mib`` or ``vgpu.io/cores`` (scoped or not), Filter refuses a node whose
GPUs would all take the pod past its charge; elsewhere the charge caps nothing and only
steers the choice.

A pod without the derived requests (created before vgpu, or with ``quota.derivedRequests``
off), or charged no memory (created before any GPU type was known, in a namespace no such
quota capped then), has no charge to keep to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vgpu import hami_quota, meta, quota_charge
from vgpu.devices import memory_capacity, slice_mib
from vgpu.quota_charge import Charge
from vgpu.requests import PodRequest
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable

_KEY = "QuotaCharge"
#: The schedulable MiB of the node's largest GPU.
LARGEST = "quota_charge.largest_gpu"
#: The names under which a ResourceQuota caps what the charge states.
_CAPPING = tuple(prefix + name for name in (quota_charge.MEMORY, quota_charge.CORES)
                 for prefix in (quota_charge.QUOTA_PREFIX, ""))


@dataclass(frozen=True)
class _Pre:
    charge: Charge
    #: The ResourceQuota that caps the charge (empty: none does).
    capped_by: str

    def allows(self, memory_mib: int, cores: int) -> bool:
        """The cycle's budget (``GpuBudget``): within the charge."""
        return memory_mib <= self.charge.memory_mib and cores <= self.charge.cores


class QuotaCharge:
    name = "QuotaCharge"

    def __init__(self, handle: Handle) -> None:
        self._on = handle.config.quota.derived_requests
        self._quotas = handle.lister("resourcequotas")

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        if not self._on or pod.gpu is None or not pod.gpu.is_gpu_pod:
            return None, SKIP
        charge = quota_charge.pod_charge(pod.pod)
        largest = snapshot.column(LARGEST)
        if charge.memory_mib <= 0 or not len(largest) or _most(
                pod.gpu, int(largest.max())) <= charge.memory_mib:
            return None, SKIP
        capped_by = next((meta.name(q) for q in self._quotas.items()
                          if meta.namespace(q, "default") == pod.namespace and _caps(q)), "")
        pre = _Pre(charge, capped_by)
        state.write(_KEY, pre)
        state.add_budget(pre)
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        pre: _Pre | None = state.read(_KEY)
        if pre is None or not pre.capped_by:
            return SUCCESS
        claim = state.claim_on(node)
        if claim is None:
            return SUCCESS  # it does not fit there anyway: the VGPU filter says why
        memory, cores = hami_quota.held(claim)
        if pre.allows(memory, cores):
            return SUCCESS
        return unresolvable(
            f"GPU memory over the pod's quota charge: its GPUs here would grant {memory} MiB, "
            f"it was charged {pre.charge.memory_mib} MiB ({quota_charge.MEMORY}, capped by "
            f"ResourceQuota {pre.capped_by}): its GPU is larger than any the webhook knew "
            f"when the pod was created; recreate the pod to be charged for it")

    def columns(self) -> Sequence[Column]:
        return (Column(LARGEST, np.int64, lambda n: max(
            (memory_capacity(d, n.scaling) for d in n.devices), default=0), 0),)

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        return event.resource == "resourcequotas" or (event.resource == "node" and (
            event.action == "add" or "inventory" in event.changes))


def _caps(quota: object) -> bool:
    hard = meta.mapping(meta.mapping(meta.mapping(quota).get("spec")).get("hard"))
    return any(name in hard for name in _CAPPING)


def _most(request: PodRequest, capacity_mib: int) -> int:
    """The most MiB the pod could be granted on GPUs of ``capacity_mib``: every container
    added up (no less than init containers counted by the largest)."""
    return sum(c.count * slice_mib(c, capacity_mib) for c in request.containers)
