"""When two GPU pods in flight on one node could be told apart by the node agent.

The kubelet's Allocate names device IDs, never a pod. GetPreferredAllocation steers the
kubelet to slots on the GPUs a container was assigned, and the agent matches an Allocate
request to the in-flight container assigned exactly those GPUs
(vgpu_nodeagent/allocation/inflight_pod.py).
So two pods can be in flight on a node at once unless some container of one and some
container of the other ask for the same number of GPUs on overlapping GPUs with different
grants: then the device IDs do not say whose request it is, and a mix-up would hand one
pod the other's limits. Same GPUs with identical grants are interchangeable: a mix-up
changes nothing the containers or the GPUs' totals see.

The scheduler's Permit gate (vgpu_scheduler/plugins/gpu/allocation_gate/) holds a pod only
while it is :func:`confusable` with one already in flight.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping

from vgpu.codecs import Assignment, GrantedDevice

#: Whether two assignments may not be in flight on one node together.
Conflicts = Callable[[Assignment | None, Assignment | None], bool]

_PLACEHOLDER = operator.methodcaller("startswith", "?")

_Grant = tuple[tuple[GrantedDevice, ...], int | None]


def _grants(assignment: Assignment) -> list[_Grant]:
    return [(tuple(sorted(slices, key=lambda s: (s.uuid, s.memory_mib, s.cores))),
             assignment.priorities.get(name))
            for name, slices in assignment.containers.items() if slices]


def _clash(a: _Grant, b: _Grant) -> bool:
    slices_a, slices_b = a[0], b[0]
    if len(slices_a) != len(slices_b):
        return False  # the request's device count tells them apart
    if not {s.uuid for s in slices_a} & {s.uuid for s in slices_b}:
        return False  # the request's device IDs tell them apart
    return a != b


def confusable(a: Assignment | None, b: Assignment | None) -> bool:
    """Could an Allocate request for a container of one be taken for the other's?

    An assignment that is not known (None: unreadable, or a pod seen only by its phase) is
    confusable with anything, as is one on another node (it should not be in flight here).
    """
    if a is None or b is None or a.node != b.node:
        return True
    grants_b = _grants(b)
    return any(_clash(ga, gb) for ga in _grants(a) for gb in grants_b)


def any_confusable(new: Assignment | None, inflight: Mapping[str, Assignment | None]) -> bool:
    return any(confusable(new, other) for other in inflight.values())


def gpus_at_stake(node: str, inflight: Iterable[Assignment | None]) -> frozenset[str] | None:
    """The GPUs of ``node`` on which an assignment there can be :func:`confusable` with one
    of ``inflight`` (a clash needs a shared device ID); None when that is any GPU: some
    assignment is unknown, on another node, or names a placeholder ID (``?``)."""
    uuids: set[str] = set()
    for other in inflight:
        if other is None or other.node != node:
            return None
        uuids |= other.gpu_ids
    return None if any(map(_PLACEHOLDER, uuids)) else frozenset(uuids)


#: Per GPU, the (memory MiB, cores, priority) of each one-GPU container in flight on it.
OneGpuGrants = dict[str, set[tuple[int, int, int | None]]]


def one_gpu_grants(node: str, inflight: Iterable[Assignment | None]) -> OneGpuGrants | None:
    """What a one-GPU container's grant on ``node`` can be :func:`confusable` with: the
    one-GPU containers in flight there, by GPU (a multi-GPU container's request names
    another number of devices). None when that is anything: some assignment is unknown or
    on another node."""
    out: OneGpuGrants = {}
    for other in inflight:
        if other is None or other.node != node:
            return None
        for name, slices in other.containers.items():
            if len(slices) == 1:
                grant = slices[0]
                out.setdefault(grant.uuid, set()).add(
                    (grant.memory_mib, grant.cores, other.priorities.get(name)))
    return out


def one_gpu_confusable(uuid: str, memory_mib: int, cores: int, priority: int | None,
                       held: OneGpuGrants) -> bool:
    """Whether a pod whose one container is granted ``memory_mib`` and ``cores`` on GPU
    ``uuid`` is :func:`confusable` with the pods in flight whose :func:`one_gpu_grants`
    are ``held``, without building its assignment: the Permit gate asks this of GPUs on
    every busy node the filters visit."""
    others = held.get(uuid)
    if not others:
        return False
    return len(others) > 1 or (memory_mib, cores, priority) not in others
