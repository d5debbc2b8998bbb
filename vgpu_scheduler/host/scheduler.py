"""The scheduler: informers feed the cache and the queue; one loop pops pods and runs the
framework; bindings go through the cluster port.

Two ways to drive it, same code underneath:

* stepping, for scripts, tests and the simulator: ``pump()`` applies the informers'
  pending watch events, ``schedule_one()`` runs one scheduling attempt (and any binding
  that became ready), ``run_until_idle()`` repeats both until nothing is left to do now;
* threaded, for the real deployment: ``run(stop_event)`` runs the informers in threads and
  the scheduling loop until ``stop_event`` is set, bindings on a thread pool.

Every failed attempt records a ``FailedScheduling`` event with the kube-scheduler style
summary; every decision is reported to ``listeners`` (the seam for metrics). The pieces,
each given the others it uses when the scheduler wires them here: :mod:`.informers` and
:mod:`.handlers` (informer events), :mod:`.schedule_one` (one attempt, one binding),
:mod:`.waiting` (pods held at Permit), :mod:`.nominator` (room held for preemptors),
:mod:`.cache`, :mod:`.queue`; the profile's framework is its plugins' handle.
"""

from __future__ import annotations

import functools
import gc
import threading
import time
from collections.abc import Callable, Mapping

from vgpu import logs, loops, meta
from vgpu.cluster import informer
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import ClusterPort, Obj
from vgpu.config import Config
from vgpu.errors import ClusterError
from vgpu_scheduler.framework import profile
from vgpu_scheduler.framework.handle import Clock, Host, PluginFactory
from vgpu_scheduler.framework.runtime import Framework
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.host import collector
from vgpu_scheduler.host.attempt_record import AttemptRecord
from vgpu_scheduler.host.binding import BindExecutor, InlineBinder, ThreadBinder
from vgpu_scheduler.host.cache import Cache
from vgpu_scheduler.host.handlers import Handlers
from vgpu_scheduler.host.informers import Informers
from vgpu_scheduler.host.nominator import Nominator
from vgpu_scheduler.host.preemptions import WORKERS, PreemptionRunner
from vgpu_scheduler.host.queue import SchedulingQueue
from vgpu_scheduler.host.schedule_one import COMPONENT, ScheduleOne
from vgpu_scheduler.host.waiting import WaitingRoom
from vgpu_scheduler.plugins.registry import REGISTRY

_log = logs.get("vgpu.scheduler")


class Scheduler:
    def __init__(self, config: Config, cluster: ClusterPort | None = None, *,
                 clock: Clock = time.time, registry: Mapping[str, PluginFactory] = REGISTRY,
                 binder: BindExecutor | None = None) -> None:
        self._config = config
        self._cluster = cluster
        self._clock = clock
        sc = config.scheduler
        # The queue comes first and takes the profile last: the profile's plugins are built
        # with what reaches the queue (the nominator, the waiting room, the pod events).
        self.queue = SchedulingQueue(
            clock, initial_backoff=sc.pod_initial_backoff_seconds,
            max_backoff=sc.pod_max_backoff_seconds,
            max_unschedulable=sc.pod_max_unschedulable_seconds)
        # Room the cache sees given up (a pod forgotten, deleted, expired, moved, a
        # nomination cleared) wakes the parked pods it could help: wired here, once.
        self.cache = Cache(scaling=config.device_memory_scaling,
                           assume_ttl=sc.assume_ttl_seconds,
                           heartbeat_expiry=config.node_heartbeat_expiry_seconds, config=config,
                           on_freed=self.queue.on_event)
        self.waiting = WaitingRoom()
        self._handlers = Handlers(config, clock, cache=self.cache, queue=self.queue,
                                  waiting=self.waiting, bad_inventory=self._bad_inventory)
        self._informers = Informers(cluster, self._handlers)
        self.preemptions = PreemptionRunner(self.queue, self.cache, cluster)
        self.framework: Framework = profile.build(sc, registry, Host(
            config=config, cluster=cluster, clock=clock, listers=self._informers,
            pod_events=self._handlers, nodes=self.cache,
            nominator=Nominator(self.cache, self.queue), waiting=self.waiting,
            preemptions=self.preemptions, wake=self.queue.interrupt))
        self.queue.use(self.framework)
        self.snapshot = Snapshot(self.framework.columns())
        self.listeners: list[Callable[[AttemptRecord], None]] = []
        self._cycle = ScheduleOne(
            self.framework, self.snapshot, cache=self.cache, queue=self.queue,
            waiting=self.waiting, watched=self._informers, cluster=cluster, clock=clock,
            binder=binder or InlineBinder(), preemptions=self.preemptions,
            listeners=self.listeners,
            in_doubt_seconds=sc.bind_in_doubt_seconds,
            scheduled_events=sc.scheduled_events)

    def _bad_inventory(self, node: Obj, problem: str) -> None:
        if self._cluster is None:
            return
        try:
            self._cluster.record_event(node, "Warning", "InvalidInventory",
                                       f"{problem}: this node takes no GPU pod until its agent "
                                       f"publishes an inventory vgpu can read", COMPONENT)
        except ClusterError as exc:
            _log.warning("could not record event", node=meta.name(node), error=str(exc))

    @property
    def config(self) -> Config:
        return self._config

    def waiting_pods(self) -> dict[str, str]:
        """Pods held at Permit, with the node each waits for."""
        return self.waiting.nodes()

    # -- informer events -------------------------------------------------------------------

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        """Informer handler for pods: ``(None, new)`` add, ``(old, new)`` update,
        ``(old, None)`` delete."""
        self._handlers.on_pod(old, new)

    def on_node(self, old: Obj | None, new: Obj | None) -> None:
        """Informer handler for nodes."""
        self._handlers.on_node(old, new)

    def informers(self, watch_timeout: float = 30.0) -> list[Informer]:
        """The informers over the cluster port: nodes, pods, then the kinds plugins asked
        for (``Handle.lister``), created on first use."""
        return self._informers.all(watch_timeout)

    def pump(self) -> int:
        """Apply every watch event available now; returns how many."""
        if self._cluster is not None and not self._informers.synced():
            # The first lists: millions of objects that live on (:mod:`.collector`); the
            # listed pods are folded into their nodes now, as ``run`` does once synced.
            with collector.initial_list():
                events = self._informers.pump()
                self.cache.update_snapshot(self.snapshot)
                return events
        return self._informers.pump()

    # -- stepping --------------------------------------------------------------------------

    def housekeeping(self) -> None:
        """Timeouts that need no event: backoffs, expired assumptions, Permit gates."""
        now = self._clock()
        self.queue.flush()
        self._cycle.settle_in_doubt(self.cache.expire(now))
        self.framework.tick(now)
        self._cycle.settle_waiting()

    def schedule_one(self) -> bool:
        """One scheduling attempt (plus bindings that became ready); False: nothing to do."""
        self.housekeeping()
        qp = self.queue.pop(0.0)
        if qp is None:
            return False
        self._cycle.attempt(qp)
        self._cycle.settle_waiting()
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
                self._cycle.settle_waiting()
                if self._cluster is None or self.pump() == 0:
                    break
        return attempts

    # -- threaded --------------------------------------------------------------------------

    def start_informers(self, stop: threading.Event, *,
                        watch_timeout: float = 1.0) -> list[threading.Thread]:
        """Run the informers in threads until ``stop``: the caches (and the queue) stay
        current whether or not this replica schedules."""
        return self._informers.start(stop, watch_timeout=watch_timeout)

    def informer_threads(self) -> list[threading.Thread]:
        return self._informers.threads()

    def synced(self) -> bool:
        return self._informers.synced()

    def _wait_synced(self, stop: threading.Event, sync_timeout: float | None,
                     slow: Callable[[], None] = lambda: None) -> None:
        """Until every informer has listed (or ``stop``), warning each time
        ``sync_timeout`` passes; ``slow`` is called once the wait has lasted
        ``collector.LONGEST_PAUSE_SECONDS`` or a ``sync_timeout``, whichever is first."""
        waited = total = 0.0
        while not self.synced() and not stop.is_set():
            stop.wait(0.05)
            waited += 0.05
            total += 0.05
            if total >= collector.LONGEST_PAUSE_SECONDS:
                slow()
            if sync_timeout is not None and waited >= sync_timeout:
                _log.warning("informers not synced yet; not scheduling until they are",
                             seconds=round(waited))
                slow()
                waited = 0.0

    def run(self, stop: threading.Event, *, watch_timeout: float = 1.0,
            sync_timeout: float | None = 60.0, leading: threading.Event | None = None) -> None:
        """The real deployment's loop: schedule until ``stop`` is set, informers in
        threads, bindings on a pool.

        Nothing is scheduled before every informer has listed: a decision on a partial view
        of the pods could hand out a GPU slice a running pod holds. With ``leading`` (leader
        election), the informers run from the start but the loop schedules only while it is
        set, and returns as soon as it is cleared.
        """
        # As the stepping pump's first lists (:mod:`.collector`): no cycle collection while
        # the informers list, unless the sync outlasts its timeout or the longest pause.
        with collector.paused() as resume:
            threads = self.start_informers(stop, watch_timeout=watch_timeout)
            self._wait_synced(stop, sync_timeout, slow=resume)
        # The listed pods' changes are folded into their nodes at the first read: do it now,
        # so that the first decision does not pay for it and the result is frozen below.
        self.cache.update_snapshot(self.snapshot)
        # Everything listed so far lives as long as the process: keep it out of the cyclic
        # collector's full passes, which otherwise stall a cycle for tens of milliseconds
        # (seconds at 15,000 nodes). No pass first: the list is decoded JSON and records
        # made from it, with no cycles to find (at 15,000 nodes and 150,000 pods a full
        # pass there found 0 of 2.3 million objects, and took 1.3 s of the cold start).
        gc.freeze()
        while leading is not None and not leading.is_set() and not stop.is_set():
            leading.wait(0.2)
        workers = self._config.scheduler.bind_workers
        if workers > 0 and isinstance(self._cycle.binder, InlineBinder):
            self._cycle.binder = ThreadBinder(workers)
        if workers > 0 and isinstance(self.preemptions.executor, InlineBinder):
            # Victims' evictions off the loop: other pods keep being placed meanwhile.
            self.preemptions.executor = ThreadBinder(WORKERS)

        def go_on() -> bool:
            return not stop.is_set() and (leading is None or leading.is_set())

        def stopper_main() -> None:
            while not stop.wait(0.2):
                if leading is not None and not leading.is_set():
                    break
            self.queue.interrupt()

        threading.Thread(target=stopper_main, daemon=True, name="vgpu-scheduler-stop").start()
        _log.info("scheduler running", nodes=len(self.cache))
        step = functools.partial(self.step, go_on)
        failures = 0
        try:
            while go_on():
                # One bad round (a bug, a value nothing checked) is logged, counted and
                # survived; a loop that keeps failing ends, and the process with it.
                if loops.survive("scheduling loop", step):
                    failures = 0
                    continue
                failures += 1
                if failures >= informer.GIVE_UP:
                    raise loops.Ended(f"the scheduling loop failed {failures} times in a row")
                stop.wait(min(0.1 * failures, 2.0))
        finally:
            # Lost the Lease: what is still queued is dropped, not sent; a clean stop
            # finishes it before the Lease is given up.
            lost = leading is not None and not leading.is_set()
            self._cycle.binder.close(cancel=lost)
            self.preemptions.close(cancel=lost)
            if stop.is_set():
                # A watch notices the stop when its request ends; the threads are daemons,
                # so a process that exits does not wait for a long watch.
                deadline = time.monotonic() + min(watch_timeout + 1, 3.0)
                for thread in threads:
                    thread.join(timeout=max(deadline - time.monotonic(), 0.0))

    def step(self, go_on: Callable[[], bool]) -> None:
        """One turn of the threaded loop: timeouts, then at most one attempt."""
        self.housekeeping()
        qp = self.queue.pop(1.0)
        if qp is not None and go_on():
            self._cycle.attempt(qp)
