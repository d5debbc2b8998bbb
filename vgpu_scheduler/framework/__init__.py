"""The scheduling framework: extension points, the values plugins read, and the runner.

``interfaces`` holds the extension points (one tiny Protocol each, as kube-scheduler's
framework); ``handle`` what plugins are built with and what the host lends the framework;
``cycle_state`` the values of one scheduling attempt and ``cluster_event`` the changes that
may help a pod that failed; ``status`` the outcome codes; ``nodeinfo``, ``podinfo``,
``snapshot`` and ``objects`` what plugins read; ``runtime`` holds the :class:`Framework`,
which runs a profile's plugins for one pod and is their handle, and ``diagnosis`` explains
a pod that fits nowhere; ``profile`` builds a profile from the configuration.
"""

from __future__ import annotations

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.cycle_state import CycleState, PreFilterResult
from vgpu_scheduler.framework.diagnosis import Diagnosis
from vgpu_scheduler.framework.handle import Handle, Host
from vgpu_scheduler.framework.runtime import Framework
from vgpu_scheduler.framework.schedule_result import ScheduleResult
from vgpu_scheduler.framework.status import SKIP, SUCCESS, WAIT, Code, Status

__all__ = [
    "SKIP", "SUCCESS", "WAIT", "ClusterEvent", "Code", "CycleState", "Diagnosis",
    "Framework", "Handle", "Host", "PreFilterResult", "ScheduleResult", "Status",
]
