"""What a failed binding did, told from the pod as the API server has it now.

A Binding that came back 409, or whose answer never came, may have been carried out: by
this very request (its answer lost), by another binder (a second replica, an old leader),
or not at all. Forgetting the assumption of a pod that is in fact bound un-counts it until
the watch catches up, which is how a GPU gets handed out twice; so the host reads the pod
before it forgets anything, and this decides what that read means.
"""

from __future__ import annotations

import enum

from vgpu import meta
from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment, assignment_of
from vgpu.errors import CodecError
from vgpu.pods import node_name, pod_id
from vgpu_scheduler.framework.podinfo import PodInfo


class Verdict(enum.Enum):
    #: Bound where this binding put it, with its assignment: it went through.
    OURS = "ours"
    #: Bound, but elsewhere or with other slices: another binder won. The watch will show
    #: it; until then the assumption is kept (counting it twice is safe, not at all is not).
    ELSEWHERE = "elsewhere"
    #: The pod that was scheduled is gone (deleted, being deleted, or replaced by another of
    #: the same name that does not hold its slices): nothing of it to count or retry.
    GONE = "gone"
    #: Still waiting for a node: the binding did nothing; retry after a backoff.
    PENDING = "pending"
    #: The pod could not be read: keep the assumption until the watch tells.
    UNKNOWN = "unknown"


def judge(pod: PodInfo, node: str, assignment: Assignment | None, seen: Obj | None) -> Verdict:
    """The verdict on the binding of ``pod`` to ``node`` with ``assignment``, from the pod
    as read after it failed (``seen``; None: not found).

    A successor of the name bound with this binding's slices is ELSEWHERE, not GONE: a
    server before 1.23 carries a Binding out on whatever pod has the name, so the slices
    are taken, by the successor, and stay counted until the watch shows it.
    """
    if seen is None:
        return Verdict.GONE
    bound = node_name(seen)
    successor = pod_id(seen) != pod.pod_id
    if bound is None:
        return Verdict.GONE if successor or meta.deleting(seen) else Verdict.PENDING
    try:
        held = assignment_of(seen)
    except CodecError:
        return Verdict.GONE if successor else Verdict.ELSEWHERE
    ours = bound == node and held == assignment
    if successor:
        return Verdict.ELSEWHERE if ours else Verdict.GONE
    return Verdict.OURS if ours else Verdict.ELSEWHERE
