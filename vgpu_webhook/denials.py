"""Denials as Events on the pod, so `vgpu why POD` can say why a pod does not exist.

A denied pod is never stored: the person who ran ``kubectl apply`` sees the message, but a
pod made by a controller (a Job, a Deployment) leaves only the controller's terse
``FailedCreate``. The webhook records a ``FailedAdmission`` Warning naming the pod (its
``generateName`` when it has no name yet) and the message. Off the admission path: one
worker thread sends them, a bounded queue drops the surplus, and a denial repeated within
``repeat_seconds`` (a controller retrying) is sent once.

An Event is a write the webhook makes for whoever sent the review, so it writes them only
for what the API server sends (:func:`from_the_api_server`: the request's shape, never a
dry run, whose side effects must not happen) and at most ``per_second`` of them (a token
bucket of ``burst``): a pod that reaches the webhook's port with forged reviews cannot
make it write an Event on any pod of any namespace, or flood the API server with them.
"""

from __future__ import annotations

import queue
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from vgpu import logs
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.errors import ClusterError

_log = logs.get("vgpu.webhook.denials")

REASON = "FailedAdmission"
COMPONENT = "vgpu-webhook"
#: The API server's request uids: RFC 4122 UUIDs, as types.UID from uuid.NewUUID.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def from_the_api_server(request: Mapping[str, Any]) -> bool:
    """Whether a review looks as the API server sends one for a pod's creation: a UUID,
    an authenticated user, the pod's resource and namespace; and not a dry run. A forger
    can copy the shape (the NetworkPolicy keeps the port from pods); what it cannot copy
    is the rate, which :class:`DenialRecorder` bounds."""
    info = request.get("userInfo")
    resource = request.get("resource")
    obj = request.get("object")
    namespace = request.get("namespace")
    declared = obj.get("metadata", {}).get("namespace") if isinstance(obj, Mapping) else None
    return (isinstance(request.get("uid"), str) and bool(_UUID.fullmatch(request["uid"]))
            and isinstance(info, Mapping) and isinstance(info.get("username"), str)
            and bool(info["username"])
            and isinstance(resource, Mapping) and resource.get("group") == ""
            and resource.get("resource") == "pods"
            and isinstance(namespace, str) and bool(namespace)
            and declared in (None, "", namespace)
            and request.get("dryRun") is not True)


class _Bucket:
    """``rate`` tokens a second, at most ``burst`` saved; non-blocking."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self._rate, self._burst, self._clock = rate, burst, clock
        self._tokens, self._at = float(burst), clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


class DenialRecorder:
    def __init__(self, port: ClusterPort, *, repeat_seconds: float = 60.0,
                 max_queued: int = 1000, per_second: float = 5.0, burst: int = 50,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._port = port
        self._repeat = repeat_seconds
        self._clock = clock
        self._bucket = _Bucket(per_second, burst, clock)
        self.dropped = 0
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
            if not self._bucket.take():
                self.dropped += 1
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
