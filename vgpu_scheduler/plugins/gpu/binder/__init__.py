"""Bind: one ``pods/binding`` call carrying the assignment (docs/contracts.md#binding-protocol).

The Binding's annotations (``vgpu.io/assignment``, ``vgpu.io/bind-phase: allocating``,
``vgpu.io/bind-time``) land on the pod in the same write that sets ``nodeName``, so the
node agent never sees a bound GPU pod without its assignment.
"""

from __future__ import annotations

import datetime as dt

import vgpu.annotations as ann
from vgpu import codecs
from vgpu.cluster.fence import FencedError
from vgpu.codecs import Assignment
from vgpu.errors import ClusterError, ConflictError, OutcomeUnknownError
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.handle import Handle
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import SUCCESS, Status, conflict, error, in_doubt


def binding_annotations(assignment: Assignment | None, now: float) -> dict[str, str]:
    if assignment is None:
        return {}
    return {
        ann.ASSIGNMENT: codecs.encode_assignment(assignment),
        ann.BIND_PHASE: ann.PHASE_ALLOCATING,
        ann.BIND_TIME: codecs.encode_heartbeat(dt.datetime.fromtimestamp(now, dt.UTC)),
    }


class VGPUBinder:
    name = "VGPUBinder"

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        cluster = self._handle.cluster
        if cluster is None:
            return error("no cluster to bind through")
        annotations = binding_annotations(state.assignment, self._handle.now())
        try:
            # The uid: the Binding is for this pod only, not a successor of its name.
            cluster.bind(pod.namespace, pod.name, node, annotations, uid=pod.uid)
        except ConflictError as exc:
            return conflict(f"binding to {node} refused: {exc}")
        except OutcomeUnknownError as exc:
            return in_doubt(f"binding to {node} may have gone through: {exc}")
        except ClusterError as exc:
            return error(f"binding to {node} failed: {exc}")
        except FencedError as exc:
            # Nothing was sent: this replica may no longer lead, and stops.
            return error(str(exc))
        return SUCCESS
