"""The scheduling queue: active heap, backoff heap and unschedulable set.

As kube-scheduler's: pods pop from the active heap in QueueSort order (priority, then
arrival); a pod that failed waits out a backoff (initial × 2^(attempts-1), capped); a pod
that no node fits parks in the unschedulable set until a cluster event that could help it
arrives (the profile's ``could_help`` hints) or ``max_unschedulable`` passes. A pod whose
backoff has not run out when it is woken goes to the backoff heap, so a burst of events
cannot spin it. A preemptor whose victims' API calls are still running is held
(:meth:`SchedulingQueue.hold`, kube's PreEnqueue check ``IsPodRunningPreemption``): it stays
parked whatever wakes it, and what would have woken it takes effect when it is released.

Pods are keyed by uid (:attr:`PodInfo.pod_id`): a pod deleted and recreated under its name
is another pod. Thread-safe: informer threads add and move pods while the scheduling thread
pops.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

from vgpu_scheduler.framework.cluster_event import ClusterEvent
from vgpu_scheduler.framework.handle import Clock
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.host.queue_profile import Fifo, Profile
from vgpu_scheduler.host.queued_pod import POD_SPEC, QueuedPod


class SchedulingQueue:
    def __init__(self, clock: Clock, profile: Profile | None = None, *,
                 initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 max_unschedulable: float = 300.0) -> None:
        self._profile: Profile = profile or Fifo()
        self._clock = clock
        self._initial = initial_backoff
        self._max = max_backoff
        self._max_unschedulable = max_unschedulable
        self._cond = threading.Condition(threading.RLock())
        self._seq = itertools.count()
        self._active: list[tuple[tuple[Any, ...], int, QueuedPod]] = []
        self._active_keys: dict[str, QueuedPod] = {}
        self._backoff: list[tuple[float, int, QueuedPod]] = []
        self._backoff_keys: dict[str, QueuedPod] = {}
        self._unschedulable: dict[str, QueuedPod] = {}
        # Pods a PreEnqueue plugin keeps out (scheduling gates): never attempted until an
        # update of the pod passes.
        self._gated: dict[str, QueuedPod] = {}
        # Preemptors held while their victims' API calls run: whether something woke them
        # meanwhile.
        self._held: dict[str, bool] = {}
        # Pods popped and not yet settled, and the cycle of the last event that moved pods:
        # a pod failing in a cycle that started before such an event is retried instead of
        # parked, so that an event landing mid-cycle is not lost.
        self._in_flight: dict[str, QueuedPod] = {}
        self._cycle = 0
        self._move_cycle = -1
        self._closed = False
        self._interrupted = False

    def use(self, profile: Profile) -> None:
        """Order, admit and wake pods as ``profile`` says. The scheduler builds its queue
        before its profile (the profile's plugins reach the queue through the nominator and
        the waiting room) and hands the profile over here, before any pod is added."""
        self._profile = profile

    # -- adding ----------------------------------------------------------------------------

    def _push_active(self, qp: QueuedPod, *, still_ready: bool = False) -> None:
        seq = next(self._seq)
        if not still_ready:
            qp.ready_at = self._clock()
        heapq.heappush(self._active, (self._profile.sort_key(qp.info, seq), seq, qp))
        self._active_keys[qp.key] = qp
        self._cond.notify()

    def _push_backoff(self, qp: QueuedPod) -> None:
        heapq.heappush(self._backoff, (qp.backoff_until, next(self._seq), qp))
        self._backoff_keys[qp.key] = qp

    def _detach(self, key: str) -> QueuedPod | None:
        """Take a pod out of wherever it waits (heaps are cleaned lazily)."""
        return (self._active_keys.pop(key, None) or self._backoff_keys.pop(key, None)
                or self._unschedulable.pop(key, None) or self._gated.pop(key, None))

    def add(self, info: PodInfo) -> None:
        """A new pending pod, or a changed one: it goes (back) to the active heap at once."""
        with self._cond:
            # A pod updated while it waits in the active heap keeps its wait so far.
            was_active = info.pod_id in self._active_keys
            old = self._detach(info.pod_id)
            if info.pod_id in self._in_flight:
                # Being scheduled right now; the new version replaces it when it settles.
                self._in_flight[info.pod_id].info = info
                self._in_flight[info.pod_id].changed = True
                return
            qp = old or QueuedPod(info, self._clock())
            qp.info = info
            if info.pod_id in self._held:
                self._park_held(qp)
                return
            if not self._profile.pre_enqueue(info).ok:
                self._gated[info.pod_id] = qp
                return
            self._push_active(qp, still_ready=was_active)

    def delete(self, key: str) -> None:
        with self._cond:
            self._detach(key)
            self._in_flight.pop(key, None)
            self._held.pop(key, None)

    def __contains__(self, key: str) -> bool:
        with self._cond:
            return (key in self._active_keys or key in self._backoff_keys
                    or key in self._unschedulable or key in self._in_flight
                    or key in self._gated)

    # -- popping ---------------------------------------------------------------------------

    def pop(self, timeout: float | None = 0.0) -> QueuedPod | None:
        """The next pod to schedule; waits up to ``timeout`` seconds (None: until one comes
        or the queue is closed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                self.flush()
                while self._active:
                    _, _, qp = heapq.heappop(self._active)
                    if self._active_keys.get(qp.key) is qp:
                        del self._active_keys[qp.key]
                        self._cycle += 1
                        qp.cycle = self._cycle
                        qp.changed = False
                        qp.waited = max(self._clock() - qp.ready_at, 0.0)
                        self._in_flight[qp.key] = qp
                        return qp
                if self._closed or self._interrupted:
                    self._interrupted = False
                    return None
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    return None
                upcoming = self.next_backoff()
                if upcoming is not None:
                    until = max(upcoming - self._clock(), 0.001)
                    wait = until if wait is None else min(wait, until)
                self._cond.wait(wait)

    def interrupt(self) -> None:
        """Make a waiting ``pop`` return now (the scheduler has other work)."""
        with self._cond:
            self._interrupted = True
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- settling a popped pod -------------------------------------------------------------

    def done(self, key: str) -> None:
        """The pod was bound (or is waiting at Permit): it leaves the queue."""
        with self._cond:
            self._in_flight.pop(key, None)

    def _backoff_for(self, attempts: int) -> float:
        # The doubling stops long past any cap: a pod parked for weeks and woken by every
        # deletion (the simulator's churn replay) reached 1,025 attempts, and the float
        # product of 2**1024 overflows.
        doublings = min(max(attempts - 1, 0), 64)
        return float(min(self._initial * (2 ** doublings), self._max))

    def requeue(self, qp: QueuedPod, *, unschedulable: bool, rejected_by: set[str] | None = None,
                message: str = "") -> None:
        """A failed attempt: park the pod as unschedulable, or back it off (errors, or an
        event that could help arrived while it was being scheduled)."""
        now = self._clock()
        with self._cond:
            current = self._in_flight.pop(qp.key, None)
            if current is None:
                return  # deleted while it was being scheduled
            current.attempts += 1
            current.backoff_until = now + self._backoff_for(current.attempts)
            current.rejected_by = set(rejected_by or ())
            current.message = message
            if current.key in self._held:
                self._park_held(current, woken=current.changed
                                or self._move_cycle >= current.cycle)
            elif current.changed:
                # The pod itself changed meanwhile: the new version deserves a try at once.
                self._push_active(current)
            elif unschedulable and self._move_cycle < current.cycle:
                current.parked_at = now
                self._unschedulable[current.key] = current
            else:
                self._push_backoff(current)

    def readd_failed(self, qp: QueuedPod, message: str) -> None:
        """A pod that had left the queue (waiting at Permit, or binding) failed: back off."""
        now = self._clock()
        with self._cond:
            if self._detach(qp.key) is None and qp.key in self._in_flight:
                return
            qp.attempts += 1
            qp.backoff_until = now + self._backoff_for(qp.attempts)
            qp.message = message
            qp.rejected_by = set()
            if qp.key in self._held:
                self._park_held(qp)
                return
            self._push_backoff(qp)

    # -- moving ----------------------------------------------------------------------------

    def flush(self) -> None:
        """Backoffs that ran out go active; pods parked too long are retried."""
        now = self._clock()
        with self._cond:
            while self._backoff and self._backoff[0][0] <= now:
                _, _, qp = heapq.heappop(self._backoff)
                if self._backoff_keys.get(qp.key) is qp:
                    del self._backoff_keys[qp.key]
                    self._push_active(qp)
            # Parked pods are kept in parking order, so the stale ones are a prefix.
            stale = []
            for qp in self._unschedulable.values():
                if now - qp.parked_at < self._max_unschedulable:
                    break
                stale.append(qp)
            for qp in stale:
                if qp.key in self._held:
                    self._held[qp.key] = True
                    continue
                del self._unschedulable[qp.key]
                self._wake(qp, now)

    def _wake(self, qp: QueuedPod, now: float) -> None:
        if qp.backoff_until > now:
            self._push_backoff(qp)
        else:
            self._push_active(qp)

    def on_event(self, event: ClusterEvent | None) -> int:
        """Wake the unschedulable pods ``event`` could help (None: nothing happened);
        returns how many moved. A pod whose own spec failed waits for an update of it."""
        if event is None:
            return 0
        now = self._clock()
        could_help = self._profile.could_help
        with self._cond:
            self._move_cycle = self._cycle
            moved = [qp for qp in self._unschedulable.values()
                     if POD_SPEC not in qp.rejected_by
                     and could_help(qp.info, qp.rejected_by, event)]
            for qp in moved:
                if qp.key in self._held:
                    self._held[qp.key] = True
                    continue
                del self._unschedulable[qp.key]
                self._wake(qp, now)
            return len(moved)

    # -- preemptors ------------------------------------------------------------------------

    def hold(self, key: str) -> None:
        """Keep the pod from being tried until :meth:`release`: the API calls of its
        preemption are running (wherever it is now, it parks as unschedulable)."""
        with self._cond:
            self._held[key] = False
            qp = self._detach(key)
            if qp is not None:
                self._park_held(qp)

    def _park_held(self, qp: QueuedPod, *, woken: bool = True) -> None:
        self._unschedulable[qp.key] = qp
        qp.parked_at = self._clock()
        if woken:
            self._held[qp.key] = True

    def release(self, key: str, failed: str | None = None) -> None:
        """The held pod's preemption calls are done. It is tried again at once if
        something woke it meanwhile, else it waits for what can help it (its victims
        leaving), with no backoff: the attempt made room, which stays idle, held for it,
        until it is tried (kube-scheduler v1.20 moves it to the active queue when its own
        nomination's update arrives). ``failed``: the calls failed, and it is tried again
        after a backoff, with that message."""
        now = self._clock()
        with self._cond:
            woken = self._held.pop(key, None)
            qp = self._unschedulable.get(key)
            if woken is None or qp is None:
                return  # deleted meanwhile, or never parked (the attempt is not settled)
            if failed is not None:
                del self._unschedulable[key]
                qp.attempts += 1
                qp.backoff_until = now + self._backoff_for(qp.attempts)
                qp.message = failed
                qp.rejected_by = set()
                self._push_backoff(qp)
            else:
                qp.backoff_until = min(qp.backoff_until, now)
                if woken:
                    del self._unschedulable[key]
                    self._wake(qp, now)

    def preempting(self) -> int:
        """Pods held while their preemption's API calls run."""
        with self._cond:
            return len(self._held)

    # -- introspection ---------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        with self._cond:
            return {"active": len(self._active_keys), "backoff": len(self._backoff_keys),
                    "unschedulable": len(self._unschedulable),
                    "in_flight": len(self._in_flight)}

    def gated(self) -> int:
        """Pods a PreEnqueue plugin keeps out of the queue (scheduling gates)."""
        with self._cond:
            return len(self._gated)

    def next_backoff(self) -> float | None:
        """When the earliest backed-off pod becomes active (for a stepping driver)."""
        with self._cond:
            while self._backoff and self._backoff_keys.get(self._backoff[0][2].key) is not (
                    self._backoff[0][2]):
                heapq.heappop(self._backoff)
            return self._backoff[0][0] if self._backoff else None

    def unschedulable(self) -> Iterator[QueuedPod]:
        with self._cond:
            return iter(list(self._unschedulable.values()))

    def get(self, key: str) -> QueuedPod | None:
        with self._cond:
            return (self._active_keys.get(key) or self._backoff_keys.get(key)
                    or self._unschedulable.get(key) or self._in_flight.get(key)
                    or self._gated.get(key))
