"""QueueSort: higher ``spec.priority`` first, then first come, first served."""

from __future__ import annotations

from typing import Any

from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.podinfo import PodInfo


def sort_key(priority: int, arrival: int) -> tuple[int, int]:
    return (-priority, arrival)


class PrioritySort:
    name = "PrioritySort"

    def __init__(self, handle: Handle) -> None:
        del handle

    def sort_key(self, pod: PodInfo, arrival: int) -> tuple[Any, ...]:
        return sort_key(pod.priority, arrival)
