"""One scheduling attempt and one binding cycle, as kube-scheduler's ``schedule_one``.

The scheduling cycle runs in the loop's thread: snapshot, the framework's algorithm,
Reserve (the vGPU plugin leaves the pod's GPU slices in the cycle state), then the cache
assumes the pod with those slices on the chosen node, then Permit. A pod Permit holds waits
in the :mod:`.waiting` room; any other goes to binding, inline or on the pool. A failure
at any step undoes the steps before it and sends the pod back to the queue with the
reason; every outcome is reported to the listeners as an :class:`AttemptRecord`.

Two races are settled as kube-scheduler settles them, and two more carefully: a pod the
watch showed bound during its cycle is not assumed (nothing forgotten); a failed binding
undoes only the assumption it made; a pod whose chosen GPUs filled up during its cycle is
not assumed either, but tried again at once; a binding that came back 409 or unanswered is
checked against the pod as the API server has it (:mod:`.bind_check`) before anything is
forgotten, and one whose answer was lost keeps its room until it cannot land
(:mod:`.in_doubt`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from vgpu import logs, loops
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.errors import ClusterError, NotFoundError
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.diagnosis import Diagnosis, summarize
from vgpu_scheduler.framework.handle import Clock
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.runtime import Framework
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import Code, Status
from vgpu_scheduler.host.attempt_record import AttemptRecord, Outcome, clocks, since
from vgpu_scheduler.host.bind_check import Verdict, judge
from vgpu_scheduler.host.binding import BindExecutor
from vgpu_scheduler.host.cache import Cache
from vgpu_scheduler.host.in_doubt import InDoubt
from vgpu_scheduler.host.pod_records import PodRecord
from vgpu_scheduler.host.preemptions import PreemptionRunner
from vgpu_scheduler.host.queue import SchedulingQueue
from vgpu_scheduler.host.queued_pod import POD_SPEC, QueuedPod
from vgpu_scheduler.host.room import Refused
from vgpu_scheduler.host.waiting import DELETED, Waiting, WaitingRoom

_log = logs.get("vgpu.scheduler")

COMPONENT = "vgpu-scheduler"

class Watched(Protocol):
    def still_pending(self, pod: PodInfo) -> bool:
        """Whether the pod, as the watch last showed it, still waits for a node."""


class ScheduleOne:
    """The attempt, binding and settling steps over the scheduler's parts."""

    def __init__(self, framework: Framework, snapshot: Snapshot, *, cache: Cache,
                 queue: SchedulingQueue, waiting: WaitingRoom, watched: Watched,
                 cluster: ClusterPort | None, clock: Clock, binder: BindExecutor,
                 preemptions: PreemptionRunner | None = None,
                 listeners: list[Callable[[AttemptRecord], None]],
                 in_doubt_seconds: float = 35.0, scheduled_events: bool = True) -> None:
        self._framework = framework
        self._snapshot = snapshot
        self._cache = cache
        self._queue = queue
        self._waiting = waiting
        self._watched = watched
        self._cluster = cluster
        self._clock = clock
        #: Where binding cycles run; the threaded loop swaps in a pool.
        self.binder = binder
        self._preemptions = preemptions
        self._listeners = listeners
        self._in_doubt_seconds = in_doubt_seconds
        # The Binding carries what a Scheduled event says: one write a pod, off by default.
        self._scheduled_events = scheduled_events
        self.in_doubt = InDoubt()

    # -- reporting -------------------------------------------------------------------------

    def _emit(self, pod: str, node: str | None, outcome: Outcome, message: str,
              started: tuple[float, float], *, queued: float = 0.0) -> None:
        record = AttemptRecord(pod, node, outcome, message, *since(started), queued=queued)
        for listener in self._listeners:
            listener(record)

    def _event(self, pod: PodInfo, kind: Literal["Normal", "Warning"], reason: str,
               message: str) -> None:
        cluster = self._cluster
        if cluster is None:
            return
        try:
            cluster.record_event(pod.pod, kind, reason, message, COMPONENT)
        except ClusterError as exc:
            _log.warning("could not record event", pod=pod.key, error=str(exc))

    def _fail(self, qp: QueuedPod, started: tuple[float, float], *, message: str,
              rejected_by: set[str], unschedulable: bool, node: str | None = None,
              diagnosis: Diagnosis | None = None) -> None:
        if diagnosis is None or self._preemptions is None or \
                not self._preemptions.report_later(qp.key, diagnosis):
            self._event(qp.info, "Warning", "FailedScheduling", message)
        self._queue.requeue(qp, unschedulable=unschedulable, rejected_by=rejected_by,
                            message=message)
        self._emit(qp.info.key, node, "unschedulable" if unschedulable else "error", message,
                   started, queued=qp.waited)

    # -- the scheduling cycle --------------------------------------------------------------

    def attempt(self, qp: QueuedPod) -> None:
        # A nominated pod gives back the room its preemption held, so that this attempt
        # can use it; PostFilter nominates it again if it still has to wait (kube removes
        # the pod from the nominator and adds it back the same way).
        held = self._cache.lend_nomination(qp.key)
        try:
            self._attempt(qp)
        except Exception as exc:
            # A bug (or a value nothing checked) must lose no pod and stop no loop: the pod
            # is tried again after a backoff, and the failure is logged and counted.
            _log.exception("scheduling attempt failed", pod=qp.key)
            loops.record("scheduling attempt")
            self._fail(qp, clocks(), message=f"internal error: {exc}", rejected_by=set(),
                       unschedulable=False)
        finally:
            if held is not None:
                self._cache.settle_lent(held)
            if self._preemptions is not None:
                # The attempt has parked the preemptor: its calls may run now.
                self._preemptions.submit()

    def _attempt(self, qp: QueuedPod) -> None:
        started = clocks()
        info = qp.info
        if info.error is not None:
            self._fail(qp, started, message=f"pod cannot be scheduled: {info.error}",
                       rejected_by={POD_SPEC}, unschedulable=True)
            return
        if self._cache.in_doubt(qp.key):
            self._queue.done(qp.key)  # back in the queue once its Binding is settled
            return
        self._cache.update_snapshot(self._snapshot)
        result = self._framework.schedule(info, self._snapshot, self._clock())
        if result.node is None:
            diagnosis = result.diagnosis
            message = summarize(diagnosis) if diagnosis is not None else result.status.message
            self._fail(qp, started, message=message,
                       rejected_by=diagnosis.rejecting_plugins if diagnosis else set(),
                       unschedulable=result.status.code is not Code.ERROR,
                       diagnosis=diagnosis)
            return
        self._reserve_and_permit(qp, result.state, result.node, started)

    def _reserve_and_permit(self, qp: QueuedPod, state: CycleState, node: str,
                            started: tuple[float, float]) -> None:
        info = qp.info
        status = self._framework.reserve(state, info, node)
        if not status.ok:
            self._fail(qp, started, message=f"reserving on {node} failed: {status.message}",
                       rejected_by={status.plugin}, unschedulable=status.rejected, node=node)
            return
        # What Reserve claimed counts in the cache before anything else is decided.
        rec = self._cache.assume(info, node, state.assignment)
        if isinstance(rec, Refused):
            # The decision is stale: the watch showed, during this cycle, the pod bound by
            # another binder (counted where it is; nothing to retry), or a pod on the GPUs
            # it chose (try again at once, on what the cache holds now).
            self._framework.unreserve(state, info, node)
            if rec.bound or rec.in_doubt:
                self._queue.done(qp.key)
            else:
                self._queue.requeue(qp, unschedulable=False, message=rec.reason)
            self._emit(info.key, node, "error", rec.reason, started, queued=qp.waited)
            return
        status, waiting_for = self._framework.permit(state, info, node)
        if status.code is Code.WAIT:
            self._waiting.hold(Waiting(qp, state, node, waiting_for, rec))
            self._queue.done(qp.key)
            self._emit(info.key, node, "waiting", ", ".join(sorted(waiting_for)), started,
                       queued=qp.waited)
            return
        if not status.ok:
            self._undo(info, state, node, rec)
            self._fail(qp, started, message=f"permit on {node} refused: {status.message}",
                       rejected_by={status.plugin}, unschedulable=status.rejected, node=node)
            return
        self._queue.done(qp.key)
        self._emit(info.key, node, "scheduled", "", started, queued=qp.waited)
        self._submit_bind(qp, state, node, rec)

    def _undo(self, info: PodInfo, state: CycleState, node: str, rec: PodRecord) -> None:
        """Unreserve, and forget the assumption ``rec`` if it is still the cache's."""
        self._framework.unreserve(state, info, node)
        self._cache.forget(rec)

    # -- the binding cycle -----------------------------------------------------------------

    def _submit_bind(self, qp: QueuedPod, state: CycleState, node: str,
                     rec: PodRecord) -> None:
        self.binder.submit(lambda: self.bind(qp, state, node, rec))

    def bind(self, qp: QueuedPod, state: CycleState, node: str, rec: PodRecord) -> None:
        started = clocks()
        info = qp.info
        status: Status = self._framework.bind(state, info, node)
        if status.ok:
            self._bound(info, node, rec, started)
            return
        # A PreBind failure sent no Binding; a Bind failure may have bound the pod.
        pre_bind = any(p.name == status.plugin for p in self._framework.pre_binds)
        verdict = Verdict.PENDING if pre_bind else self._verdict(info, node, state)
        if verdict is Verdict.OURS:
            _log.info("binding failed but went through", pod=info.key, node=node,
                      detail=status.message)
            self._bound(info, node, rec, started)
            return
        self._framework.unreserve(state, info, node)
        if status.code is Code.IN_DOUBT and verdict is not Verdict.ELSEWHERE:
            self._hold_in_doubt(qp, rec, status, started)
            return
        if verdict in (Verdict.ELSEWHERE, Verdict.UNKNOWN):
            # Maybe bound: keep counting it here until the watch shows where it is (or
            # the assumption expires).
            self._cache.finish_binding(rec, self._clock())
        else:
            self._cache.forget(rec)
        if verdict in (Verdict.ELSEWHERE, Verdict.GONE):
            # Bound by someone else, or deleted: not a failure, nothing to retry.
            _log.info("pod already bound or going away", pod=info.key, node=node,
                      detail=status.message, verdict=verdict.value)
            self._emit(info.key, node, "bind-conflict", status.message, started)
            return
        _log.warning("binding failed", pod=info.key, node=node, error=status.message)
        # kube's words: a PreBind failure says which plugin failed, a Bind one that the
        # binding was rejected. Either way the pod backs off and is tried again.
        message = status.message if pre_bind else f"binding rejected: {status.message}"
        self._event(info, "Warning", "FailedScheduling", message)
        if self._watched.still_pending(info):
            self._queue.readd_failed(qp, message)
        self._emit(info.key, node, "bind-failed", message, started)

    def _hold_in_doubt(self, qp: QueuedPod, rec: PodRecord, status: Status,
                       started: tuple[float, float]) -> None:
        """Not bound yet, but it may still be: hold the room, and the pod out of the queue,
        until the watch or the deadline settles it (:mod:`.in_doubt`)."""
        if self._cache.hold_in_doubt(rec, self._clock(), self._in_doubt_seconds):
            self.in_doubt.hold(rec, qp, self._in_doubt_seconds, status.message)
        self._emit(qp.info.key, rec.node, "bind-in-doubt", status.message, started)

    def settle_in_doubt(self, expired: list[PodRecord]) -> None:
        """Requeue the pods whose Binding stayed in doubt past its deadline (``expired``
        has their assumptions) and that the watch still shows pending."""
        for qp in self.in_doubt.settle(expired, self._cache.pod):
            if self._watched.still_pending(qp.info):
                self._queue.readd_failed(qp, "its binding stayed in doubt")

    def _bound(self, info: PodInfo, node: str, rec: PodRecord,
               started: tuple[float, float]) -> None:
        self._cache.finish_binding(rec, self._clock())
        if self._scheduled_events:
            self._event(info, "Normal", "Scheduled",
                        f"Successfully assigned {info.key} to {node}")
        self._emit(info.key, node, "bound", "", started)

    def _verdict(self, info: PodInfo, node: str, state: CycleState) -> Verdict:
        """What the failed binding did, from the pod as the API server has it now."""
        if self._cluster is None:
            return Verdict.PENDING  # nothing was sent anywhere
        try:
            seen: Obj | None = self._cluster.get("pods", info.name, info.namespace)
        except NotFoundError:
            seen = None
        except ClusterError as exc:
            _log.warning("could not read the pod after its binding failed", pod=info.key,
                         error=str(exc))
            return Verdict.UNKNOWN
        return judge(info, node, state.assignment, seen)

    def settle_waiting(self) -> None:
        """Bind the Permit-held pods that were allowed; undo the rejected ones."""
        for settled in self._waiting.settle():
            waiting = settled.waiting
            if settled.allowed:
                self._submit_bind(waiting.qp, waiting.state, waiting.node, waiting.assumed)
                continue
            self._undo(waiting.qp.info, waiting.state, waiting.node, waiting.assumed)
            if settled.reason != DELETED:
                self._event(waiting.qp.info, "Warning", "FailedScheduling",
                            f"permit on {waiting.node} rejected: {settled.reason}")
                if self._watched.still_pending(waiting.qp.info):
                    self._queue.readd_failed(waiting.qp, settled.reason)
