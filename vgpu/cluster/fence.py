"""Fencing: no side effect from a replica that may no longer hold its Lease.

Leader election alone does not stop a paused leader (a long GC pause, a frozen VM,
SIGSTOP) from acting when it wakes: its threads run again in whatever order, and a
scheduling loop that is faster than the lease check sends a Binding for a leader that
lost the Lease seconds ago (issue 36, case 2). A :class:`Fence` is checked immediately
before each write leaves the process: the write goes only if the Lease was renewed within
the renew deadline *by the local monotonic clock*, which keeps counting while the
process is stopped, so a process that wakes from a pause finds the check failed.

The time of a renewal is taken before its request is sent, so a renewal that was slow to
answer never extends the fence past what the other replicas see in the Lease.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from vgpu.errors import VgpuError


class FencedError(VgpuError):
    """A side effect refused before it was sent: this replica may no longer lead. Nothing
    reached the API server, so the caller has nothing to check or undo."""


class Fence:
    """Held from a successful renewal until ``renew_deadline`` seconds after it (local
    monotonic time), or until :meth:`lose`."""

    def __init__(self, renew_deadline: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._deadline = renew_deadline
        self._clock = clock
        self._lock = threading.Lock()
        self._renewed: float | None = None

    def renewed(self, sent_at: float) -> None:
        """A renewal sent at ``sent_at`` (this fence's clock) succeeded."""
        with self._lock:
            if self._renewed is None or sent_at > self._renewed:
                self._renewed = sent_at

    def lose(self) -> None:
        with self._lock:
            self._renewed = None

    def held(self) -> bool:
        with self._lock:
            renewed = self._renewed
        return renewed is not None and self._clock() - renewed < self._deadline

    def check(self, what: str) -> None:
        """Raise :class:`FencedError` unless the fence is held now."""
        if not self.held():
            raise FencedError(f"{what}: not sent, this replica's lease was not renewed within "
                              f"{self._deadline:g} s (it may have been paused, or lost it)")


class OpenFence(Fence):
    """The fence of a replica that runs without leader election: always held."""

    def __init__(self) -> None:
        super().__init__(float("inf"))

    def held(self) -> bool:
        return True
