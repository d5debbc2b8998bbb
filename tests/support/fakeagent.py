"""What the node agents do for the scheduler, for clusters without any: mark each pod the
scheduler bound (``bind-phase: allocating``) as allocated (``success``), which opens its
node's Permit gate for the next GPU pod.

A watch (the informer) sees the binding; a small thread pool sends the patches, so one
slow request does not hold up the others, as with one agent per node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import vgpu.annotations as ann
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import ClusterPort, Obj, Selector
from vgpu.errors import ClusterError

#: Called with (pod, seconds since the epoch) when the watch first shows a pod bound.
OnBound = Callable[[Obj, float], None]


class FakeAgents:
    def __init__(self, port: ClusterPort, namespace: str | None = None, *, workers: int = 8,
                 phase: str = ann.PHASE_SUCCESS, on_bound: OnBound | None = None,
                 enabled: bool = True, watch_timeout: float = 5.0) -> None:
        self.port = port
        self.phase = phase
        self.enabled = threading.Event()
        if enabled:
            self.enabled.set()
        self._on_bound = on_bound
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="fake-agent")
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self._held: list[Obj] = []
        self.marked = 0
        self.errors: list[str] = []
        self.informer = Informer(port, "pods", self._on_pod, Selector(namespace=namespace),
                                 watch_timeout=watch_timeout)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _on_pod(self, old: Obj | None, new: Obj | None) -> None:
        if new is None or not (new.get("spec") or {}).get("nodeName"):
            return
        meta = new.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        if (old is None or not (old.get("spec") or {}).get("nodeName")) and self._on_bound:
            self._on_bound(new, time.time())
        if (meta.get("annotations") or {}).get(ann.BIND_PHASE) != ann.PHASE_ALLOCATING:
            return
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
            if not self.enabled.is_set():
                self._held.append(new)
                return
        self._pool.submit(self._mark, new)

    def _mark(self, pod: Obj) -> None:
        meta = pod["metadata"]
        try:
            # As the node agent writes it: through the status subresource.
            self.port.patch_annotations("pods", meta["name"], {ann.BIND_PHASE: self.phase},
                                        meta["namespace"], status=True)
            with self._lock:
                self.marked += 1
        except ClusterError as exc:
            with self._lock:
                self.errors.append(f"{meta['namespace']}/{meta['name']}: {exc}")

    def enable(self) -> None:
        """Start marking, including the pods that were bound while disabled."""
        with self._lock:
            self.enabled.set()
            held, self._held = self._held, []
        for pod in held:
            self._pool.submit(self._mark, pod)

    def start(self) -> FakeAgents:
        self._thread = self.informer.start(self._stop, name="fake-agents")
        if not self.informer.synced.wait(30):
            raise TimeoutError("the fake agents' pod watch did not sync")
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._pool.shutdown(wait=True)

    def __enter__(self) -> FakeAgents:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
