"""The bind-phase writes still to go, one queue per pod (issue 50): when each pod's next
attempt is due, how long it backs off, and how long its first write has been waiting.

Pure bookkeeping on a clock the caller passes; :class:`~.phases.PhaseWriter` holds the
lock and does the I/O. A pod's updates go out in the order they were submitted, one attempt
at a time; another pod's never wait for them. A failed attempt backs that pod off, doubling
from :data:`FIRST_BACKOFF` up to the cap, and it is tried again for as long as the pod
lives: only its deletion (or another pod taking its name) ends its queue.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

#: The first back-off of a pod whose write failed, in seconds.
FIRST_BACKOFF = 0.05


@dataclass(frozen=True)
class PhaseUpdate:
    """One pod's bind-phase patch."""

    namespace: str
    name: str
    phase: str
    reason: str | None = None
    #: More annotations for the same patch (the allocation record).
    extra: Mapping[str, str] = field(default_factory=dict)
    #: The pod's uid: the patch is for this pod only, never a successor of the name.
    uid: str = ""
    #: Pod conditions set in the same write (the served record, :mod:`vgpu.served`).
    conditions: tuple[Mapping[str, str], ...] = ()

    @property
    def pod(self) -> str:
        return f"{self.namespace}/{self.name}"


def key_of(update: PhaseUpdate) -> str:
    """What a pod's queue is keyed by: its uid (a successor of its name is another pod),
    else namespace/name."""
    return update.uid or f"{update.namespace}/{update.name}"


@dataclass
class _Pod:
    updates: deque[PhaseUpdate]
    #: When the oldest update still to go was submitted.
    since: float
    due: float
    backoff: float = FIRST_BACKOFF
    in_flight: bool = False
    attempts: int = 0
    last_error: str = ""
    #: Reported as pending past the bound (once per update at the head).
    reported: bool = False


@dataclass(frozen=True)
class Overdue:
    """A pod whose write has waited past the bound: its head update, for how long, and how
    its last attempt failed."""

    update: PhaseUpdate
    waited: float
    attempts: int
    last_error: str


@dataclass
class PendingWrites:
    max_backoff: float
    _pods: dict[str, _Pod] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._pods)

    def add(self, update: PhaseUpdate, now: float) -> None:
        pod = self._pods.get(key_of(update))
        if pod is None:
            self._pods[key_of(update)] = _Pod(deque([update]), since=now, due=now)
        else:
            pod.updates.append(update)

    def take_due(self, now: float) -> list[tuple[str, PhaseUpdate]]:
        """The head update of every pod whose attempt is due and none is in flight; they
        are in flight from now until :meth:`written`, :meth:`gone` or :meth:`failed`."""
        out = []
        for key, pod in self._pods.items():
            if not pod.in_flight and pod.due <= now:
                pod.in_flight = True
                out.append((key, pod.updates[0]))
        return out

    def next_due(self) -> float | None:
        """When the next attempt not in flight is due (None: none waits)."""
        return min((p.due for p in self._pods.values() if not p.in_flight), default=None)

    def written(self, key: str, now: float) -> None:
        """The pod's head update landed: the next one (if any) goes at once."""
        pod = self._pods.get(key)
        if pod is None:
            return
        pod.updates.popleft()
        if not pod.updates:
            del self._pods[key]
            return
        pod.in_flight, pod.due, pod.since = False, now, now
        pod.backoff, pod.attempts, pod.last_error, pod.reported = FIRST_BACKOFF, 0, "", False

    def gone(self, key: str) -> None:
        """The pod is gone, or another pod has its name: nothing more is written for it."""
        self._pods.pop(key, None)

    def failed(self, key: str, now: float, error: str) -> float:
        """The attempt failed: the pod is tried again after its back-off (returned), which
        doubles for the next time."""
        pod = self._pods.get(key)
        if pod is None:
            return 0.0
        pod.in_flight = False
        pod.attempts += 1
        pod.last_error = error
        wait = pod.backoff
        pod.due = now + wait
        pod.backoff = min(pod.backoff * 2, self.max_backoff)
        return wait

    def overdue(self, now: float, bound: float) -> list[Overdue]:
        """Pods whose head update has waited longer than ``bound``, each once."""
        out = []
        for pod in self._pods.values():
            if not pod.reported and now - pod.since > bound:
                pod.reported = True
                out.append(Overdue(pod.updates[0], now - pod.since, pod.attempts,
                                   pod.last_error))
        return out

    def counts(self, now: float, bound: float) -> tuple[int, int]:
        """Pods with a write still to go, and how many of them wait longer than ``bound``."""
        late = sum(1 for p in self._pods.values() if now - p.since > bound)
        return len(self._pods), late
