"""Where binding cycles run: inline in the scheduling thread, or on a thread pool.

The seam for the real deployment: binding is one API round trip per pod, so the threaded
scheduler runs it off the scheduling thread, as kube-scheduler runs each binding cycle in
its own goroutine; scripts, tests and the simulator bind inline for determinism.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from vgpu import logs

_log = logs.get("vgpu.scheduler.binding")


class BindExecutor(Protocol):
    def submit(self, task: Callable[[], None]) -> None: ...

    def close(self, cancel: bool = False) -> None:
        """Stop: finish the queued bindings, or with ``cancel`` drop those not started (a
        replica that lost its Lease: they would be refused by its fence anyway, and the
        next leader treats what was in flight as in doubt)."""


class InlineBinder:
    def submit(self, task: Callable[[], None]) -> None:
        task()

    def close(self, cancel: bool = False) -> None:
        return None


class ThreadBinder:
    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vgpu-bind")

    def submit(self, task: Callable[[], None]) -> None:
        def guarded() -> None:
            try:
                task()
            except Exception:  # a bug in one binding must not kill the pool's thread
                _log.exception("binding task failed")

        self._pool.submit(guarded)

    def close(self, cancel: bool = False) -> None:
        self._pool.shutdown(wait=True, cancel_futures=cancel)
