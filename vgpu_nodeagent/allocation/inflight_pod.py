"""A pod in allocation as the in-flight index holds it, which of its containers an Allocate
request is for (a :class:`Claim`), and what the index shows the kubelet may be admitting
(an :class:`Admission`).

The assignment is decoded once, when the watch first shows the pod in allocation: the one
its Binding carried, whatever edits come after (issue 24), checked to be for this node.

The kubelet's Allocate names device IDs, never a pod or container. GetPreferredAllocation
steered it to slots on the GPUs the container was assigned, so a request is first matched
by those GPUs: to a container not yet allocated that was assigned exactly the GPUs its
device IDs name (:meth:`InFlightPod.by_gpus`, tried on the in-flight pods in the order
their bindings arrived). The scheduler's Permit gate keeps pods that this cannot tell apart
from being in flight on a node together (:mod:`vgpu.confusable`). When no pod matches by
GPUs (the kubelet ignored the preference), the first pod is matched by device count as
before: the kubelet allocates a pod's containers one by one, init containers first, in
spec order, so the request for ``n`` devices belongs to the first container, in that
order, that was assigned ``n`` GPUs and has not been allocated yet
(:meth:`InFlightPod.by_counts`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from vgpu import meta
from vgpu.annotations import ASSIGNMENT, PHASE_ALLOCATING
from vgpu.cluster.port import Obj
from vgpu.codecs import Assignment, assignment_of
from vgpu.errors import CodecError, VgpuError
from vgpu.pods import bind_phase, container_names, is_terminated, pod_key
from vgpu_nodeagent.devices.virtual import physical_uuid


class MatchError(VgpuError):
    """No remaining container of the pod fits the request."""


def uid_of(pod: Obj) -> str:
    return meta.uid(pod) or pod_key(pod)


def is_allocating(pod: Obj) -> bool:
    return (bind_phase(pod) == PHASE_ALLOCATING
            and not is_terminated(pod)
            and not meta.deleting(pod))


def start_order(assignment: Assignment, order: Sequence[str]) -> tuple[str, ...]:
    """The assignment's containers in start order (names the spec lacks go last)."""
    position = {name: i for i, name in enumerate(order)}
    return tuple(sorted(assignment.containers,
                        key=lambda name: (position.get(name, len(position)), name)))


@dataclass(frozen=True)
class InFlightPod:
    """A pod in allocation: the pod as the watch last showed it, its assignment as its
    Binding carried it, and the containers this agent already served."""

    pod: Obj
    key: str
    uid: str
    #: None when the pod cannot be served from it; ``problem`` says why.
    assignment: Assignment | None
    problem: str
    #: The assignment's containers, in the order the kubelet allocates them.
    containers: tuple[str, ...]
    done: frozenset[str] = frozenset()

    @property
    def complete(self) -> bool:
        """Whether every container of the assignment was served."""
        return self.assignment is not None and all(n in self.done for n in self.containers)

    def by_gpus(self, gpu_sets: Sequence[frozenset[str]]) -> tuple[str, ...] | None:
        """The container each request is for, by the GPUs its device IDs name; None when a
        request has no container assigned exactly those GPUs that is still waiting."""
        if self.assignment is None:
            return None
        granted = self.assignment.containers
        chosen: list[str] = []
        for gpus in gpu_sets:
            name = next((n for n in self.containers
                         if n not in self.done and n not in chosen
                         and len(granted[n]) == len(gpus)
                         and {s.uuid for s in granted[n]} == gpus), None)
            if name is None:
                return None
            chosen.append(name)
        return tuple(chosen)

    def by_counts(self, counts: Sequence[int], skip: Collection[str] = ()) -> tuple[str, ...]:
        """The container each request (by its device count) is for, in request order.

        Raises :class:`MatchError` when a count matches no remaining container, or the pod
        cannot be served at all.
        """
        if self.assignment is None:
            raise MatchError(self.problem)
        if not self.containers:
            raise MatchError("the pod's assignment names no container")
        remaining = [n for n in self.containers if n not in self.done and n not in skip]
        chosen: list[str] = []
        for count in counts:
            left = [n for n in remaining if n not in chosen]
            name = next((n for n in left if len(self.assignment.containers[n]) == count), None)
            if name is not None:
                chosen.append(name)
                continue
            if not left:
                raise MatchError(
                    f"the kubelet asks for {count} device(s) but every GPU container of the "
                    f"pod was already allocated: {self._describe(self.containers)}")
            raise MatchError(
                f"the kubelet asks for {count} device(s) for a container, but no container "
                f"still waiting for its GPUs was assigned {count}: {self._describe(left)}")
        return tuple(chosen)

    def _describe(self, names: Sequence[str]) -> str:
        assert self.assignment is not None
        granted = self.assignment.containers
        return ", ".join(f"{name} ({len(granted[name])} GPU"
                         f"{'' if len(granted[name]) == 1 else 's'})" for name in names)


def decode(pod: Obj, node: str, done: Collection[str] = ()) -> InFlightPod:
    """``pod`` as Allocate serves it, its assignment decoded (once: the index keeps it)."""
    try:
        assignment = assignment_of(pod)
        if assignment is None:
            raise CodecError(f"it has no {ASSIGNMENT} annotation")
        if assignment.node != node:
            raise CodecError(f"its assignment is for node {assignment.node!r}, "
                             f"not this node {node!r}")
    except CodecError as exc:
        return InFlightPod(pod, pod_key(pod), uid_of(pod), None, str(exc), (), frozenset(done))
    return InFlightPod(pod, pod_key(pod), uid_of(pod), assignment, "",
                       start_order(assignment, container_names(pod)), frozenset(done))


@dataclass(frozen=True)
class Claim:
    """What an Allocate is for: a pod in allocation and, per container request in order,
    the container it serves."""

    pod: InFlightPod
    containers: tuple[str, ...]


def first_by_gpus(pods: Sequence[InFlightPod],
                  gpu_sets: Sequence[frozenset[str]]) -> Claim | None:
    """The first pod (oldest first) whose containers match every request by GPUs, and
    those containers; None when none does."""
    for pod in pods:
        names = pod.by_gpus(gpu_sets)
        if names is not None:
            return Claim(pod, names)
    return None


@dataclass(frozen=True)
class Admission:
    """What the kubelet may be admitting now: the pods in allocation, in the order their
    bindings arrived, and the first pod that asks for the device resource without vgpu's
    placement when it comes before all of them."""

    pods: list[InFlightPod] = field(default_factory=list)
    intruder: Obj | None = None


def gpus_of(ids: Sequence[str], known: Collection[str]) -> frozenset[str]:
    """The GPUs a request's device IDs are slots of (all known: checked before)."""
    gpus = frozenset(physical_uuid(i, known) or i for i in ids)
    # Slots of one GPU twice: no container is assigned that, so only the count can match.
    return gpus if len(gpus) == len(ids) else frozenset(ids)
