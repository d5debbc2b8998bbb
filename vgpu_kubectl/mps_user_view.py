"""MPS users as ``vgpu why`` and ``vgpu inspect`` show them (:mod:`vgpu.mps_users`,
docs/isolation.md#mps-users).

The same reading as the scheduler's ``MpsUser`` plugin: a GPU is an MPS GPU when the mode
its agent reports, or the mode its node is configured for, is an MPS mode (``auto`` as its
agent resolved it, else as "may be"); a placed pod's user is the uid its assignment
recorded, else what its spec states; the pending pod's, what its spec states now.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from vgpu import mps_users
from vgpu.codecs import Assignment
from vgpu.devices import Device
from vgpu.mps_users import User
from vgpu.pods import node_name, pod_key
from vgpu.requests import PodRequest

Obj = Mapping[str, Any]
#: Per (node, GPU uuid), the users of the pods on that GPU.
Occupants = Mapping[tuple[str, str], Sequence[User]]


def user_of(pod: Obj, assignment: Assignment) -> User:
    """A placed pod's user: as recorded at its placement, else as its spec says."""
    return mps_users.held(assignment.run_as_user, pod, assignment.containers.keys(),
                          pod_key(pod))


def add(occupants: dict[tuple[str, str], list[User]], pod: Obj,
        assignment: Assignment) -> None:
    node = node_name(pod) or assignment.node
    who = user_of(pod, assignment)
    for uuid in assignment.gpu_ids:
        occupants.setdefault((node, uuid), []).append(who)


def on_mps(device: Device, configured: str | None) -> bool:
    return mps_users.on_mps(device.isolation, configured or device.isolation)


def serves(device: Device, configured: str | None, on_gpu: Sequence[User]) -> str | None:
    """Whom an MPS GPU's server serves now (``uid 1000``; ``ns/pod`` for a pod whose uid is
    unknown; ``""``: nobody); None for a GPU that is not on MPS."""
    if not on_mps(device, configured):
        return None
    labels = sorted({f"uid {u.uid}" if u.uid is not None else u.pod for u in on_gpu})
    return ", ".join(labels)


def describe(user: User) -> str:
    if user.mixed:
        return (f"{user.source}: on a GPU in mps or mps-hami-core its containers would wait "
                f"on each other, so it goes on none")
    if user.uid is None:
        return (f"{user.source}: on a GPU in mps or mps-hami-core it shares the GPU with no "
                f"other pod (set runAsUser to share)")
    return (f"uid {user.uid} ({user.source}): on a GPU in mps or mps-hami-core it shares the "
            f"GPU only with pods of uid {user.uid}")


def for_pending(pod: Obj, request: PodRequest, placed: Iterable[tuple[Obj, Assignment]],
                inventories: Mapping[str, Sequence[Device]], modes: Mapping[str, str], *,
                on: bool = True) -> tuple[str | None, dict[str, Collection[str]]]:
    """For a pod no node took: its MPS-user line and, per node, the MPS GPUs it may not
    join. No line when no MPS GPU bars it, or the rule is off (``on``:
    ``isolation.mps.placeByUser``)."""
    if not on:
        return None, {}
    me = mps_users.effective(pod, {c.name for c in request.containers if c.count},
                             pod_key(pod))
    occupants: dict[tuple[str, str], list[User]] = {}
    for other, assignment in placed:
        add(occupants, other, assignment)
    closed: dict[str, Collection[str]] = {}
    for node, devices in inventories.items():
        gpus = {d.uuid for d in devices if on_mps(d, modes.get(node)) and (
            me.mixed or mps_users.blocker(me, occupants.get((node, d.uuid), ())) is not None)}
        if gpus:
            closed[node] = gpus
    if not closed:
        return None, {}
    count = sum(len(g) for g in closed.values())
    return (f"{describe(me)}; {count} GPU(s) on {len(closed)} node(s) serve another user"
            if not me.mixed else describe(me)), closed


def for_placed(pod: Obj, assignment: Assignment, devices: Sequence[Device],
               configured: str | None) -> str | None:
    """For a placed pod on an MPS GPU: the user its GPUs serve it as; none elsewhere."""
    if not any(on_mps(d, configured) for d in devices if d.uuid in assignment.gpu_ids):
        return None
    return describe(user_of(pod, assignment))
