"""Preemptions' API calls, off the scheduling loop (kube's asynchronous preemption,
``SchedulerAsyncPreemption``).

PostFilter decides a preemption, holds the preemptor's room in the cache and hands the
calls here (``Handle.preempt``). The preemptor is held in the queue at once
(:meth:`SchedulingQueue.hold`): a victim leaving, or any other change, would otherwise
wake it into a second preemption before the first one's calls are done. Once the attempt
that decided it is over, :meth:`PreemptionRunner.submit` hands the calls to the executor:
inline for the stepping scheduler (deterministic), a thread pool for the threaded one, so
that other pods keep being placed while a preemption's evictions take their round trips.

Calls that went through release the pod: it waits for its victims to leave, or is tried
at once if something woke it meanwhile. Calls that failed (a PodDisruptionBudget refused
an eviction, an API error) un-nominate it: its room is given up (which wakes the pods that
could use it) and it is tried again after a backoff. The calls clear the nominatedNodeName
they set; the fence before every write is the cluster port's, on whichever thread writes.

The attempt's ``FailedScheduling`` event waits for the calls (:meth:`report_later`), so
that it tells what became of the preemption: the nomination, or why it failed. Two events
an attempt would be one too many, and the second would mostly be held back by the event
limiter, which spaces a pod's repeats.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from dataclasses import dataclass

from vgpu import logs, loops
from vgpu.cluster.port import ClusterPort
from vgpu.errors import ClusterError
from vgpu_scheduler.framework.diagnosis import Diagnosis, summarize
from vgpu_scheduler.framework.handle import PreemptionCalls
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.host.binding import BindExecutor, InlineBinder
from vgpu_scheduler.host.cache import Cache
from vgpu_scheduler.host.queue import SchedulingQueue

_log = logs.get("vgpu.scheduler.preemption")

COMPONENT = "vgpu-scheduler"
#: Threads that run preemptions' calls in the threaded scheduler: kube-scheduler's
#: default parallelism. A preemption's own calls run one after another.
WORKERS = 16


@dataclass
class _Preemption:
    pod: PodInfo
    node: str
    calls: PreemptionCalls
    #: The attempt's diagnosis, for its event once the calls are done.
    diagnosis: Diagnosis | None = None


class PreemptionRunner:
    def __init__(self, queue: SchedulingQueue, cache: Cache, cluster: ClusterPort | None,
                 executor: BindExecutor | None = None) -> None:
        self._queue = queue
        self._cache = cache
        self._cluster = cluster
        #: Where the calls run; the threaded loop swaps in a pool.
        self.executor: BindExecutor = executor or InlineBinder()
        self._lock = threading.Lock()
        self._pending: list[_Preemption] = []
        #: Preemptions finished, by result (``success``, ``failed``).
        self.results: Counter[str] = Counter()

    def start(self, pod: PodInfo, node: str, calls: PreemptionCalls) -> None:
        """From PostFilter, in the scheduling loop: hold the pod; the calls wait for
        :meth:`submit`."""
        self._queue.hold(pod.pod_id)
        with self._lock:
            self._pending.append(_Preemption(pod, node, calls))

    def report_later(self, pod_id: str, diagnosis: Diagnosis) -> bool:
        """The attempt's failure, to be reported once its preemption's calls are done;
        False when it started none."""
        with self._lock:
            for preemption in self._pending:
                if preemption.pod.pod_id == pod_id:
                    preemption.diagnosis = diagnosis
                    return True
        return False

    def submit(self) -> None:
        """After an attempt, in the scheduling loop: the preemptions it decided go to the
        executor (the preemptor is parked and held by now)."""
        with self._lock:
            batch, self._pending = self._pending, []
        for preemption in batch:
            self.executor.submit(functools.partial(self._run, preemption))

    def close(self, cancel: bool = False) -> None:
        self.executor.close(cancel)

    def _run(self, preemption: _Preemption) -> None:
        pod = preemption.pod
        try:
            failure = preemption.calls()
        except Exception as exc:  # a bug must not leave the pod held for good
            _log.exception("preemption calls failed", pod=pod.key, node=preemption.node)
            loops.record("preemption")
            failure = f"preemption: internal error: {exc}"
        with self._lock:
            self.results["success" if failure is None else "failed"] += 1
        if failure is None:
            self._queue.release(pod.pod_id)
        else:
            # The room was held for victims that are not all leaving: give it up first, so
            # the pods it wakes are not woken into a node the preemptor still holds.
            self._cache.clear_nomination(pod.pod_id)
            self._queue.release(pod.pod_id, failed=failure)
        self._report(preemption, failure)

    def _report(self, preemption: _Preemption, failure: str | None) -> None:
        diagnosis = preemption.diagnosis
        if diagnosis is not None:
            if failure is not None:
                diagnosis.post_filter_message = failure
            message: str | None = summarize(diagnosis)
        else:
            message = failure
        if message is None or self._cluster is None:
            return
        try:
            self._cluster.record_event(preemption.pod.pod, "Warning", "FailedScheduling",
                                       message, COMPONENT)
        except ClusterError as exc:
            _log.warning("could not record event", pod=preemption.pod.key, error=str(exc))
