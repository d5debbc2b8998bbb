"""The scheduler: informers feed the cache and the queue; one loop pops pods and runs the
framework; bindings go through the cluster port.

Two ways to drive it, same code underneath:

* stepping, for scripts, tests and the simulator: ``pump()`` applies the informers'
  pending watch events, ``schedule_one()`` runs one scheduling attempt (and any binding
  that became ready), ``run_until_idle()`` repeats both until nothing is left to do now;
* threaded, for the real deployment: ``run(stop_event)`` runs the informers in threads and
  the scheduling loop until ``stop_event`` is set, bindings on a thread pool.

Every failed attempt records a ``FailedScheduling`` event with the kube-scheduler style
summary; every decision is reported to ``listeners`` (the seam for metrics).
"""

from __future__ import annotations

import gc
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from scheduler.framework import podinfo, profile
from scheduler.framework.interfaces import (
    ASSIGNMENT_KEY,
    BIND_CONFLICT_KEY,
    Clock,
    ClusterEvent,
    CycleState,
    PluginFactory,
)
from scheduler.framework.nodeinfo import NodeInfo
from scheduler.framework.podinfo import PodInfo
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.host.binding import BindExecutor, InlineBinder, ThreadBinder
from scheduler.host.cache import Cache
from scheduler.host.queue import QueuedPod, SchedulingQueue
from scheduler.host.summary import summarize
from scheduler.plugins.registry import REGISTRY
from vgpu import logs
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import ClusterPort, Obj, is_terminated
from vgpu.config import Config
from vgpu.errors import ClusterError

_log = logs.get("vgpu.scheduler")

COMPONENT = "vgpu-scheduler"
#: ``rejected_by`` of a pod whose own spec is the problem: only a change to it can help.
POD_SPEC = "<pod spec>"


@dataclass(frozen=True)
class Decision:
    """One scheduling attempt, as listeners (metrics, the simulator) see it."""

    pod: str
    node: str | None
    outcome: Literal["scheduled", "waiting", "unschedulable", "error", "bound", "bind-failed",
                     "bind-conflict"]
    message: str = ""
    #: Wall-clock and CPU time (of the scheduling thread) the attempt took.
    seconds: float = 0.0
    cpu_seconds: float = 0.0


@dataclass
class _Waiting:
    qp: QueuedPod
    state: CycleState
    node: str
    pending: set[str] = field(default_factory=set)


class Scheduler:
    def __init__(self, config: Config, cluster: ClusterPort | None = None, *,
                 clock: Clock = time.time, registry: Mapping[str, PluginFactory] = REGISTRY,
                 binder: BindExecutor | None = None) -> None:
        self._config = config
        self._cluster = cluster
        self._clock = clock
        self._pod_handlers: list[Callable[[Obj | None, Obj | None], None]] = []
        sc = config.scheduler
        self.cache = Cache(scaling=config.device_memory_scaling,
                           assume_ttl=sc.assume_ttl_seconds,
                           heartbeat_expiry=config.node_heartbeat_expiry_seconds)
        self.framework: Framework = profile.build(sc, self, registry)
        self.snapshot = Snapshot(self.framework.columns())
        self.queue = SchedulingQueue(
            self.framework.sort_key, clock, initial_backoff=sc.pod_initial_backoff_seconds,
            max_backoff=sc.pod_max_backoff_seconds,
            max_unschedulable=sc.pod_max_unschedulable_seconds)
        self.binder: BindExecutor = binder or InlineBinder()
        self.listeners: list[Callable[[Decision], None]] = []
        self._lock = threading.RLock()
        self._waiting: dict[str, _Waiting] = {}
        self._ready: deque[str] = deque()
        self._rejected: deque[tuple[str, str]] = deque()
        self._informers: list[Informer] = []
        self._threads: list[threading.Thread] = []

    # -- the Handle plugins see ------------------------------------------------------------

    @property
    def config(self) -> Config:
        return self._config

    @property
    def cluster(self) -> ClusterPort | None:
        return self._cluster

    def now(self) -> float:
        return self._clock()

    def node_info(self, name: str) -> NodeInfo | None:
        return self.cache.node_info(name)

    def on_pod_event(self, handler: Callable[[Obj | None, Obj | None], None]) -> None:
        self._pod_handlers.append(handler)

    def allow(self, pod_key: str, plugin: str) -> None:
        with self._lock:
            waiting = self._waiting.get(pod_key)
            if waiting is None:
                return
            waiting.pending.discard(plugin)
            if not waiting.pending:
                self._ready.append(pod_key)
        self.queue.interrupt()

    def reject(self, pod_key: str, plugin: str, reason: str) -> None:
        with self._lock:
            if pod_key in self._waiting:
                self._rejected.append((pod_key, f"{plugin}: {reason}"))
        self.queue.interrupt()

    def waiting_pods(self) -> dict[str, str]:
        """Pods held at Permit, with the node each waits for."""
        with self._lock:
            return {key: w.node for key, w in self._waiting.items()}

    # -- informer event handlers -----------------------------------------------------------

    def _hint(self, pod: PodInfo, plugins: set[str], event: ClusterEvent) -> bool:
        if POD_SPEC in plugins:
            return False
        return self.framework.could_help(pod, plugins, event)

    def _wake(self, event: ClusterEvent | None) -> None:
        if event is not None:
            self.queue.on_event(event, self._hint)

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        """Informer handler for pods: ``(None, new)`` add, ``(old, new)`` update,
        ``(old, None)`` delete."""
        if new is None:
            if old is not None:
                self._pod_deleted(old)
        else:
            self._pod_changed(old, new)
        for handler in self._pod_handlers:
            handler(old, new)

    def _pod_deleted(self, pod: Obj) -> None:
        key = podinfo.pod_key(pod)
        self.queue.delete(key)
        with self._lock:
            if key in self._waiting:
                self._rejected.append((key, "pod deleted"))
        rec = self.cache.remove_pod(key)
        if rec is not None:
            self._wake(ClusterEvent("pod", "delete", rec.node, freed=rec.assignment, obj=pod))

    def _pod_changed(self, old: Obj | None, new: Obj) -> None:
        key = podinfo.pod_key(new)
        spec = new.get("spec") or {}
        if spec.get("nodeName"):
            self.queue.delete(key)
            before, after = self.cache.set_pod(new)
            if before is not None and after is None:
                self._wake(ClusterEvent("pod", "delete", before.node, freed=before.assignment,
                                        obj=new))
            return
        if spec.get("schedulerName") != self._config.scheduler_name:
            return
        meta = new.get("metadata") or {}
        if is_terminated(new) or meta.get(
                "deletionTimestamp"):
            self.queue.delete(key)
            return
        with self._lock:
            if key in self._waiting:
                return
        rec = self.cache.pod(key)
        if rec is not None and rec.assumed:
            return  # being bound by us; the watch will show it bound
        if old is not None and _same_for_scheduling(old, new):
            return
        self.queue.add(podinfo.parse(new, self._config))

    def on_node(self, old: Obj | None, new: Obj | None) -> None:
        """Informer handler for nodes."""
        if new is None:
            if old is None:
                return
            name = str((old.get("metadata") or {}).get("name", ""))
            self.cache.remove_node(name)
            with self._lock:
                for key, waiting in self._waiting.items():
                    if waiting.node == name:
                        self._rejected.append((key, f"node {name} was deleted"))
            return
        self._wake(self.cache.set_node(new, self._clock()))

    # -- informers -------------------------------------------------------------------------

    def informers(self, watch_timeout: float = 30.0) -> list[Informer]:
        """The pod and node informers over the cluster port, created on first use."""
        if not self._informers:
            if self._cluster is None:
                raise ClusterError("the scheduler has no cluster to watch")
            self._informers = [
                Informer(self._cluster, "nodes", self.on_node, watch_timeout=watch_timeout),
                Informer(self._cluster, "pods", self.on_pod, watch_timeout=watch_timeout),
            ]
        return self._informers

    def pump(self) -> int:
        """Apply every watch event available now; returns how many."""
        return sum(informer.pump(0.0) for informer in self.informers())

    # -- the loop --------------------------------------------------------------------------

    def housekeeping(self) -> None:
        """Timeouts that need no event: backoffs, expired assumptions, Permit gates."""
        now = self._clock()
        self.queue.flush()
        for rec in self.cache.expire(now):
            self._wake(ClusterEvent("pod", "delete", rec.node, freed=rec.assignment))
        self.framework.tick(now)
        self._settle_waiting()

    def schedule_one(self) -> bool:
        """One scheduling attempt (plus bindings that became ready); False: nothing to do."""
        self.housekeeping()
        qp = self.queue.pop(0.0)
        if qp is None:
            return False
        self._attempt(qp)
        self._settle_waiting()
        return True

    def run_until_idle(self, max_attempts: int | None = None) -> int:
        """Pump and schedule until no event and no active pod is left; returns attempts.

        Pods in backoff or parked as unschedulable stay there: advance the clock (or wait)
        and call again.
        """
        attempts = 0
        while max_attempts is None or attempts < max_attempts:
            events = self.pump() if self._cluster is not None else 0
            if self.schedule_one():
                attempts += 1
            elif events == 0:
                self._settle_waiting()
                if self._cluster is None or self.pump() == 0:
                    break
        return attempts

    def start_informers(self, stop: threading.Event, *,
                        watch_timeout: float = 1.0) -> list[threading.Thread]:
        """Run the informers in threads until ``stop``: the caches (and the queue) stay
        current whether or not this replica schedules."""
        if not self._threads:
            self._threads = [i.start(stop) for i in self.informers(watch_timeout)]
        return self._threads

    def informer_threads(self) -> list[threading.Thread]:
        return list(self._threads)

    def synced(self) -> bool:
        return bool(self._informers) and all(i.synced.is_set() for i in self._informers)

    def run(self, stop: threading.Event, *, watch_timeout: float = 1.0,
            sync_timeout: float | None = 60.0, leading: threading.Event | None = None) -> None:
        """The real deployment's loop: informers in threads, bindings on a pool.

        Nothing is scheduled before both informers have listed: a decision on a partial
        view of the pods could hand out a GPU slice a running pod holds. With ``leading``
        (leader election), the informers run from the start but the loop schedules only
        while it is set, and returns as soon as it is cleared.
        """
        threads = self.start_informers(stop, watch_timeout=watch_timeout)
        waited = 0.0
        while not self.synced() and not stop.is_set():
            stop.wait(0.05)
            waited += 0.05
            if sync_timeout is not None and waited >= sync_timeout:
                _log.warning("informers not synced yet; not scheduling until they are",
                             seconds=round(waited))
                waited = 0.0
        # Everything listed so far lives as long as the process: keep it out of the cyclic
        # collector's full passes, which otherwise stall a cycle for tens of milliseconds.
        gc.collect()
        gc.freeze()
        while leading is not None and not leading.is_set() and not stop.is_set():
            leading.wait(0.2)
        workers = self._config.scheduler.bind_workers
        if workers > 0 and isinstance(self.binder, InlineBinder):
            self.binder = ThreadBinder(workers)

        def stopper_main() -> None:
            while not stop.wait(0.2):
                if leading is not None and not leading.is_set():
                    break
            self.queue.interrupt()

        stopper = threading.Thread(target=stopper_main, daemon=True, name="vgpu-scheduler-stop")
        stopper.start()
        _log.info("scheduler running", nodes=len(self.cache))

        def go_on() -> bool:
            return not stop.is_set() and (leading is None or leading.is_set())

        try:
            while go_on():
                self.housekeeping()
                qp = self.queue.pop(1.0)
                if qp is not None and go_on():
                    self._attempt(qp)
        finally:
            self.binder.close()
            if stop.is_set():
                # A watch notices the stop when its request ends; the threads are daemons,
                # so a process that exits does not wait for a long watch.
                deadline = time.monotonic() + min(watch_timeout + 1, 3.0)
                for thread in threads:
                    thread.join(timeout=max(deadline - time.monotonic(), 0.0))

    # -- one attempt -----------------------------------------------------------------------

    def _emit(self, decision: Decision) -> None:
        for listener in self.listeners:
            listener(decision)

    def _event(self, pod: PodInfo, kind: Literal["Normal", "Warning"], reason: str,
               message: str) -> None:
        if self._cluster is None:
            return
        try:
            self._cluster.record_event(pod.pod, kind, reason, message, COMPONENT)
        except ClusterError as exc:
            _log.warning("could not record event", pod=pod.key, error=str(exc))

    def _fail(self, qp: QueuedPod, started: tuple[float, float], *, message: str,
              rejected_by: set[str], unschedulable: bool, node: str | None = None) -> None:
        self._event(qp.info, "Warning", "FailedScheduling", message)
        self.queue.requeue(qp, unschedulable=unschedulable, rejected_by=rejected_by,
                           message=message)
        self._emit(Decision(qp.key, node, "unschedulable" if unschedulable else "error",
                            message, *_since(started)))

    def _attempt(self, qp: QueuedPod) -> None:
        started = _clocks()
        info = qp.info
        if info.error is not None:
            self._fail(qp, started, message=f"pod cannot be scheduled: {info.error}",
                       rejected_by={POD_SPEC}, unschedulable=True)
            return
        now = self._clock()
        self.cache.update_snapshot(self.snapshot)
        try:
            result = self.framework.schedule(info, self.snapshot, now)
        except Exception as exc:
            _log.exception("scheduling failed", pod=info.key)
            self._fail(qp, started, message=f"internal error: {exc}", rejected_by=set(),
                       unschedulable=False)
            return
        if result.node is None:
            diagnosis = result.diagnosis
            message = summarize(diagnosis) if diagnosis is not None else result.status.message
            unschedulable = result.status.code is not Code.ERROR
            rejected = diagnosis.rejecting_plugins if diagnosis is not None else set()
            self._fail(qp, started, message=message, rejected_by=rejected,
                       unschedulable=unschedulable)
            return
        node, state = result.node, result.state
        status = self.framework.reserve(state, info, node)
        if not status.ok:
            self._fail(qp, started, message=f"reserving on {node} failed: {status.message}",
                       rejected_by={status.plugin}, unschedulable=status.rejected, node=node)
            return
        self.cache.assume(info, node, state.read(ASSIGNMENT_KEY))
        status, waiting_for = self.framework.permit(state, info, node)
        if status.code is Code.WAIT:
            with self._lock:
                self._waiting[info.key] = _Waiting(qp, state, node, waiting_for)
            self.queue.done(info.key)
            self._emit(Decision(info.key, node, "waiting", ", ".join(sorted(waiting_for)),
                                *_since(started)))
            return
        if not status.ok:
            self._undo(info, state, node)
            self._fail(qp, started, message=f"permit on {node} refused: {status.message}",
                       rejected_by={status.plugin}, unschedulable=status.rejected, node=node)
            return
        self.queue.done(info.key)
        self._emit(Decision(info.key, node, "scheduled", "", *_since(started)))
        self._submit_bind(qp, state, node)

    def _submit_bind(self, qp: QueuedPod, state: CycleState, node: str) -> None:
        self.binder.submit(lambda: self._bind(qp, state, node))

    def _still_pending(self, key: str) -> bool:
        """Whether the pod, as the watch last showed it, still waits for a node (as
        kube-scheduler, a failed pod is only requeued while it is unassigned)."""
        if not self._informers:
            return True
        pod = self._informers[1].get(key)
        if pod is None:
            return False
        return not ((pod.get("spec") or {}).get("nodeName")
                    or (pod.get("metadata") or {}).get("deletionTimestamp"))

    def _undo(self, info: PodInfo, state: CycleState, node: str) -> None:
        self.framework.unreserve(state, info, node)
        rec = self.cache.forget(info.key)
        if rec is not None:
            self._wake(ClusterEvent("pod", "delete", rec.node, freed=rec.assignment))

    def _bind(self, qp: QueuedPod, state: CycleState, node: str) -> None:
        started = _clocks()
        info = qp.info
        status: Status = self.framework.bind(state, info, node)
        if status.ok:
            self.cache.finish_binding(info.key, self._clock())
            self._event(info, "Normal", "Scheduled", f"Successfully assigned {info.key} to {node}")
            self._emit(Decision(info.key, node, "bound", "", *_since(started)))
            return
        self._undo(info, state, node)
        if state.read(BIND_CONFLICT_KEY):
            # Already bound (by another replica, or by an earlier try of ours whose answer
            # was lost), or being deleted: not a failure. The watch shows what is true and
            # the cache counts that; nothing to retry.
            _log.info("pod already bound or going away", pod=info.key, node=node,
                      detail=status.message)
            self._emit(Decision(info.key, node, "bind-conflict", status.message,
                                *_since(started)))
            return
        _log.warning("binding failed", pod=info.key, node=node, error=status.message)
        message = f"binding rejected: {status.message}"
        self._event(info, "Warning", "FailedScheduling", message)
        if self._still_pending(info.key):
            self.queue.readd_failed(qp, message)
        self._emit(Decision(info.key, node, "bind-failed", message,
                            *_since(started)))

    def _settle_waiting(self) -> None:
        """Bind the Permit-waiting pods that were allowed; unreserve the rejected ones."""
        while True:
            with self._lock:
                if self._rejected:
                    key, reason = self._rejected.popleft()
                    waiting = self._waiting.pop(key, None)
                    allowed = False
                elif self._ready:
                    key = self._ready.popleft()
                    waiting = self._waiting.pop(key, None)
                    allowed = True
                else:
                    return
            if waiting is None:
                continue
            if allowed:
                self._submit_bind(waiting.qp, waiting.state, waiting.node)
                continue
            self._undo(waiting.qp.info, waiting.state, waiting.node)
            if reason != "pod deleted":
                self._event(waiting.qp.info, "Warning", "FailedScheduling",
                            f"permit on {waiting.node} rejected: {reason}")
                if self._still_pending(waiting.qp.key):
                    self.queue.readd_failed(waiting.qp, reason)


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.thread_time()


def _since(started: tuple[float, float]) -> tuple[float, float]:
    return time.perf_counter() - started[0], time.thread_time() - started[1]


def _same_for_scheduling(old: Obj, new: Obj) -> bool:
    """Whether a pending pod's update changes nothing the scheduler reads."""
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    return bool(old.get("spec") == new.get("spec")
                and om.get("annotations") == nm.get("annotations")
                and om.get("labels") == nm.get("labels"))
