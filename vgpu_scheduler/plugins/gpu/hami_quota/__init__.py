"""Filter: HAMi's ResourceQuotas on GPU memory and compute (``limits.nvidia.com/gpumem``,
``limits.nvidia.com/gpucores``), enforced as HAMi's scheduler enforces them: a node is
left out when the pod's slices there would take its namespace past a cap
(:mod:`vgpu.hami_quota`). Beside vgpu's own derived requests, which Kubernetes' quota
admission charges (docs/quotas.md): a HAMi user's quota objects keep capping.

PreFilter sums what the namespace's pods hold now (bound, assumed or nominated, on every
node of the snapshot) once per attempt, and only for a namespace that has such a quota,
and hands the caps to the plugin that places GPUs (``CycleState.add_budget``): of a node's
GPUs it takes ones within them when there are such, as HAMi's ``Fit`` skips a GPU that
would break the quota (a percentage is less MiB on a smaller GPU). Filter adds what the
pod would take on the node (its claim, as Reserve places it) and refuses the node when
even that breaks a cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from vgpu import hami_quota
from vgpu.config import Config
from vgpu.hami_quota import HamiLimits
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable

_KEY = "HamiQuota"


@dataclass(frozen=True)
class _Pre:
    limits: HamiLimits
    #: MiB and cores the namespace's other pods hold.
    used: tuple[int, int]
    config: Config
    namespace: str

    def allows(self, memory_mib: int, cores: int) -> bool:
        """The cycle's budget (``GpuBudget``): the pod may hold this much."""
        return hami_quota.over(self.limits, self.used, (memory_mib, cores), self.config,
                               self.namespace) is None


class HamiQuota:
    name = "HamiQuota"

    def __init__(self, handle: Handle) -> None:
        self._config = handle.config
        self._quotas = handle.lister("resourcequotas")

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        if pod.gpu is None or not pod.gpu.is_gpu_pod:
            return None, SKIP
        limits = hami_quota.limits_of(self._quotas.items(), pod.namespace, self._config)
        if not limits.capped:
            return None, SKIP
        memory = cores = 0
        for node in snapshot:
            for uid, held in node.pods.items():
                if uid == pod.pod_id or held.assignment is None \
                        or held.info.namespace != pod.namespace:
                    continue
                mib, pct = hami_quota.held(held.assignment)
                memory += mib
                cores += pct
        pre = _Pre(limits, (memory, cores), self._config, pod.namespace)
        state.write(_KEY, pre)
        state.add_budget(pre)
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        pre: _Pre | None = state.read(_KEY)
        if pre is None:
            return SUCCESS
        claim = state.claim_on(node)
        if claim is None:
            return SUCCESS  # it does not fit there anyway: the VGPU filter says why
        why = hami_quota.over(pre.limits, pre.used, hami_quota.held(claim), self._config,
                              pod.namespace)
        return SUCCESS if why is None else unresolvable(why)

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        if event.resource == "resourcequotas":
            return True
        return event.resource == "pod" and event.action == "delete" and event.freed is not None
