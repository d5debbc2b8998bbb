"""The per-decision figures the scheduling benches report, from the scheduler's listeners.

One recorder for the trace and the scale runs, so that both count a decision, and round
its figures, the same way.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from _support import percentile

if TYPE_CHECKING:
    from vgpu_scheduler.host.attempt_record import AttemptRecord
    from vgpu_scheduler.host.scheduler import Scheduler

#: Outcomes that are one pass of the scheduling algorithm (a pod skipped is none).
DECIDED = ("scheduled", "unschedulable", "waiting", "error")


class DecisionLog:
    """Append :meth:`listen` to ``Scheduler.listeners``; read :meth:`figures` after."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.failed_cpu: list[float] = []
        self.outcomes: dict[str, int] = {}

    def listen(self, d: AttemptRecord) -> None:
        self.outcomes[d.outcome] = self.outcomes.get(d.outcome, 0) + 1
        if d.outcome in DECIDED:
            self.wall.append(d.seconds)
            self.cpu.append(d.cpu_seconds)
            if d.outcome == "unschedulable":
                self.failed_cpu.append(d.cpu_seconds)

    def figures(self) -> dict[str, Any]:
        wall, cpu = self.wall, self.cpu
        return {
            "scheduled": self.outcomes.get("scheduled", 0),
            "unschedulable": self.outcomes.get("unschedulable", 0),
            # The scheduling loop's rate (binding runs off that thread in deployment).
            "decisions_per_s": round(len(wall) / sum(wall), 1),
            "decisions_per_cpu_s": round(len(cpu) / sum(cpu), 1),
            "decision_p50_ms": round(percentile(wall, 0.50) * 1e3, 3),
            "decision_p99_ms": round(percentile(wall, 0.99) * 1e3, 3),
            "decision_cpu_p50_ms": round(percentile(cpu, 0.50) * 1e3, 3),
            "decision_cpu_p99_ms": round(percentile(cpu, 0.99) * 1e3, 3),
            # A pod no node fits costs a diagnosis of every node and a preemption search.
            "unschedulable_cpu_p50_ms": round(statistics.median(self.failed_cpu) * 1e3, 3)
            if self.failed_cpu else None,
        }


@contextlib.contextmanager
def recording(scheduler: Scheduler) -> Iterator[DecisionLog]:
    """A :class:`DecisionLog` on a synced scheduler's decisions, run as a long-running
    scheduler runs after its initial sync: the objects that live for the whole run moved
    out of the cyclic collector's way first."""
    gc.collect()
    gc.freeze()
    log = DecisionLog()
    scheduler.listeners.append(log.listen)
    try:
        yield log
    finally:
        gc.unfreeze()
