"""Which pod annotations are vgpu's own, and which of them a write touches.

The components keep their state on pods as annotations (docs/contracts.md#pod-annotations):
the scheduler's assignment and bind phase, the node agent's allocation record, the
webhook's records. The scheduler's cache, the node agent and ``vgpu why`` read them back,
so a pod owner who could edit them could free a slice the container keeps, claim one it
was never given, or change the limits its container gets. Every key under ``vgpu.io/`` is
therefore vgpu's, except the ones users write (docs/contracts.md#user-annotations): only
the components' own users (``webhook.annotationWriters``) may set, change or remove one,
and the webhook's own records may come in the webhook's patch of a GPU pod's creation.
``/validate`` (``vgpu_webhook.validate``) and the ValidatingAdmissionPolicy in
``manifests/policy`` apply this one rule; :func:`vgpu_webhook.registration.protected_cel`
writes it as CEL, and a test keeps the two in step.

Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu.annotations import GPU_POLICY, GPUMEM_PERCENTAGE, NODE_POLICY
from vgpu.fault_domains import ANNOTATION as FAULT_DOMAIN
from vgpu.init_resources import INIT_RESOURCES
from vgpu.isolation_modes import REQUIRE_ANNOTATION
from vgpu.pod_history import ADMISSION

PREFIX = "vgpu.io/"

#: ``vgpu.io/`` keys a pod's owner writes: placement policies, the isolation requirement and
#: whom the pod shares a fault domain with (an edit after its placement changes nothing:
#: the scheduler recorded the value it placed by in the assignment).
USER_KEYS = frozenset({GPU_POLICY, NODE_POLICY, REQUIRE_ANNOTATION, FAULT_DOMAIN})

#: HAMi-compatible keys the components write on pods. None today: the components read
#: HAMi's spellings of the two policies (``hami.io/...``), which users write, and write
#: nothing under ``hami.io/``. A key written in HAMi's name later belongs here.
HAMI_WRITTEN: frozenset[str] = frozenset()

#: What the webhook's own patch adds to a GPU pod at creation (its admission record, the
#: percentages it resolved, the resources it moved off init containers): the only
#: protected keys a pod may be created with by a user who is not a writer, and only a GPU
#: pod (the one kind the webhook patches).
WEBHOOK_RECORDS = frozenset({ADMISSION, GPUMEM_PERCENTAGE, INIT_RESOURCES})


def protected(key: str) -> bool:
    """Whether annotation ``key`` is vgpu's own."""
    return (key.startswith(PREFIX) and key not in USER_KEYS) or key in HAMI_WRITTEN


def annotations_in(obj: Any) -> Mapping[str, Any]:
    """``metadata.annotations`` of an object as it came in a review (anything, or None)."""
    if not isinstance(obj, Mapping):
        return {}
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        return {}
    found = metadata.get("annotations")
    return found if isinstance(found, Mapping) else {}


def present(notes: Mapping[str, Any]) -> tuple[str, ...]:
    """The protected keys among ``notes``, sorted."""
    return tuple(sorted(k for k in notes if isinstance(k, str) and protected(k)))


def changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, ...]:
    """The protected keys a write from ``old`` to ``new`` sets, changes or removes, sorted."""
    if old is new:
        return ()
    keys = {k for k in (*old, *new) if isinstance(k, str) and protected(k)}
    return tuple(sorted(k for k in keys if old.get(k) != new.get(k) or (k in old) != (k in new)))
