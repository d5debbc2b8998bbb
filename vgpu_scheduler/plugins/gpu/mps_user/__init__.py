"""Filter: on a GPU whose mode is an MPS mode, only pods of one Linux user at a time
(docs/isolation.md#mps-users, :mod:`vgpu.mps_users`).

One MPS control daemon serves one uid at a time per GPU, so a client of another uid waits
until every client of the first has ended. A GPU is an MPS GPU when the mode its agent
reports, or the mode its node is configured for (its ``vgpu.io/isolation`` label, else
``isolation.mode``; ``auto`` as its agent resolved it), is ``mps`` or ``mps-hami-core``. The
cycle's pod may take a slice of such a GPU only when every pod already there runs as its
user: its effective uid (a GPU container's ``runAsUser``, else the pod's), theirs as
recorded in their assignments at their placement. A pod whose uid is unknown is a user of
its own; one whose GPU containers run as different uids fits no MPS GPU. The GPUs the pod
may not take reach the ``VGPU`` plugin through the cycle state, as fault domains do
(:class:`~vgpu_scheduler.framework.cycle_state.GpuBarrier`), and the assignment records
the pod's uid.

Fast path: while no node has an MPS GPU (a per-node column), nothing can be barred and the
plugin only stamps the uid; ``isolation.mps.placeByUser: false`` turns the rule off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from vgpu import isolation_modes, mps_users
from vgpu.codecs import Assignment
from vgpu.mps_users import User
from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.node_memo import NodeMemo
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.snapshot import Column, Snapshot
from vgpu_scheduler.framework.status import SKIP, SUCCESS, Status, unschedulable

#: The reason of a GPU the pod may not take (the VGPU plugin's diagnosis shows it per GPU).
BARRED = "GPU's MPS server serves another user (runAsUser)"
#: The reason of every MPS GPU to a pod whose GPU containers run as different uids.
MIXED = "GPU runs MPS, which serves one user at a time, and the pod's GPU containers run " \
        "as different users (runAsUser)"
#: The node's reason when too few GPUs are left to the pod.
REASON = "too few GPUs whose MPS server may serve the pod's user (runAsUser)"
#: Per node, its healthy GPUs on MPS.
MPS_GPUS = "mps_user.mps_gpus"
_KEY = "MpsUser"


def configured(node: NodeInfo, default: str) -> str:
    """The mode the node is configured for: its label, else the cluster's; ``auto`` as its
    agent resolved it, when it says."""
    return isolation_modes.configured(
        default, node.static.labels.get(isolation_modes.NODE_LABEL),
        node.static.isolation_target)


@dataclasses.dataclass
class _Barrier:
    """The pod's user for this cycle; a GpuBarrier for the VGPU plugin."""

    me: User
    active: bool
    plugin: MpsUser
    seen: NodeMemo[Mapping[int, str]] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.seen = NodeMemo(self._barred)

    def barred(self, node: NodeInfo) -> Mapping[int, str]:
        return self.seen(node) if self.active else {}

    def _barred(self, node: NodeInfo) -> Mapping[int, str]:
        if self.me.mixed:
            return dict.fromkeys(self.plugin.mps_positions(node), MIXED)
        return {pos: BARRED for pos, users in self.plugin.occupants(node).items()
                if mps_users.blocker(self.me, users) is not None}

    def stamp(self, assignment: Assignment) -> Assignment:
        if self.me.uid is None:
            return assignment
        return dataclasses.replace(assignment, run_as_user=self.me.uid)


class MpsUser:
    name = "MpsUser"

    def __init__(self, handle: Handle) -> None:
        isolation = handle.config.isolation
        self._mode = isolation.mode
        self._on = isolation.mps.place_by_user
        #: Per MPS GPU (by position), the users of the pods on it.
        self.occupants = NodeMemo(self._occupants)

    # -- what a node holds -----------------------------------------------------------------

    def mps_positions(self, node: NodeInfo) -> list[int]:
        """Positions of the node's GPUs whose containers are, or may next be, MPS clients."""
        mode = configured(node, self._mode)
        return [pos for pos, d in enumerate(node.devices)
                if mps_users.on_mps(d.isolation, mode)]

    def _occupants(self, node: NodeInfo) -> dict[int, list[User]]:
        positions = self.mps_positions(node)
        out: dict[int, list[User]] = {}
        if not positions:
            return out
        on_mps = {node.devices[pos].uuid: pos for pos in positions}
        for placed in node.pods.values():
            assignment = placed.assignment
            if assignment is None:
                continue
            user = mps_users.held(assignment.run_as_user, placed.info.pod,
                                  assignment.containers.keys(), placed.info.pod_id)
            for uuid in assignment.gpu_ids:
                pos = on_mps.get(uuid)
                if pos is not None:
                    out.setdefault(pos, []).append(user)
        return out

    def _mps_gpus(self, node: NodeInfo) -> int:
        if not self._on:
            return 0
        healthy = [d for d in node.devices if d.healthy]
        if not healthy:
            return 0
        mode = configured(node, self._mode)
        return sum(1 for d in healthy if mps_users.on_mps(d.isolation, mode))

    def columns(self) -> Sequence[Column]:
        return (Column(MPS_GPUS, np.int32, self._mps_gpus),)

    # -- the cycle -------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status]:
        request = pod.gpu
        if request is None:
            return None, SKIP
        me = mps_users.effective(pod.pod, {c.name for c in request.containers if c.count},
                                 pod.pod_id)
        # An exclusive vGPU takes a GPU nobody else is on, and no one joins it: its uid is
        # only recorded.
        exclusive = all(c.exclusive for c in request.containers if c.count)
        active = (self._on and not exclusive
                  and bool(np.any(snapshot.column(MPS_GPUS) > 0)))
        barrier = _Barrier(me, active, self)
        state.write(_KEY, barrier)
        state.add_barrier(barrier)
        return None, SUCCESS if active else SKIP

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        barrier: _Barrier = state.read(_KEY)
        barred = barrier.barred(node)
        if not barred or pod.gpu is None:
            return SUCCESS
        left = sum(1 for pos, d in enumerate(node.devices) if d.healthy and pos not in barred)
        if left >= pod.gpu.max_count:
            return SUCCESS  # the VGPU plugin places among the GPUs left, or says why not
        return unschedulable(MIXED if barrier.me.mixed else REASON)

    def explain(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                positions: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64],
                                                           list[Status]] | None:
        barrier: _Barrier | None = state.read(_KEY)
        if barrier is None or not barrier.active:
            return np.full(len(positions), -1, dtype=np.int64), []
        return None

    def could_help(self, pod: PodInfo, event: ClusterEvent) -> bool:
        if event.resource == "pod":
            return event.action == "delete" and event.freed is not None
        return event.resource == "node" and (event.action == "add" or bool(
            event.changes & {"inventory", "labels"}))
