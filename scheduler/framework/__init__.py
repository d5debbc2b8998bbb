"""The scheduling-framework host: extension points, status, cycle state, runtime."""

from __future__ import annotations

from scheduler.framework.interfaces import (
    ASSIGNMENT_KEY,
    ClusterEvent,
    CycleState,
    Diagnosis,
    Handle,
    PreFilterResult,
)
from scheduler.framework.runtime import Framework, ScheduleResult
from scheduler.framework.status import SKIP, SUCCESS, WAIT, Code, Status

__all__ = [
    "ASSIGNMENT_KEY", "SKIP", "SUCCESS", "WAIT", "ClusterEvent", "Code", "CycleState",
    "Diagnosis", "Framework", "Handle", "PreFilterResult", "ScheduleResult", "Status",
]
