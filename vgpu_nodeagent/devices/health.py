"""GPU health after faults: unhealthy at once, healthy again after a quiet period.

A GPU that reported a device fault is unhealthy until ``quiet_seconds`` pass without a
further fault; a fault during the quiet period starts it again. The clock is injected so
the state machine is tested without sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

Clock = Callable[[], float]


class HealthTracker:
    def __init__(self, quiet_seconds: float, clock: Clock = time.monotonic) -> None:
        self._quiet = quiet_seconds
        self._clock = clock
        self._last_fault: dict[str, float] = {}
        self._lock = threading.Lock()

    def fault(self, uuids: Iterable[str]) -> None:
        """Record a device fault on each of ``uuids`` now."""
        now = self._clock()
        with self._lock:
            for uuid in uuids:
                self._last_fault[uuid] = now

    def unhealthy(self) -> frozenset[str]:
        """UUIDs still inside their quiet period; the others are forgotten."""
        now = self._clock()
        with self._lock:
            for uuid, when in list(self._last_fault.items()):
                if now - when >= self._quiet:
                    del self._last_fault[uuid]
            return frozenset(self._last_fault)
