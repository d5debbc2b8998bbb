"""The node's in-flight GPU pod, kept from a local watch of the node's pods.

Allocate must not cost an API round trip, so the agent keeps an :class:`Informer` over the
pods bound to its node and indexes those in ``vgpu.io/bind-phase: allocating`` as events
arrive. It also remembers which containers of such a pod were already allocated (on disk
too, :mod:`vgpu_nodeagent.allocation.progress`, so a restarted agent carries on), and
which pods it finished but whose phase patch the watch has not shown yet.

Allocate names no pod, so the index also keeps the pods it must never serve: a pod bound
here that asks for the device resource but that no vgpu scheduler placed (created on the
node, or naming another scheduler, while the webhook was down or before it existed), and
that the kubelet has not admitted yet. The kubelet admits the node's pods one at a time in
the order its watch shows them, which is the order this watch shows them; when such a pod
comes before every pod in allocation, the Allocate is its own, and the allocator refuses it
(:attr:`Admission.intruder`) rather than hand it another pod's grant.

A pod in allocation is served from the assignment its Binding carried: the annotation as
this watch first showed the pod in allocation, whatever edits come after.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu import meta
from vgpu.annotations import ASSIGNMENT, BIND_PHASE, PHASE_ALLOCATING
from vgpu.cluster.port import Obj
from vgpu.errors import QuantityError
from vgpu.pods import bind_phase, containers, is_terminated, node_name, pod_key, scheduler_name
from vgpu.quantity import parse_whole
from vgpu_nodeagent.allocation.progress import ProgressFile


def uid_of(pod: Obj) -> str:
    return meta.uid(pod) or pod_key(pod)


def is_allocating(pod: Obj) -> bool:
    return (bind_phase(pod) == PHASE_ALLOCATING
            and not is_terminated(pod)
            and not meta.deleting(pod))


def device_counts(pod: Obj, resource: str) -> tuple[int, ...]:
    """How many devices of ``resource`` each container asks for (by its limit, as the
    kubelet allocates them), the containers that ask for none left out."""
    out = []
    for ref in containers(pod):
        resources = ref.container.get("resources") if isinstance(ref.container, Mapping) else None
        limits = resources.get("limits") if isinstance(resources, Mapping) else None
        value = limits.get(resource) if isinstance(limits, Mapping) else None
        if value is None:
            continue
        try:
            count = parse_whole(value)
        except QuantityError:  # the API server refuses what does not parse
            continue
        if count > 0:
            out.append(count)
    return tuple(out)


def _admitted(pod: Obj) -> bool:
    """Whether the kubelet has admitted or refused the pod: it writes a status (with a
    ``startTime``) for both, and containers' statuses once admitted."""
    status = pod.get("status")
    if not isinstance(status, Mapping):
        return False
    return bool(status.get("startTime") or status.get("containerStatuses")
                or status.get("initContainerStatuses")
                or status.get("phase") not in (None, "", "Pending"))


@dataclass(frozen=True)
class Admission:
    """What the kubelet may be admitting now: the pods in allocation, in the order their
    bindings arrived, and the first pod that asks for the device resource without vgpu's
    placement when it comes before all of them."""

    pods: list[Obj] = field(default_factory=list)
    intruder: Obj | None = None

    def refused(self, sizes: Sequence[int], resource: str) -> Obj | None:
        """The intruder when a request of ``sizes`` devices is its own: it asks for those
        sizes, or no pod in allocation could take the request instead."""
        if self.intruder is None:
            return None
        if self.pods and not set(sizes) <= set(device_counts(self.intruder, resource)):
            return None
        return self.intruder


def refusal(pod: Obj, resource: str, node: str) -> str:
    """Why an Allocate for ``pod``, which no vgpu scheduler placed, is refused."""
    return (f"it asks for {resource} but no vgpu scheduler placed it (spec.schedulerName "
            f"{scheduler_name(pod)!r}, {BIND_PHASE} {bind_phase(pod) or 'unset'}), so it "
            f"holds no vGPU slice on node {node}; create it without spec.nodeName, naming no "
            f"other scheduler, and vgpu's scheduler will place it")


class InFlight:
    """Index of allocating pods plus the agent's own progress on them; thread-safe.

    ``resource`` is the device resource the kubelet allocates; ``schedulers`` the
    ``spec.schedulerName`` values whose pods vgpu places (``Config.vgpu_schedulers``).
    """

    def __init__(self, progress: ProgressFile | None = None, *, resource: str,
                 schedulers: Collection[str]) -> None:
        self._cond = threading.Condition()
        self._resource = resource
        self._schedulers = frozenset(schedulers)
        self._allocating: dict[str, Obj] = {}
        self._progress = progress
        self._done: dict[str, set[str]] = progress.load() if progress is not None else {}
        self._finished: set[str] = set()
        # Order of first sight of each pod asking for the resource (uid -> number).
        self._order: dict[str, int] = {}
        self._counter = itertools.count()
        # The assignment each pod in allocation was first seen with (uid -> text or None).
        self._bound_with: dict[str, Any] = {}
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
                and not self.placed(pod) and not _admitted(pod)
                and bool(device_counts(pod, self._resource)))

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        with self._cond:
            if old is not None and (new is None or pod_key(old) != pod_key(new)
                                    or uid_of(old) != uid_of(new)):
                self._forget(old)
            if new is None:
                return
            key, uid = pod_key(new), uid_of(new)
            if uid not in self._order and device_counts(new, self._resource):
                self._order[uid] = next(self._counter)
            if self._suspect(new, uid):
                self._suspects[uid] = new
            else:
                self._suspects.pop(uid, None)
            if is_allocating(new) and scheduler_name(new) in self._schedulers:
                # A dict keeps first-insertion order: the order this watch showed the
                # bindings, which is the kubelet's (it admits pods in its own watch's order
                # of the same writes), not the scheduler's bind-time.
                self._allocating[key] = self._as_bound(new, uid)
            else:
                self._allocating.pop(key, None)
                self._bound_with.pop(uid, None)
                self._finished.discard(uid)
                self._done.pop(uid, None)
            self._cond.notify_all()

    def _as_bound(self, pod: Obj, uid: str) -> Obj:
        """``pod`` carrying the assignment it was first seen in allocation with."""
        notes = meta.annotations_of(pod)
        first = self._bound_with.setdefault(uid, notes.get(ASSIGNMENT))
        if notes.get(ASSIGNMENT) == first:
            return pod
        metadata = dict(meta.of(pod))
        metadata["annotations"] = {**notes, ASSIGNMENT: first}
        if first is None:
            del metadata["annotations"][ASSIGNMENT]
        return {**pod, "metadata": metadata}

    def _forget(self, pod: Obj) -> None:
        self._allocating.pop(pod_key(pod), None)
        uid = uid_of(pod)
        self._finished.discard(uid)
        self._done.pop(uid, None)
        self._bound_with.pop(uid, None)
        self._order.pop(uid, None)
        self._suspects.pop(uid, None)
        self._refused.discard(uid)

    # -- queries ---------------------------------------------------------------------------

    def _candidates(self) -> list[Obj]:
        return [p for p in self._allocating.values() if uid_of(p) not in self._finished]

    def _ahead(self, pods: list[Obj]) -> Obj | None:
        """The first suspect, when it came before every pod in allocation."""
        if not self._suspects:
            return None
        first = min(self._suspects.values(), key=lambda p: self._order.get(uid_of(p), -1))
        at = self._order.get(uid_of(first), -1)
        if any(self._order.get(uid_of(p), at + 1) < at for p in pods):
            return None
        return first

    def current(self) -> list[Obj]:
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

    def done(self, pod: Obj) -> frozenset[str]:
        with self._cond:
            return frozenset(self._done.get(uid_of(pod), ()))

    # -- progress --------------------------------------------------------------------------

    def refuse(self, pod: Obj) -> None:
        """The allocator refused the pod's Allocate: the kubelet rejects the pod, so it is
        no longer what the kubelet may be admitting."""
        with self._cond:
            uid = uid_of(pod)
            self._refused.add(uid)
            self._suspects.pop(uid, None)
            self._cond.notify_all()

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
