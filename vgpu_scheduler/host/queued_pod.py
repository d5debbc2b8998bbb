"""What the scheduling queue keeps per pod, from its first attempt until it is bound."""

from __future__ import annotations

from dataclasses import dataclass, field

from vgpu_scheduler.framework.podinfo import PodInfo

#: ``rejected_by`` of a pod whose own spec is the problem: only a change to it can help.
POD_SPEC = "<pod spec>"


@dataclass(eq=False)
class QueuedPod:
    info: PodInfo
    #: When the pod first entered the queue, and how many attempts failed since.
    added: float
    attempts: int = 0
    backoff_until: float = 0.0
    #: Plugins that rejected it last time (empty: unknown, any event may help).
    rejected_by: set[str] = field(default_factory=set)
    #: The last failure, for `describe`-style answers.
    message: str = ""
    #: When it last became ready to pop (entered the active heap), and how long it then
    #: waited there before its latest attempt.
    ready_at: float = 0.0
    waited: float = 0.0
    #: Queue bookkeeping.
    parked_at: float = 0.0
    cycle: int = 0
    changed: bool = False

    @property
    def key(self) -> str:
        """What the queue and the waiting room key the pod by: its uid
        (:attr:`PodInfo.pod_id`); ``info.key`` is its name."""
        return self.info.pod_id
