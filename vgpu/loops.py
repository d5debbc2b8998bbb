"""No silent thread death: every long-running loop of every component survives what one of
its rounds raises, says so in the log with the traceback, and counts it; a loop that can
no longer run ends its thread, which the component's ``/healthz`` then reports, so the
kubelet restarts the pod instead of leaving a process that looks alive and does nothing
(issue 36: one bad Node annotation once ended the scheduling loop).

The tally is per process (one component per process) and reaches ``/metrics`` through
:class:`Collector` as ``<component>_loop_errors_total{loop=...}``.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric

from vgpu import logs
from vgpu.errors import VgpuError

_log = logs.get("vgpu.loops")
_lock = threading.Lock()
_errors: Counter[str] = Counter()


def record(loop: str) -> None:
    """Count one failure of ``loop`` (the caller has logged it)."""
    with _lock:
        _errors[loop] += 1


def errors() -> dict[str, int]:
    with _lock:
        return dict(_errors)


def survive(loop: str, round_: Callable[[], Any]) -> bool:
    """Run one round of ``loop``; a failure is logged with its traceback, counted, and
    survived. Returns whether the round completed."""
    try:
        round_()
    except Exception:
        _log.exception("loop round failed; going on", loop=loop)
        record(loop)
        return False
    return True


class LoopThread(threading.Thread):
    """A daemon thread running a loop; should the loop raise, the failure is logged and
    counted before the thread ends, and :attr:`failed` is what ``/healthz`` reports. A loop
    with nothing to do (a fake device file has no faults to watch) may simply return."""

    def __init__(self, name: str, target: Callable[[], None]) -> None:
        super().__init__(name=name, daemon=True)
        self._loop = target
        self.failed = False

    def run(self) -> None:
        try:
            self._loop()
        except Exception:
            self.failed = True
            _log.exception("loop ended by an error; the component is no longer healthy",
                           loop=self.name)
            record(self.name)


class Ended(VgpuError):
    """Raised by a loop that gives up: it can no longer do its job."""


def thread(name: str, target: Callable[[], None]) -> LoopThread:
    return LoopThread(name, target)


def dead(threads: list[threading.Thread]) -> list[str]:
    """The loops among ``threads`` that ended by an error (for ``/healthz``)."""
    return [t.name for t in threads if isinstance(t, LoopThread) and t.failed]


class Collector:
    """``<prefix>_loop_errors_total{loop}``: the failed rounds of each loop so far; the
    component's ``loops`` are shown from the start, at 0, so that an alert has a series to
    read before anything went wrong."""

    def __init__(self, prefix: str, loops: tuple[str, ...] = ()) -> None:
        self._name = f"{prefix}_loop_errors"
        self._loops = loops

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            self._name, "Rounds of a long-running loop that raised, were logged and survived "
            "(or ended the loop, which /healthz then reports)", labels=["loop"])
        counts = dict.fromkeys(self._loops, 0) | errors()
        for loop, count in sorted(counts.items()):
            family.add_metric([loop], count)
        yield family
