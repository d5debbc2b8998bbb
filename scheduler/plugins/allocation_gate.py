"""Permit: one GPU pod in flight per node (DESIGN §4).

The kubelet's Allocate call carries device IDs, not a pod, so the node agent finds "the"
pod in ``bind-phase: allocating`` on its node. This gate keeps that pod unique: a GPU pod
chosen for a node whose previous GPU pod has not reached ``success`` or ``failed`` waits
at Permit (holding its reservation) and is let through, first come first served, when
that pod's phase moves on, the pod is deleted, or ``permitTimeoutSeconds`` passes since it
was let through. Only that node's pods wait; the scheduling cycle goes on for others.
"""

from __future__ import annotations

import threading
from collections import deque

import vgpu.annotations as ann
from scheduler.framework.cycle import CycleState
from scheduler.framework.interfaces import Handle
from scheduler.framework.podinfo import PodInfo
from scheduler.framework.status import SUCCESS, WAIT, Status
from vgpu import codecs, logs
from vgpu.cluster.port import Obj
from vgpu.pods import annotations_of, bind_phase, is_terminated, node_name, pod_key

_log = logs.get("vgpu.scheduler.gate")


class Gate:
    """The per-node state, free of framework types so it can be tested on its own."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._lock = threading.RLock()
        self._holders: dict[str, dict[str, float]] = {}
        self._waiting: dict[str, deque[str]] = {}
        self._where: dict[str, str] = {}

    def holders(self, node: str) -> dict[str, float]:
        with self._lock:
            return dict(self._holders.get(node, {}))

    def waiting(self, node: str) -> list[str]:
        with self._lock:
            return list(self._waiting.get(node, ()))

    def is_open(self, node: str, now: float) -> bool:
        with self._lock:
            holders = self._holders.get(node)
            if not holders:
                return True
            for key, since in list(holders.items()):
                if now - since >= self.timeout:
                    _log.warning("in-flight GPU pod timed out; opening the node's gate",
                                 node=node, pod=key, seconds=round(now - since, 1))
                    del holders[key]
            if not holders:
                del self._holders[node]
                return True
            return False

    def enter(self, key: str, node: str, now: float) -> bool:
        """True: the pod holds the gate now. False: it waits behind the holder."""
        with self._lock:
            if self.is_open(node, now) and not self._waiting.get(node):
                self._holders.setdefault(node, {})[key] = now
                return True
            if self._where.get(key) != node:
                self._waiting.setdefault(node, deque()).append(key)
                self._where[key] = node
            return False

    def hold(self, key: str, node: str, since: float) -> None:
        """A pod seen in ``allocating`` (after a restart, or bound by another replica).

        If the gate had let it through on another node (its Binding lost a race to
        another binder), that node's hold is released: the pod is not in flight there.
        """
        with self._lock:
            for other, holders in list(self._holders.items()):
                if other != node and holders.pop(key, None) is not None and not holders:
                    del self._holders[other]
            holders = self._holders.setdefault(node, {})
            holders.setdefault(key, since)

    def leave(self, key: str) -> str | None:
        """The pod no longer holds or waits for any gate; returns the node it was at."""
        with self._lock:
            found: str | None = None
            for node, holders in list(self._holders.items()):
                if holders.pop(key, None) is not None:
                    found = node
                    if not holders:
                        del self._holders[node]
            waited = self._where.pop(key, None)
            if waited is not None:
                queue = self._waiting.get(waited)
                if queue is not None and key in queue:
                    queue.remove(key)
                    if not queue:
                        del self._waiting[waited]
                found = found or waited
            return found

    def advance(self, node: str, now: float) -> str | None:
        """If the node's gate is open, let its first waiter through and return it."""
        with self._lock:
            queue = self._waiting.get(node)
            if not queue or not self.is_open(node, now):
                return None
            key = queue.popleft()
            if not queue:
                del self._waiting[node]
            self._where.pop(key, None)
            self._holders.setdefault(node, {})[key] = now
            return key

    def nodes_with_waiters(self) -> list[str]:
        with self._lock:
            return list(self._waiting)


class AllocationGate:
    name = "AllocationGate"

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self.gate = Gate(handle.config.scheduler.permit_timeout_seconds)
        handle.on_pod_event(self._on_pod)

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        if not pod.is_gpu_pod:
            return SUCCESS
        return SUCCESS if self.gate.enter(pod.key, node, state.now) else WAIT

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self._release(pod.key, self._handle.now())

    def _advance(self, node: str, now: float) -> None:
        key = self.gate.advance(node, now)
        if key is not None:
            self._handle.allow(key, self.name)

    def tick(self, now: float) -> None:
        for node in self.gate.nodes_with_waiters():
            self._advance(node, now)

    def _release(self, key: str, now: float) -> None:
        node = self.gate.leave(key)
        if node is not None:
            self._advance(node, now)

    def _on_pod(self, old: Obj | None, new: Obj | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        key = pod_key(obj)
        now = self._handle.now()
        if new is None:
            self._release(key, now)
            return
        phase = bind_phase(new)
        bound = node_name(new)
        if phase == ann.PHASE_ALLOCATING and bound and not is_terminated(new):
            since = codecs.bind_time(annotations_of(new))
            self.gate.hold(key, bound, now if since is None else since)
        elif phase in (ann.PHASE_SUCCESS, ann.PHASE_FAILED) or is_terminated(new) or bound:
            # Allocated, failed, ended, or bound without our annotations (by another
            # scheduler): nothing to wait for.
            self._release(key, now)
