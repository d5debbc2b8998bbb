"""What plugins are built with: the Handle, and what the host lends the framework for it.

As in kube-scheduler, the Handle is the profile's :class:`~vgpu_scheduler.framework.runtime.
Framework` itself (kube's ``frameworkImpl``): its own steps for plugins that simulate
(preemption), and what the host lends it when the profile is built (:class:`Host`, kube's
framework options): the configuration, the cluster, the clock, the watched objects, the
cache's view of the nodes, the nominator, the waiting room at Permit and where
preemptions' API calls run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from vgpu.cluster.port import ClusterPort, Kind, Obj
from vgpu.codecs import Assignment
from vgpu.config import Config
from vgpu_scheduler.framework.cycle_state import CycleState
from vgpu_scheduler.framework.nodeinfo import NodeInfo, NodePod
from vgpu_scheduler.framework.podinfo import PodInfo
from vgpu_scheduler.framework.status import Status

Clock = Callable[[], float]
"""Seconds since the epoch; injected everywhere so that decisions never read the wall clock."""

PodHandler = Callable[[Obj | None, Obj | None], None]
"""Called as ``handler(old, new)``: add is ``(None, new)``, delete is ``(old, None)``."""


class Lister(Protocol):
    """A local, watch-fed view of every object of one kind."""

    def get(self, key: str) -> Obj | None:
        """By ``namespace/name`` (namespaced kinds) or ``name``."""

    def items(self) -> list[Obj]: ...


# -- what the host lends the framework ---------------------------------------------------


class Listers(Protocol):
    """The host's watches (kube's SharedInformerFactory)."""

    def lister(self, kind: Kind) -> Lister: ...


class PodEvents(Protocol):
    """The host's pod event handlers, which plugins may join."""

    def on_pod_event(self, handler: PodHandler) -> None: ...


class NodeInfos(Protocol):
    """The host's cache of nodes, as it is now (not as the cycle's snapshot saw it)."""

    def node_info(self, name: str) -> NodeInfo | None: ...


class PodNominator(Protocol):
    """Where preemptors hold room while their victims leave (kube's PodNominator)."""

    def nominate(self, pod: PodInfo, node: str, claim: Assignment | None) -> None: ...

    def clear_nomination(self, pod_id: str) -> None: ...


PreemptionCalls = Callable[[], str | None]
"""A preemption's API calls, run off the scheduling loop: None when they all went through,
else why the preemption failed (for the preemptor's event)."""


class Preemptions(Protocol):
    """Where preemptions' API calls run, off the scheduling loop (kube's asynchronous
    preemption, ``SchedulerAsyncPreemption``)."""

    def start(self, pod: PodInfo, node: str, calls: PreemptionCalls) -> None: ...


class WaitingPods(Protocol):
    """The pods held at Permit (kube's waiting pods map), by uid (``PodInfo.pod_id``)."""

    def allow(self, pod_id: str, plugin: str) -> bool:
        """True when ``plugin`` was the last one holding the pod."""

    def reject(self, pod_id: str, reason: str) -> bool:
        """True when the pod was held."""


class _Detached:
    """The host of a framework built without one (tests, tools): nothing is watched,
    nominated or held."""

    def get(self, key: str) -> Obj | None:
        return None

    def items(self) -> list[Obj]:
        return []

    def lister(self, kind: Kind) -> Lister:
        return self

    def on_pod_event(self, handler: PodHandler) -> None:
        return None

    def node_info(self, name: str) -> NodeInfo | None:
        return None

    def nominate(self, pod: PodInfo, node: str, claim: Assignment | None) -> None:
        return None

    def clear_nomination(self, pod_id: str) -> None:
        return None

    def allow(self, pod_id: str, plugin: str) -> bool:
        return False

    def reject(self, pod_id: str, reason: str) -> bool:
        return False

    def start(self, pod: PodInfo, node: str, calls: PreemptionCalls) -> None:
        calls()  # no loop to keep going: at once


DETACHED = _Detached()


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Host:
    """What the host lends a profile's framework, and through it the plugins."""

    config: Config = field(default_factory=Config)
    cluster: ClusterPort | None = None
    clock: Clock = time.time
    listers: Listers = DETACHED
    pod_events: PodEvents = DETACHED
    nodes: NodeInfos = DETACHED
    nominator: PodNominator = DETACHED
    waiting: WaitingPods = DETACHED
    preemptions: Preemptions = DETACHED
    #: Makes the host's scheduling loop settle the waiting room now: a plugin allowed or
    #: rejected a pod there, perhaps from another thread.
    wake: Callable[[], None] = _nothing


# -- what plugins see ----------------------------------------------------------------------


class Handle(Protocol):
    """What plugins are built with: configuration, the cluster, the clock, waiting pods,
    watched objects, and the framework's own steps for plugins that simulate (preemption)."""

    @property
    def config(self) -> Config: ...

    @property
    def cluster(self) -> ClusterPort | None: ...

    def now(self) -> float: ...

    def node_info(self, name: str) -> NodeInfo | None: ...

    def allow(self, pod_id: str, plugin: str) -> None:
        """Let a pod waiting at Permit go on to binding (when every waiting plugin allowed);
        pods are named by uid (``PodInfo.pod_id``, :func:`vgpu.pods.pod_id`) here and in
        :meth:`reject` and :meth:`clear_nomination`."""

    def reject(self, pod_id: str, plugin: str, reason: str) -> None:
        """Fail a pod waiting at Permit: it is unreserved and retried after a backoff."""

    def on_pod_event(self, handler: PodHandler) -> None:
        """Also call ``handler(old, new)`` for every pod add/update/delete the host sees."""

    def lister(self, kind: Kind) -> Lister:
        """A shared view of ``kind`` (call it when the plugin is built, so the host watches
        the kind before scheduling starts); its changes reach the plugins' ``could_help``
        as ClusterEvents whose ``resource`` is the kind's plural."""

    def run_filters(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """Every Filter of the profile (those PreFilter did not skip) on ``node``."""

    def remove_pod(self, state: CycleState, pod: PodInfo, removed: NodePod,
                   node: NodeInfo) -> Status:
        """Tell the PreFilter state in ``state`` that ``removed`` left ``node``."""

    def add_pod(self, state: CycleState, pod: PodInfo, added: NodePod,
                node: NodeInfo) -> Status:
        """Tell the PreFilter state in ``state`` that ``added`` joined ``node``."""

    def nominate(self, pod: PodInfo, node: str, claim: Assignment | None) -> None:
        """Hold room for ``pod`` on ``node`` (its CPU, memory and ``claim``) while the
        victims of its preemption leave: until it is bound, deleted, nominated elsewhere
        or attempted again (the host gives the room back to the pod first thing in each
        attempt; PostFilter nominates it again if it must still wait)."""

    def clear_nomination(self, pod_id: str) -> None:
        """Give up the room a pending pod's nomination holds (a higher-priority pod
        preempted on its node); the pod is tried again at once, as kube-scheduler moves a
        pod whose nomination it removed to the active queue."""

    def preempt(self, pod: PodInfo, node: str, calls: PreemptionCalls) -> None:
        """Run ``calls`` (the API calls of ``pod``'s preemption on ``node``) off the
        scheduling loop, once the attempt that decided them is over; the pod is not tried
        again until they are done. If they fail, its nomination is given up and it is
        tried again after a backoff."""


PluginFactory = Callable[[Handle], Any]
"""Builds a plugin for a profile; a registry entry."""
