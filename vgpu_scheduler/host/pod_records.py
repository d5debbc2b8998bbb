"""What the cache keeps per pod that takes room on a node: bound, assumed or nominated."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass, field

from vgpu import logs, meta, usage
from vgpu.annotations import ASSIGNMENT, BIND_PHASE, BIND_REASON, BIND_TIME
from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment
from vgpu.config import Config
from vgpu.errors import CodecError
from vgpu.pod_history import ALLOCATION
from vgpu.pods import is_terminated, node_name
from vgpu_scheduler.framework import podinfo
from vgpu_scheduler.framework.nodeinfo import NodePod
from vgpu_scheduler.framework.podinfo import PodInfo

_log = logs.get("vgpu.scheduler.cache")

#: What the node agent writes on a bound pod: nothing a record is made of.
_AGENT_ANNOTATIONS = frozenset({BIND_PHASE, BIND_REASON, ALLOCATION})
#: What our Binding adds to a pod, besides ``nodeName``, and what the agent adds later.
_BOUND_ANNOTATIONS = _AGENT_ANNOTATIONS | {ASSIGNMENT, BIND_TIME}


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
    #: Its Binding's answer was lost: it may still land, so the room stays held until the
    #: watch shows the pod bound or the deadline proves it will not (issue 36).
    in_doubt: bool = False

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
    def pod_id(self) -> str:
        """What the cache keys the record by: the pod's uid (:func:`vgpu.pods.pod_id`)."""
        return self.info.pod_id

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
        assignment = usage.claimed(pod, config.vgpu_schedulers)
    except CodecError as exc:
        _log.warning("bound pod has an unreadable assignment", pod=info.key, error=str(exc))
        assignment = None
    if assignment is not None and info.error is None:
        problem = usage.mismatch(assignment, info.gpu)
        if problem is not None:
            _log.warning("bound pod's assignment does not fit what it asks for; it holds no "
                         "GPU slice", pod=info.key, reason=problem)
            assignment = None
    return PodRecord(key=info.key, node=node, info=info, assignment=assignment)


def kept_claim(old: PodRecord, new: PodRecord) -> PodRecord:
    """``new`` holding the slices ``old`` holds when both are the same bound pod on the
    same node: what a pod holds is what vgpu's Binding gave it (the write that bound it),
    never what its ``vgpu.io/assignment`` says afterwards; a pod's owner could edit that.
    An assumed record is not kept: the watch then shows the Binding itself, ours or that
    of another replica."""
    if (old.assumed or old.nominated or old.node != new.node or old.uid != new.uid
            or old.assignment == new.assignment):
        return new
    _log.warning("bound pod's assignment changed after its binding; it keeps what it was "
                 "bound with", pod=new.key, node=new.node)
    return dataclasses.replace(new, assignment=old.assignment)


def _same_but(old: Obj, new: Obj, annotations: frozenset[str]) -> bool:
    """The metadata a record is made of is the same, annotations other than ``annotations``
    included."""
    om, nm = meta.of(old), meta.of(new)
    for key in ("labels", "deletionTimestamp", "creationTimestamp", "uid"):
        if om.get(key) != nm.get(key):
            return False
    before, after = meta.annotations_of(old), meta.annotations_of(new)
    if before == after:
        return True
    return all(before.get(k) == after.get(k)
               for k in (before.keys() | after.keys()) - annotations)


def same_record(old: Obj, new: Obj) -> bool:
    """Whether :func:`bound_record` reads the same from ``new`` as from ``old``: only the
    pod's status (not its phase) or the node agent's annotations changed, as in the
    agent's ``bind-phase`` patch and the kubelet's status updates of every bound pod."""
    if old.get("spec") != new.get("spec") or is_terminated(old) != is_terminated(new):
        return False
    return _same_but(old, new, _AGENT_ANNOTATIONS)


def confirmed(rec: PodRecord, pod: Obj, schedulers: Collection[str]) -> PodRecord | None:
    """The bound record of ``pod`` as the watch shows it once the Binding of the pod
    ``rec`` assumed went through, without parsing it again; None when it is not just that
    pod plus the binding (``nodeName``, the assignment ``rec`` holds, the bind phase and
    time). Parsing every confirmed pod again was a tenth of the scheduler's CPU in a burst
    (yappi, bench/bind.py)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName") != rec.node or is_terminated(pod):
        return None
    assumed = rec.info.pod
    if {**(assumed.get("spec") or {}), "nodeName": rec.node} != spec or not _same_but(
            assumed, pod, _BOUND_ANNOTATIONS):
        return None
    try:
        if usage.claimed(pod, schedulers) != rec.assignment:
            return None
    except CodecError:
        return None
    return PodRecord(key=rec.key, node=rec.node, info=dataclasses.replace(rec.info, pod=pod),
                     assignment=rec.assignment)


def refreshed(rec: PodRecord, pod: Obj) -> PodRecord:
    """``rec`` holding ``pod`` (for which :func:`same_record` holds), without parsing it."""
    return dataclasses.replace(rec, info=dataclasses.replace(rec.info, pod=pod))
