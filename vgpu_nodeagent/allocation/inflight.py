"""The node's in-flight GPU pods, kept from a local watch of the node's pods, and which of
them an Allocate is for.

Allocate must not cost an API round trip, so the agent keeps an :class:`Informer` over the
pods bound to its node and indexes those in ``vgpu.io/bind-phase: allocating`` as events
arrive, each decoded once (:class:`~vgpu_nodeagent.allocation.inflight_pod.InFlightPod`:
the assignment its Binding carried, whatever edits come after). It also remembers which
containers of such a pod were already allocated (on disk too,
:mod:`vgpu_nodeagent.allocation.progress`, so a restarted agent carries on), and which pods
it finished but whose phase patch the watch has not shown yet. :meth:`InFlight.claim`
picks the pod and containers a request is for.

Allocate names no pod, so the index also keeps the pods it must never serve: a pod bound
here that asks for the device resource but that no vgpu scheduler placed (created on the
node, or naming another scheduler, while the webhook was down or before it existed), and
that the kubelet has not admitted yet. The kubelet admits the node's pods one at a time in
the order its watch shows them, which is the order this watch shows them; when such a pod
comes before every pod in allocation, the Allocate is its own, and the claim is refused
(:class:`~vgpu_nodeagent.allocation.errors.Refused`) rather than handed another pod's grant.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections.abc import Collection, Sequence

from vgpu import logs, meta
from vgpu.annotations import BIND_PHASE, PHASE_ALLOCATING
from vgpu.cluster.port import Obj
from vgpu.pods import bind_phase, is_terminated, node_name, pod_key, scheduler_name
from vgpu_nodeagent.allocation.errors import AllocateError, Code, Refused, Unservable
from vgpu_nodeagent.allocation.inflight_pod import (
    Admission,
    Claim,
    InFlightPod,
    MatchError,
    decode,
    first_by_gpus,
    gpus_of,
    is_allocating,
    uid_of,
)
from vgpu_nodeagent.allocation.intruders import admitted, device_counts, refusal
from vgpu_nodeagent.allocation.progress import ProgressFile

# The allocator's: what it logs about a claim reads as one with what it logs itself.
_log = logs.get("vgpu.nodeagent.allocate")


class InFlight:
    """Index of allocating pods plus the agent's own progress on them; thread-safe.

    ``node`` is the node the agent serves; ``resource`` the device resource the kubelet
    allocates; ``schedulers`` the ``spec.schedulerName`` values whose pods vgpu places
    (``Config.vgpu_schedulers``).
    """

    def __init__(self, progress: ProgressFile | None = None, *, node: str, resource: str,
                 schedulers: Collection[str]) -> None:
        self._cond = threading.Condition()
        self._node = node
        self._resource = resource
        self._schedulers = frozenset(schedulers)
        self._allocating: dict[str, InFlightPod] = {}
        self._progress = progress
        # What a previous run served, for pods the watch has not shown in allocation yet.
        self._saved: dict[str, set[str]] = progress.load() if progress is not None else {}
        self._finished: set[str] = set()
        # Order of first sight of each pod asking for the resource (uid -> number).
        self._order: dict[str, int] = {}
        self._counter = itertools.count()
        self._suspects: dict[str, Obj] = {}
        self._refused: set[str] = set()

    # -- informer handler ------------------------------------------------------------------

    def placed(self, pod: Obj) -> bool:
        """Whether a vgpu scheduler bound the pod with its annotations (its name cannot
        change after creation; the annotations came with the Binding)."""
        return scheduler_name(pod) in self._schedulers and bind_phase(pod) is not None

    def _suspect(self, pod: Obj, uid: str) -> bool:
        return (uid not in self._refused and node_name(pod) is not None
                and not is_terminated(pod) and not meta.deleting(pod)
                and not self.placed(pod) and not admitted(pod)
                and bool(device_counts(pod, self._resource)))

    def on_pod(self, old: Obj | None, new: Obj | None) -> InFlightPod | None:
        """Index the change. Returns a pod in allocation whose every container a previous
        run of this agent served, but that it did not live to mark: the index stops
        offering it, and the caller writes its phase (the kubelet will not call again)."""
        with self._cond:
            if old is not None and (new is None or pod_key(old) != pod_key(new)
                                    or uid_of(old) != uid_of(new)):
                self._forget(old)
            if new is None:
                return None
            key, uid = pod_key(new), uid_of(new)
            if uid not in self._order and device_counts(new, self._resource):
                self._order[uid] = next(self._counter)
            if self._suspect(new, uid):
                self._suspects[uid] = new
            else:
                self._suspects.pop(uid, None)
            self._cond.notify_all()
            if not (is_allocating(new) and scheduler_name(new) in self._schedulers):
                self._allocating.pop(key, None)
                self._finished.discard(uid)
                self._saved.pop(uid, None)
                return None
            held = self._allocating.get(key)
            if held is not None and held.uid == uid:
                record = dataclasses.replace(held, pod=new)  # as its Binding carried it
            else:
                record = decode(new, self._node, self._saved.pop(uid, ()))
            # A dict keeps first-insertion order: the order this watch showed the bindings,
            # which is the kubelet's (it admits pods in its own watch's order of the same
            # writes), not the scheduler's bind-time.
            self._allocating[key] = record
            if record.done and record.complete and uid not in self._finished:
                self._finished.add(uid)
                return record
            return None

    def _forget(self, pod: Obj) -> None:
        self._allocating.pop(pod_key(pod), None)
        uid = uid_of(pod)
        self._finished.discard(uid)
        self._saved.pop(uid, None)
        self._order.pop(uid, None)
        self._suspects.pop(uid, None)
        self._refused.discard(uid)

    # -- queries ---------------------------------------------------------------------------

    def _candidates(self) -> list[InFlightPod]:
        return [p for p in self._allocating.values() if p.uid not in self._finished]

    def _ahead(self, pods: list[InFlightPod]) -> Obj | None:
        """The first suspect, when it came before every pod in allocation."""
        if not self._suspects:
            return None
        first = min(self._suspects.values(), key=lambda p: self._order.get(uid_of(p), -1))
        at = self._order.get(uid_of(first), -1)
        if any(self._order.get(p.uid, at + 1) < at for p in pods):
            return None
        return first

    def current(self) -> list[InFlightPod]:
        """Allocating pods the agent has not finished, in the order their bindings
        arrived."""
        with self._cond:
            return self._candidates()

    def wait(self, timeout: float) -> Admission:
        """What the kubelet may be admitting, waiting up to ``timeout`` seconds for a pod
        in allocation or a suspect to appear: the kubelet may call before this agent's watch
        has delivered the pod."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                pods = self._candidates()
                intruder = self._ahead(pods)
                remaining = deadline - time.monotonic()
                if pods or intruder is not None or remaining <= 0:
                    return Admission(pods, intruder)
                self._cond.wait(remaining)

    def _intruders_own(self, admission: Admission, sizes: Sequence[int]) -> Obj | None:
        """The intruder when a request of ``sizes`` devices is its own: it asks for those
        sizes, or no pod in allocation could take the request instead."""
        intruder = admission.intruder
        if intruder is None:
            return None
        if admission.pods and not set(sizes) <= set(device_counts(intruder, self._resource)):
            return None
        return intruder

    def claim(self, requests: Sequence[Sequence[str]], known: Collection[str],
              timeout: float) -> Claim:
        """The pod and containers an Allocate of ``requests`` (device IDs of ``known``
        GPUs, one list per container) is for: the first pod in allocation with containers
        assigned exactly the GPUs each request names, else the first pod by device counts.

        Raises :class:`Refused` when the request is an intruder's own (it is then no
        longer waited on), :class:`Unservable` when the first pod cannot take it (the pod
        is then no longer offered), and :class:`AllocateError` when no pod is in allocation
        after ``timeout`` seconds.
        """
        gpu_sets = [gpus_of(ids, known) for ids in requests]
        admission = self.wait(timeout)
        intruder = self._intruders_own(admission, [len(ids) for ids in requests])
        if intruder is not None:
            self.refuse(intruder)
            raise Refused(intruder, refusal(intruder, self._resource, self._node))
        if not admission.pods:
            raise AllocateError(
                Code.FAILED_PRECONDITION,
                f"no pod on node {self._node} is in {BIND_PHASE}={PHASE_ALLOCATING} (waited "
                f"{timeout:g}s for the local pod watch); Allocate names no pod, so vgpu "
                f"serves only pods placed by its scheduler")
        claim = first_by_gpus(admission.pods, gpu_sets)
        if claim is not None:
            return claim
        first = admission.pods[0]
        try:
            names = first.by_counts([len(g) for g in gpu_sets])
        except MatchError as exc:
            self.finish(first)
            raise Unservable(first.pod, str(exc)) from None
        if len(admission.pods) > 1:
            _log.warning("no pod in allocation matches the device IDs; serving the oldest "
                         "by device count", pods=[p.key for p in admission.pods])
        return Claim(first, names)

    def steer(self, size: int, skip: Collection[str], timeout: float,
              ) -> tuple[str, tuple[str, ...]] | None:
        """The container a request of ``size`` devices is likely for, and the GPUs it was
        assigned (for GetPreferredAllocation); None when no pod in allocation has one
        waiting. ``skip`` names containers earlier requests of the same call took."""
        admission = self.wait(timeout)
        # An intruder's request is steered to no pod's GPUs (its Allocate will be refused).
        if self._intruders_own(admission, [size]) is not None:
            return None
        # The request names no pod: the first in-flight pod with a container of that size
        # still waiting (the kubelet admits pods in the order its watch shows the bindings,
        # which is the order ours showed them).
        for pod in admission.pods:
            try:
                (container,) = pod.by_counts([size], skip)
            except MatchError as exc:
                _log.info("no assigned GPUs to prefer", pod=pod.key, reason=str(exc))
                continue
            assert pod.assignment is not None
            return container, tuple(g.uuid for g in pod.assignment.containers[container])
        return None

    # -- progress --------------------------------------------------------------------------

    def refuse(self, pod: Obj) -> None:
        """An Allocate of the pod was refused: the kubelet rejects the pod, so it is no
        longer what the kubelet may be admitting."""
        with self._cond:
            uid = uid_of(pod)
            self._refused.add(uid)
            self._suspects.pop(uid, None)
            self._cond.notify_all()

    def served(self, claim: Claim) -> InFlightPod:
        """Record the claim's containers as served, saved before the caller answers the
        kubelet; once every container is, the pod is no longer offered. Returns the pod
        with the containers served so far."""
        with self._cond:
            held = self._allocating.get(claim.pod.key)
            current = held if held is not None and held.uid == claim.pod.uid else claim.pod
            pod = dataclasses.replace(current, done=current.done | set(claim.containers))
            if current is held:
                self._allocating[pod.key] = pod
            if self._progress is not None:
                # Only the pods in allocation: entries of pods no longer allocating
                # (finished, deleted while the agent was down) are dropped here rather than
                # on every watch event.
                self._progress.save({p.uid: p.done for p in self._allocating.values()
                                     if p.done} | {pod.uid: pod.done})
            if pod.complete:
                self._finished.add(pod.uid)
                self._cond.notify_all()
            return pod

    def finish(self, pod: InFlightPod) -> None:
        """The agent wrote (or is writing) this pod's final phase: stop offering it."""
        with self._cond:
            self._finished.add(pod.uid)
            self._cond.notify_all()
