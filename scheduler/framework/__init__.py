"""The scheduling framework: extension points, the values plugins read, and the runner.

``interfaces`` holds the extension points (one tiny Protocol each, as kube-scheduler's
framework) and the per-cycle values; ``status`` the outcome codes; ``nodeinfo``,
``podinfo``, ``snapshot`` and ``objects`` what plugins read; ``runtime`` runs a profile's
plugins for one pod and ``diagnosis`` explains a pod that fits nowhere; ``profile``
builds a profile from the configuration.
"""

from __future__ import annotations

from vgpu_scheduler.framework.cycle import ClusterEvent, CycleState, PreFilterResult
from vgpu_scheduler.framework.diagnosis import Diagnosis
from vgpu_scheduler.framework.interfaces import Handle
from vgpu_scheduler.framework.runtime import Framework, ScheduleResult
from vgpu_scheduler.framework.status import SKIP, SUCCESS, WAIT, Code, Status

__all__ = [
    "SKIP", "SUCCESS", "WAIT", "ClusterEvent", "Code", "CycleState", "Diagnosis",
    "Framework", "Handle", "PreFilterResult", "ScheduleResult", "Status",
]
