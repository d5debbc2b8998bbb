"""What the scheduling algorithm's steps hand on: PreFilter's summary of the node set to
the filters, and the outcome for one pod to the host."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.diagnosis import Diagnosis
from vgpu_scheduler.framework.nodeinfo import NodeInfo
from vgpu_scheduler.framework.status import Status


@dataclass
class ScheduleResult:
    """The outcome of the scheduling algorithm for one pod."""

    node: str | None
    state: CycleState
    status: Status
    diagnosis: Diagnosis | None = None
    #: Nodes the filters ran on, and how many candidates were scored.
    evaluated: int = 0
    feasible: int = 0


@dataclass
class PreFiltered:
    """What the PreFilter plugins said about the node set: the nodes left, the scores
    plugins computed for every node at once (by plugin name, in PreFilter order: the
    first breaks ties), and the tests of where the pod would wait at Permit."""

    mask: npt.NDArray[np.bool_]
    scores: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    waits: list[Callable[[NodeInfo], bool]] = field(default_factory=list)
