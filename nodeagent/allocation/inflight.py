"""The node's in-flight GPU pod, kept from a local watch of the node's pods.

Allocate must not cost an API round trip, so the agent keeps an :class:`Informer` over the
pods bound to its node and indexes those in ``vgpu.io/bind-phase: allocating`` as events
arrive. It also remembers which containers of such a pod were already allocated (on disk
too, :mod:`vgpu_nodeagent.allocation.progress`, so a restarted agent carries on), and
which pods it finished but whose phase patch the watch has not shown yet.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection

from vgpu import meta
from vgpu.annotations import PHASE_ALLOCATING
from vgpu.cluster.port import Obj
from vgpu.pods import bind_phase, is_terminated, pod_key
from vgpu_nodeagent.allocation.progress import ProgressFile


def uid_of(pod: Obj) -> str:
    return meta.uid(pod) or pod_key(pod)


def is_allocating(pod: Obj) -> bool:
    return (bind_phase(pod) == PHASE_ALLOCATING
            and not is_terminated(pod)
            and not meta.deleting(pod))


class InFlight:
    """Index of allocating pods plus the agent's own progress on them; thread-safe."""

    def __init__(self, progress: ProgressFile | None = None) -> None:
        self._cond = threading.Condition()
        self._allocating: dict[str, Obj] = {}
        self._progress = progress
        self._done: dict[str, set[str]] = progress.load() if progress is not None else {}
        self._finished: set[str] = set()

    # -- informer handler ------------------------------------------------------------------

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        with self._cond:
            if old is not None and (new is None or pod_key(old) != pod_key(new)):
                self._forget(old)
            if new is None:
                return
            key = pod_key(new)
            if is_allocating(new):
                # A dict keeps first-insertion order: the order this watch showed the
                # bindings, which is the kubelet's (it admits pods in its own watch's order
                # of the same writes), not the scheduler's bind-time.
                self._allocating[key] = new
            else:
                self._allocating.pop(key, None)
                uid = uid_of(new)
                self._finished.discard(uid)
                self._done.pop(uid, None)
            self._cond.notify_all()

    def _forget(self, pod: Obj) -> None:
        self._allocating.pop(pod_key(pod), None)
        uid = uid_of(pod)
        self._finished.discard(uid)
        self._done.pop(uid, None)

    # -- queries ---------------------------------------------------------------------------

    def _candidates(self) -> list[Obj]:
        return [p for p in self._allocating.values() if uid_of(p) not in self._finished]

    def current(self) -> list[Obj]:
        """Allocating pods the agent has not finished, in the order their bindings
        arrived."""
        with self._cond:
            return self._candidates()

    def wait(self, timeout: float) -> list[Obj]:
        """Like :meth:`current`, waiting up to ``timeout`` seconds for one to appear: the
        kubelet may call before this agent's watch has delivered the binding."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                pods = self._candidates()
                remaining = deadline - time.monotonic()
                if pods or remaining <= 0:
                    return pods
                self._cond.wait(remaining)

    def done(self, pod: Obj) -> frozenset[str]:
        with self._cond:
            return frozenset(self._done.get(uid_of(pod), ()))

    # -- progress --------------------------------------------------------------------------

    def mark_done(self, pod: Obj, containers: Collection[str]) -> None:
        """Record served containers; saved before the caller answers the kubelet."""
        with self._cond:
            uid = uid_of(pod)
            self._done.setdefault(uid, set()).update(containers)
            if self._progress is None:
                return
            # Entries of pods no longer allocating (finished, deleted while the agent was
            # down) are dropped here rather than on every watch event.
            live = {uid_of(p) for p in self._allocating.values()} | {uid}
            self._progress.save({u: names for u, names in self._done.items() if u in live})

    def finish(self, pod: Obj) -> bool:
        """The agent wrote (or is writing) this pod's final phase: stop offering it.
        False when it had finished the pod already."""
        with self._cond:
            uid = uid_of(pod)
            if uid in self._finished:
                return False
            self._finished.add(uid)
            self._cond.notify_all()
            return True
