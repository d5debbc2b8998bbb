"""One scheduling attempt or binding, as the listeners of the scheduler (its metrics, the
simulator, the benches) see it, and the two clocks that time it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

Outcome = Literal["scheduled", "waiting", "unschedulable", "error", "bound", "bind-failed",
                  "bind-conflict", "bind-in-doubt"]


@dataclass(frozen=True)
class AttemptRecord:
    """One scheduling attempt, as listeners (metrics, the simulator) see it."""

    pod: str
    node: str | None
    outcome: Outcome
    message: str = ""
    #: Wall-clock and CPU time (of the scheduling thread) the attempt took.
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    #: How long the pod waited in the active queue before this attempt (attempts only).
    queued: float = 0.0


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.thread_time()


def since(started: tuple[float, float]) -> tuple[float, float]:
    return time.perf_counter() - started[0], time.thread_time() - started[1]
