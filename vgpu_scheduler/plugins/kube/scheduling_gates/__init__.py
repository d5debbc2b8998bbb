"""PreEnqueue: a pod with ``spec.schedulingGates`` is not tried until the last gate goes.

Gates are how Kueue and other admission controllers hold pods back; the queue keeps a
gated pod aside (no attempt, no event) and lets it in when an update of the pod removes
its last gate, as kube-scheduler's SchedulingGates plugin does.
"""

from __future__ import annotations

from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import SUCCESS, Status, unresolvable


class SchedulingGates:
    name = "SchedulingGates"

    def __init__(self, handle: Handle) -> None:
        del handle

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.gates:
            return SUCCESS
        return unresolvable(f"waiting for scheduling gates: [{' '.join(pod.gates)}]")
