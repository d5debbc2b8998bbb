"""The scheduler's threaded loop, for the real deployment: informers in threads, the
scheduling loop in the caller's thread, bindings on a pool."""

from __future__ import annotations

import gc
import threading
import time
from typing import TYPE_CHECKING

from vgpu import logs
from vgpu_scheduler.host.binding import InlineBinder, ThreadBinder

if TYPE_CHECKING:
    from vgpu_scheduler.host.scheduler import Scheduler

_log = logs.get("vgpu.scheduler")


def _wait_synced(sched: Scheduler, stop: threading.Event, sync_timeout: float | None) -> None:
    waited = 0.0
    while not sched.synced() and not stop.is_set():
        stop.wait(0.05)
        waited += 0.05
        if sync_timeout is not None and waited >= sync_timeout:
            _log.warning("informers not synced yet; not scheduling until they are",
                         seconds=round(waited))
            waited = 0.0


def run(sched: Scheduler, stop: threading.Event, *, watch_timeout: float = 1.0,
        sync_timeout: float | None = 60.0, leading: threading.Event | None = None) -> None:
    """Schedule until ``stop`` is set.

    Nothing is scheduled before every informer has listed: a decision on a partial view of
    the pods could hand out a GPU slice a running pod holds. With ``leading`` (leader
    election), the informers run from the start but the loop schedules only while it is
    set, and returns as soon as it is cleared.
    """
    threads = sched.start_informers(stop, watch_timeout=watch_timeout)
    _wait_synced(sched, stop, sync_timeout)
    # The listed pods' changes are folded into their nodes at the first read: do it now,
    # so that the first decision does not pay for it and the result is frozen below.
    sched.cache.update_snapshot(sched.snapshot)
    # Everything listed so far lives as long as the process: keep it out of the cyclic
    # collector's full passes, which otherwise stall a cycle for tens of milliseconds.
    gc.collect()
    gc.freeze()
    while leading is not None and not leading.is_set() and not stop.is_set():
        leading.wait(0.2)
    workers = sched.config.scheduler.bind_workers
    if workers > 0 and isinstance(sched.binder, InlineBinder):
        sched.binder = ThreadBinder(workers)

    def go_on() -> bool:
        return not stop.is_set() and (leading is None or leading.is_set())

    def stopper_main() -> None:
        while not stop.wait(0.2):
            if leading is not None and not leading.is_set():
                break
        sched.queue.interrupt()

    threading.Thread(target=stopper_main, daemon=True, name="vgpu-scheduler-stop").start()
    _log.info("scheduler running", nodes=len(sched.cache))
    try:
        while go_on():
            sched.step(go_on)
    finally:
        sched.binder.close()
        if stop.is_set():
            # A watch notices the stop when its request ends; the threads are daemons, so
            # a process that exits does not wait for a long watch.
            deadline = time.monotonic() + min(watch_timeout + 1, 3.0)
            for thread in threads:
                thread.join(timeout=max(deadline - time.monotonic(), 0.0))
