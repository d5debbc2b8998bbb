"""A pod bound to this node that asks for the device resource but that no vgpu scheduler
placed (created on the node, or naming another scheduler, while the webhook was down or
before it existed): what the in-flight index tells one by, and why its Allocate is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

from vgpu.annotations import BIND_PHASE
from vgpu.cluster.port import Obj
from vgpu.errors import QuantityError
from vgpu.pods import bind_phase, containers, scheduler_name
from vgpu.quantity import parse_whole


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


def admitted(pod: Obj) -> bool:
    """Whether the kubelet has admitted or refused the pod: it writes a status (with a
    ``startTime``) for both, and containers' statuses once admitted."""
    status = pod.get("status")
    if not isinstance(status, Mapping):
        return False
    return bool(status.get("startTime") or status.get("containerStatuses")
                or status.get("initContainerStatuses")
                or status.get("phase") not in (None, "", "Pending"))


def refusal(pod: Obj, resource: str, node: str) -> str:
    """Why an Allocate for ``pod``, which no vgpu scheduler placed, is refused."""
    return (f"it asks for {resource} but no vgpu scheduler placed it (spec.schedulerName "
            f"{scheduler_name(pod)!r}, {BIND_PHASE} {bind_phase(pod) or 'unset'}), so it "
            f"holds no vGPU slice on node {node}; create it without spec.nodeName, naming no "
            f"other scheduler, and vgpu's scheduler will place it")
