"""Denials as Events on the pod, so `vgpu why POD` can say why a pod does not exist.

A denied pod is never stored: the person who ran ``kubectl apply`` sees the message, but a
pod made by a controller (a Job, a Deployment) leaves only the controller's terse
``FailedCreate``. The webhook records a ``FailedAdmission`` Warning naming the pod (its
``generateName`` when it has no name yet) and the message. Off the admission path: one
worker thread sends them, a bounded queue drops the surplus, and a denial repeated within
``repeat_seconds`` (a controller retrying) is sent once.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from vgpu import logs
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.errors import ClusterError

_log = logs.get("vgpu.webhook.denials")

REASON = "FailedAdmission"
COMPONENT = "vgpu-webhook"


class DenialRecorder:
    def __init__(self, port: ClusterPort, *, repeat_seconds: float = 60.0,
                 max_queued: int = 1000, clock: Callable[[], float] = time.monotonic) -> None:
        self._port = port
        self._repeat = repeat_seconds
        self._clock = clock
        self._queue: queue.Queue[Obj | None] = queue.Queue(max_queued)
        self._recent: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, daemon=True,
                                        name="vgpu-webhook-denials")
        self._thread.start()

    def record(self, namespace: str, name: str, message: str) -> None:
        """Queue the Event; never blocks, never raises."""
        if not name:
            return
        key = (namespace, name, message)
        now = self._clock()
        with self._lock:
            last = self._recent.get(key)
            if last is not None and now - last < self._repeat:
                return
            self._recent[key] = now
            self._recent.move_to_end(key)
            while len(self._recent) > 10_000:
                self._recent.popitem(last=False)
        pod = {"kind": "Pod", "metadata": {"namespace": namespace, "name": name},
               "message": message}
        try:
            self._queue.put_nowait(pod)
        except queue.Full:
            _log.warning("too many denials queued; dropping the event", pod=name)

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            message = item.pop("message")
            try:
                self._port.record_event(item, "Warning", REASON, message, COMPONENT)
            except ClusterError as exc:
                _log.warning("could not record the denial", error=str(exc))
            except Exception:  # a bug here must not end recording for good
                _log.exception("recording a denial failed")
            finally:
                self._queue.task_done()

    def flush(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._queue.unfinished_tasks
