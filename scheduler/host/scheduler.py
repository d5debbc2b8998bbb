"""The scheduler: informers feed the cache and the queue; one loop pops pods and runs the
framework; bindings go through the cluster port.

Two ways to drive it, same code underneath:

* stepping, for scripts, tests and the simulator: ``pump()`` applies the informers'
  pending watch events, ``schedule_one()`` runs one scheduling attempt (and any binding
  that became ready), ``run_until_idle()`` repeats both until nothing is left to do now;
* threaded, for the real deployment: ``run(stop_event)`` runs the informers in threads and
  the scheduling loop until ``stop_event`` is set, bindings on a thread pool.

Every failed attempt records a ``FailedScheduling`` event with the kube-scheduler style
summary; every decision is reported to ``listeners`` (the seam for metrics). The pieces:
:mod:`.handlers` (informer events), :mod:`.cycle` (one attempt, one binding),
:mod:`.waiting` (pods held at Permit), :mod:`.cache`, :mod:`.queue`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from vgpu import logs
from vgpu.cluster.informer import Informer
from vgpu.cluster.port import ClusterPort, Kind, Obj
from vgpu.codecs import Assignment
from vgpu.config import Config
from vgpu.errors import ClusterError
from vgpu.pods import node_name
from vgpu_scheduler.framework import profile
from vgpu_scheduler.framework.cycle import ClusterEvent, CycleState
from vgpu_scheduler.framework.interfaces import Clock, Lister, PluginFactory
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.runtime import Framework
from vgpu_scheduler.framework.snapshot import Snapshot
from vgpu_scheduler.framework.status import Status
from vgpu_scheduler.host import loop
from vgpu_scheduler.host.binding import BindExecutor, InlineBinder
from vgpu_scheduler.host.cache import Cache
from vgpu_scheduler.host.cycle import COMPONENT, POD_SPEC, Cycle, Decision
from vgpu_scheduler.host.handlers import Handlers, PodHandler
from vgpu_scheduler.host.queue import SchedulingQueue
from vgpu_scheduler.host.waiting import WaitingRoom
from vgpu_scheduler.plugins.registry import REGISTRY

__all__ = ["COMPONENT", "Decision", "Scheduler"]

_log = logs.get("vgpu.scheduler")


class _Empty:
    """The lister of a scheduler without a cluster: nothing to watch."""

    def get(self, key: str) -> Obj | None:
        return None

    def items(self) -> list[Obj]:
        return []


EMPTY = _Empty()


class Scheduler:
    def __init__(self, config: Config, cluster: ClusterPort | None = None, *,
                 clock: Clock = time.time, registry: Mapping[str, PluginFactory] = REGISTRY,
                 binder: BindExecutor | None = None) -> None:
        self._config = config
        self._cluster = cluster
        self._clock = clock
        self._handlers = Handlers(self)
        self._claims: dict[str, Assignment] = {}
        sc = config.scheduler
        self.cache = Cache(scaling=config.device_memory_scaling,
                           assume_ttl=sc.assume_ttl_seconds,
                           heartbeat_expiry=config.node_heartbeat_expiry_seconds, config=config)
        self.waiting = WaitingRoom()
        self._informers: dict[Kind, Informer] = {}
        self.framework: Framework = profile.build(sc, self, registry)
        self.snapshot = Snapshot(self.framework.columns())
        self.queue = SchedulingQueue(
            self.framework.sort_key, clock, admit=self.framework.pre_enqueue,
            initial_backoff=sc.pod_initial_backoff_seconds,
            max_backoff=sc.pod_max_backoff_seconds,
            max_unschedulable=sc.pod_max_unschedulable_seconds)
        self.binder: BindExecutor = binder or InlineBinder()
        self.listeners: list[Callable[[Decision], None]] = []
        self._cycle = Cycle(self)
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

    def on_pod_event(self, handler: PodHandler) -> None:
        self._handlers.pod_handlers.append(handler)

    def lister(self, kind: Kind) -> Lister:
        if self._cluster is None:
            return EMPTY
        return self._informer(kind)

    def run_filters(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.framework.run_filters(state, pod, node)

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: NodePod,
                   node: NodeInfo) -> Status:
        return self.framework.remove_pod(state, pod, removed, node)

    def add_pod(self, state: CycleState, pod: PodInfo, added: NodePod,
                node: NodeInfo) -> Status:
        return self.framework.add_pod(state, pod, added, node)

    def nominate(self, pod: PodInfo, node: str, claim: Assignment | None) -> None:
        self.cache.nominate(pod, node, claim)

    def clear_nomination(self, pod_key: str) -> None:
        rec = self.cache.clear_nomination(pod_key)
        if rec is None:
            return
        self.wake(ClusterEvent("pod", "delete", rec.node, freed=rec.assignment))
        qp = self.queue.get(pod_key)
        if qp is not None:
            self.queue.add(qp.info)

    def claim_gpus(self, pod_key: str, assignment: Assignment) -> None:
        self._claims[pod_key] = assignment

    def take_claim(self, pod_key: str) -> Assignment | None:
        """The GPU slices Reserve claimed for the pod in this cycle, once."""
        return self._claims.pop(pod_key, None)

    def allow(self, pod_key: str, plugin: str) -> None:
        if self.waiting.allow(pod_key, plugin):
            self.queue.interrupt()

    def reject(self, pod_key: str, plugin: str, reason: str) -> None:
        if self.waiting.reject(pod_key, f"{plugin}: {reason}"):
            self.queue.interrupt()

    def waiting_pods(self) -> dict[str, str]:
        """Pods held at Permit, with the node each waits for."""
        return self.waiting.nodes()

    # -- informer events -------------------------------------------------------------------

    def _hint(self, pod: PodInfo, plugins: set[str], event: ClusterEvent) -> bool:
        if POD_SPEC in plugins:
            return False
        return self.framework.could_help(pod, plugins, event)

    def wake(self, event: ClusterEvent | None) -> None:
        """Move the parked pods ``event`` could help back to the queue."""
        if event is not None:
            self.queue.on_event(event, self._hint)

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        """Informer handler for pods: ``(None, new)`` add, ``(old, new)`` update,
        ``(old, None)`` delete."""
        self._handlers.on_pod(old, new)

    def on_node(self, old: Obj | None, new: Obj | None) -> None:
        """Informer handler for nodes."""
        self._handlers.on_node(old, new)

    def _informer(self, kind: Kind) -> Informer:
        found = self._informers.get(kind)
        if found is None:
            if self._cluster is None:
                raise ClusterError("the scheduler has no cluster to watch")
            handler = {"nodes": self.on_node, "pods": self.on_pod}.get(
                kind, lambda old, new: self._handlers.on_other(kind, old, new))
            found = self._informers[kind] = Informer(self._cluster, kind, handler)
        return found

    def informers(self, watch_timeout: float = 30.0) -> list[Informer]:
        """The informers over the cluster port: nodes, pods, then the kinds plugins asked
        for (``lister``), created on first use."""
        ordered = [self._informer("nodes"), self._informer("pods"),
                   *(i for k, i in self._informers.items() if k not in ("nodes", "pods"))]
        for informer in ordered:
            informer.watch_timeout = watch_timeout
        return ordered

    def pump(self) -> int:
        """Apply every watch event available now; returns how many."""
        return sum(informer.pump(0.0) for informer in self.informers())

    def still_pending(self, key: str) -> bool:
        """Whether the pod, as the watch last showed it, still waits for a node (as
        kube-scheduler, a failed pod is only requeued while it is unassigned)."""
        if not self._informers:
            return True
        pod = self._informers["pods"].get(key)
        if pod is None:
            return False
        return not (node_name(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"))

    # -- stepping --------------------------------------------------------------------------

    def housekeeping(self) -> None:
        """Timeouts that need no event: backoffs, expired assumptions, Permit gates."""
        now = self._clock()
        self.queue.flush()
        for rec in self.cache.expire(now):
            self.wake(ClusterEvent("pod", "delete", rec.node, freed=rec.assignment))
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
        if not self._threads:
            self._threads = [i.start(stop) for i in self.informers(watch_timeout)]
        return self._threads

    def informer_threads(self) -> list[threading.Thread]:
        return list(self._threads)

    def synced(self) -> bool:
        return bool(self._informers) and all(i.synced.is_set()
                                             for i in self._informers.values())

    def run(self, stop: threading.Event, *, watch_timeout: float = 1.0,
            sync_timeout: float | None = 60.0, leading: threading.Event | None = None) -> None:
        """The real deployment's loop (see :func:`vgpu_scheduler.host.loop.run`)."""
        loop.run(self, stop, watch_timeout=watch_timeout, sync_timeout=sync_timeout,
                 leading=leading)

    def step(self, go_on: Callable[[], bool]) -> None:
        """One turn of the threaded loop: timeouts, then at most one attempt."""
        self.housekeeping()
        qp = self.queue.pop(1.0)
        if qp is not None and go_on():
            self._cycle.attempt(qp)
