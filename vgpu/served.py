"""What the node agent served a pod, recorded where the pod's owner cannot write it.

A pod's ``vgpu.io/assignment`` annotation is the Binding's record of the scheduler's
decision, but annotations are the pod owner's to edit: ``/validate`` refuses that, yet
where it fails open (the 1.20 overlay's ``failurePolicy: Ignore``) an edit would survive,
and a restarted scheduler rebuilt from it would place another pod in the room a container
still holds (issue 36, case 5). So when the agent has served every GPU container of a pod,
it writes the assignment it served into a pod condition, ``vgpu.io/Allocated``, through
the ``pods/status`` subresource, which a namespace's ``edit`` role does not grant: that
record, not the annotation, is what every reader counts once it exists
(:func:`vgpu.usage.claimed`), and an annotation that disagrees with it is reported, never
obeyed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from vgpu import times
from vgpu.codecs import (
    Assignment,
    assignment_of,
    decode_assignment,
    encode_assignment,
    of_pod,
)
from vgpu.errors import CodecError

#: The condition type (a domain-prefixed name, as Kubernetes asks of pod readiness gates and
#: conditions it does not own; the kubelet keeps conditions it does not own).
CONDITION = "vgpu.io/Allocated"
REASON = "Allocated"


def condition(assignment: Assignment, now: dt.datetime) -> dict[str, str]:
    """The condition recording that ``assignment`` was served."""
    return {"type": CONDITION, "status": "True", "reason": REASON,
            "message": encode_assignment(assignment),
            "lastTransitionTime": times.format_time(now)}


def served(pod: Mapping[str, Any]) -> Assignment | None:
    """The assignment the agent recorded serving, or None when there is no such record.

    Raises :class:`CodecError` when the record is there but cannot be read.
    """
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    if not isinstance(conditions, list):
        return None
    for item in conditions:
        if isinstance(item, Mapping) and item.get("type") == CONDITION \
                and item.get("status") == "True":
            return of_pod(decode_assignment(item.get("message")), pod)
    return None


def held(pod: Mapping[str, Any]) -> Assignment | None:
    """The slices the pod holds by vgpu's own records: what the agent served once it
    served it, else what its Binding carried. Raises :class:`CodecError` when the record
    used cannot be read."""
    recorded = served(pod)
    return recorded if recorded is not None else assignment_of(pod)


def edited(pod: Mapping[str, Any]) -> str | None:
    """Why the pod's assignment annotation is not what the agent served (None when it is,
    or when nothing was served yet): what an owner's edit looks like."""
    try:
        recorded = served(pod)
    except CodecError:
        return None
    if recorded is None:
        return None
    try:
        annotated = assignment_of(pod)
    except CodecError as exc:
        return f"the assignment annotation no longer reads ({exc})"
    if annotated != recorded:
        return "the assignment annotation differs from the assignment served"
    return None
