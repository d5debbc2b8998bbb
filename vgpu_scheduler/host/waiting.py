"""Pods held at Permit, each with its reservation, until every waiting plugin lets it go.

A Permit plugin that answers WAIT (the node's allocation gate) later calls
``handle.allow`` or ``handle.reject`` from whatever thread learns the news (an informer,
a tick); the scheduling loop then settles the pod: bind it, or undo its reservation. The
room only keeps the bookkeeping, thread-safe; the loop does the work. Pods are keyed by
uid (:attr:`QueuedPod.key`), as the gate that allows them is.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.host.pod_records import PodRecord
from vgpu_scheduler.host.queued_pod import QueuedPod

#: The rejection reason of a waiting pod that was deleted: nothing to report or retry.
DELETED = "pod deleted"


@dataclass
class Waiting:
    qp: QueuedPod
    state: CycleState
    node: str
    pending: set[str]
    #: The cache's assumption of the pod on ``node``, to bind or forget.
    assumed: PodRecord


@dataclass(frozen=True)
class Settled:
    """A waiting pod's outcome: allowed (bind it) or rejected for ``reason``."""

    waiting: Waiting
    allowed: bool
    reason: str = ""


class WaitingRoom:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, Waiting] = {}
        self._ready: deque[str] = deque()
        self._rejected: deque[tuple[str, str]] = deque()

    def hold(self, waiting: Waiting) -> None:
        with self._lock:
            self._waiting[waiting.qp.key] = waiting

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._waiting

    def nodes(self) -> dict[str, str]:
        """Pods held, by ``namespace/name``, with the node each waits for."""
        with self._lock:
            return {w.qp.info.key: w.node for w in self._waiting.values()}

    def allow(self, key: str, plugin: str) -> bool:
        """``plugin`` lets the pod go; True when it was the last one holding it."""
        with self._lock:
            waiting = self._waiting.get(key)
            if waiting is None:
                return False
            waiting.pending.discard(plugin)
            if waiting.pending:
                return False
            self._ready.append(key)
            return True

    def reject(self, key: str, reason: str) -> bool:
        """Fail a held pod; False when it is not held."""
        with self._lock:
            if key not in self._waiting:
                return False
            self._rejected.append((key, reason))
            return True

    def reject_node(self, node: str, reason: str) -> None:
        """Fail every pod held for ``node`` (the node is gone)."""
        with self._lock:
            for key, waiting in self._waiting.items():
                if waiting.node == node:
                    self._rejected.append((key, reason))

    def settle(self) -> Iterator[Settled]:
        """Pods decided since the last call, rejections first; each comes out once."""
        while True:
            with self._lock:
                if self._rejected:
                    key, reason = self._rejected.popleft()
                    allowed = False
                elif self._ready:
                    key, reason, allowed = self._ready.popleft(), "", True
                else:
                    return
                waiting = self._waiting.pop(key, None)
            if waiting is not None:
                yield Settled(waiting, allowed, reason)
