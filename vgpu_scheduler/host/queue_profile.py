"""What the scheduling queue asks a profile: the order of the active queue, whether a pod
may enter it, and which cluster events may help a parked pod (kube's QueueSort, PreEnqueue
and queueing hints); the framework answers for its plugins."""

from __future__ import annotations

from typing import Any, Protocol

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import SUCCESS, Status


class Profile(Protocol):
    """What the queue asks a profile's plugins (kube's QueueSort, PreEnqueue and queueing
    hints): the framework."""

    def sort_key(self, pod: PodInfo, arrival: int) -> tuple[Any, ...]:
        """Active-queue order: smaller keys pop first."""

    def pre_enqueue(self, pod: PodInfo) -> Status:
        """May the pod enter the active queue?"""

    def could_help(self, pod: PodInfo, plugins: set[str], event: ClusterEvent) -> bool:
        """May ``event`` cure a pod rejected by ``plugins``?"""


class Fifo:
    """The profile of a queue with none: arrival order, every pod admitted, every event
    may help."""

    def sort_key(self, pod: PodInfo, arrival: int) -> tuple[Any, ...]:
        return (arrival,)

    def pre_enqueue(self, pod: PodInfo) -> Status:
        return SUCCESS

    def could_help(self, pod: PodInfo, plugins: set[str], event: ClusterEvent) -> bool:
        return True
