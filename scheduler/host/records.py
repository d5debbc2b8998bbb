"""What the cache keeps per pod that takes room on a node: bound, assumed or nominated."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.framework import podinfo
from scheduler.framework.nodeinfo import NodePod
from scheduler.framework.podinfo import PodInfo
from vgpu import logs, usage
from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment
from vgpu.config import Config
from vgpu.errors import CodecError
from vgpu.pods import is_terminated, node_name

_log = logs.get("vgpu.scheduler.cache")


@dataclass(slots=True)
class PodRecord:
    """A pod that takes resources on a node (bound, or assumed to be)."""

    key: str
    node: str
    info: PodInfo = field(repr=False)
    assignment: Assignment | None = None
    assumed: bool = False
    #: A pending pod for which a preemption made room here: its claim holds the room.
    nominated: bool = False
    binding_finished: bool = False
    deadline: float | None = None

    @property
    def cpu(self) -> int:
        return self.info.cpu_milli

    @property
    def memory(self) -> int:
        return self.info.memory

    @property
    def uid(self) -> str:
        return self.info.uid

    @property
    def obj(self) -> Obj:
        return self.info.pod

    def same_placement(self, other: PodRecord) -> bool:
        """Whether the node's state would not change from one record to the other (only
        the pod's status or unrelated annotations differ; a pod starting to terminate
        no longer counts for topology spread)."""
        return (self.node, self.assignment) == (other.node, other.assignment) and (
            self.info.shape == other.info.shape and self.info.labels == other.info.labels
            and self.info.terminating == other.info.terminating)

    def on_node(self) -> NodePod:
        return NodePod(self.info, self.assignment, self.nominated)


def bound_record(pod: Obj, config: Config) -> PodRecord | None:
    """The record of a pod that occupies a node, or None (pending, or terminated)."""
    node = node_name(pod)
    if node is None or is_terminated(pod):
        return None
    info = podinfo.parse(pod, config)
    if info.error is not None:
        # The API server would not have accepted it; count what can be read, not crash.
        _log.warning("bound pod is malformed", pod=info.key, error=info.error)
    try:
        assignment = usage.claimed(pod)
    except CodecError as exc:
        _log.warning("bound pod has an unreadable assignment", pod=info.key, error=str(exc))
        assignment = None
    return PodRecord(key=info.key, node=node, info=info, assignment=assignment)


