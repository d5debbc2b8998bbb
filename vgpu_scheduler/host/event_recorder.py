"""Events off the scheduling path, and not too many of them.

A pod that fits nowhere is retried after every cluster change that could help it, and
each attempt would record a ``FailedScheduling`` event: one API write per retry, per pod.
:class:`EventLimiter` lets the first event of a kind through at once and spaces out
repeats exponentially: the same message again only after ``base`` seconds, then twice
that, up to ``cap``; a different message after at least ``base`` seconds (a pod whose
counts keep shifting is not news every second). :class:`RecordingPort` wraps the
cluster port so that ``record_event`` only queues the event: one worker thread sends
them, so neither the scheduling loop nor a binding waits for an event's round trip,
and when the API server is too slow to take them the oldest news is dropped, not the
scheduler's memory.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vgpu import logs, meta
from vgpu.cluster.fence import FencedError
from vgpu.cluster.port import ALL, ClusterPort, Kind, ListResult, Obj, Selector, WatchEvent
from vgpu.errors import ClusterError

_log = logs.get("vgpu.scheduler.events")

EventType = Literal["Normal", "Warning"]
#: What became of an event: sent, limited (a repeat held back), dropped (queue full),
#: failed (the API refused it).
OUTCOMES = ("sent", "limited", "dropped", "failed")


@dataclass
class _Last:
    message: str
    sent: float
    interval: float


class EventLimiter:
    """Per object and reason: which events go out (pure but for the injected clock)."""

    def __init__(self, base: float = 10.0, cap: float = 600.0, max_keys: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.base = base
        self.cap = max(cap, base)
        self._max_keys = max_keys
        self._clock = clock
        self._last: OrderedDict[tuple[str, str], _Last] = OrderedDict()
        self._lock = threading.Lock()

    def allow(self, obj: str, reason: str, message: str) -> bool:
        now = self._clock()
        key = (obj, reason)
        with self._lock:
            last = self._last.get(key)
            if last is None:
                self._last[key] = _Last(message, now, self.base)
                if len(self._last) > self._max_keys:
                    self._last.popitem(last=False)
                return True
            self._last.move_to_end(key)
            if message != last.message:
                if now - last.sent < self.base:
                    return False
                last.message, last.sent, last.interval = message, now, self.base
                return True
            if now - last.sent < last.interval:
                return False
            last.sent = now
            last.interval = min(last.interval * 2, self.cap)
            return True

    def forget(self, obj: str, reasons: tuple[str, ...]) -> None:
        """The object will not be reported on again for ``reasons`` (bound, deleted)."""
        with self._lock:
            for reason in reasons:
                self._last.pop((obj, reason), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._last)


def object_key(obj: Obj) -> str:
    return meta.uid(obj) or f"{meta.namespace(obj)}/{meta.name(obj)}"


Outcome = Callable[[str], None]


class RecordingPort:
    """A cluster port whose ``record_event`` is limited and sent from a worker thread.

    ``events`` is the port the events go through: give it a connection of its own (its
    own client-side rate limit), so that a burst of events never delays a binding.
    """

    def __init__(self, inner: ClusterPort, events: ClusterPort | None = None, *,
                 limiter: EventLimiter | None = None, max_queued: int = 10_000,
                 outcome: Outcome | None = None) -> None:
        self.inner = inner
        self._events = events or inner
        self.limiter = limiter if limiter is not None else EventLimiter()
        self._queue: queue.Queue[tuple[Obj, EventType, str, str, str] | None] = queue.Queue(
            max_queued)
        self.outcome: Outcome = outcome or (lambda _: None)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- the port, passed through ----------------------------------------------------------

    def list(self, kind: Kind, selector: Selector = ALL) -> ListResult:
        return self.inner.list(kind, selector)

    def watch(self, kind: Kind, resource_version: str, selector: Selector = ALL,
              timeout_seconds: float = 30.0) -> Iterator[WatchEvent]:
        return self.inner.watch(kind, resource_version, selector, timeout_seconds)

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj:
        return self.inner.get(kind, name, namespace)

    def create(self, kind: Kind, obj: Obj) -> Obj:
        return self.inner.create(kind, obj)

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        self.inner.delete(kind, name, namespace)

    def replace(self, kind: Kind, obj: Obj) -> Obj:
        return self.inner.replace(kind, obj)

    def patch_annotations(self, kind: Kind, name: str, annotations: Mapping[str, str | None],
                          namespace: str | None = None,
                          resource_version: str | None = None, *, uid: str = "",
                          status: bool = False,
                          conditions: Sequence[Mapping[str, str]] = ()) -> Obj:
        return self.inner.patch_annotations(kind, name, annotations, namespace,
                                            resource_version, uid=uid, status=status,
                                            conditions=conditions)

    def bind(self, namespace: str, name: str, node: str,
             annotations: Mapping[str, str], *, uid: str = "") -> None:
        self.inner.bind(namespace, name, node, annotations, uid=uid)

    def patch_status(self, kind: Kind, name: str, status: Mapping[str, Any],
                     namespace: str | None = None) -> Obj:
        return self.inner.patch_status(kind, name, status, namespace)

    def evict(self, namespace: str, name: str, *, uid: str = "") -> None:
        self.inner.evict(namespace, name, uid=uid)

    def pod_disruption_conditions(self) -> bool:
        return self.inner.pod_disruption_conditions()

    # -- events ----------------------------------------------------------------------------

    def record_event(self, obj: Obj, event_type: EventType, reason: str, message: str,
                     component: str) -> None:
        key = object_key(obj)
        if not self.limiter.allow(key, reason, message):
            self.outcome("limited")
            return
        if reason == "Scheduled":
            # The pod's story ends here; its entries would only wait for eviction.
            self.limiter.forget(key, ("FailedScheduling", "Scheduled"))
        try:
            self._queue.put_nowait((obj, event_type, reason, message, component))
        except queue.Full:
            self.outcome("dropped")
            return
        self._ensure_worker()

    def _ensure_worker(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, daemon=True,
                                                name="vgpu-scheduler-events")
                self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._send(*item)
            finally:
                self._queue.task_done()

    def _send(self, obj: Obj, event_type: EventType, reason: str, message: str,
              component: str) -> None:
        try:
            self._events.record_event(obj, event_type, reason, message, component)
            self.outcome("sent")
        except (ClusterError, FencedError) as exc:
            # Fenced: a replica that may no longer lead tells nobody what it decided.
            self.outcome("failed")
            _log.warning("could not record event", reason=reason, error=str(exc))
        except Exception:  # a bug here must not end event recording for good
            self.outcome("failed")
            _log.exception("recording an event failed", reason=reason)

    def pending(self) -> int:
        return self._queue.qsize()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued event was sent (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._queue.unfinished_tasks

    def close(self, timeout: float = 2.0) -> None:
        """Send what is queued (within ``timeout``) and stop the worker."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        thread.join(timeout)
