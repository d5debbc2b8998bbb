"""What a pod says, read the same way by every component.

Pods arrive as plain dicts in API shape, possibly malformed; these accessors never raise.
Each is the one definition of its fact: the pod's key and identity, its scheduler, whether
it has ended, its ``vgpu.io/bind-phase``, and its containers in the order the kubelet starts
them (the ``metadata`` fields every object has are :mod:`vgpu.meta`'s).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from vgpu import meta
from vgpu.annotations import BIND_PHASE

#: kube-scheduler's name, which the API server gives a pod that names no scheduler.
DEFAULT_SCHEDULER = "default-scheduler"

#: Phases of pods that have ended: they hold no node or GPU resources any more.
TERMINAL_PHASES = ("Succeeded", "Failed")


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return meta.mapping(obj.get("spec"))


def pod_key(pod: Mapping[str, Any]) -> str:
    """``namespace/name``; a pod without a namespace is in ``default``, as the API server
    would have put it."""
    md = meta.of(pod)
    return f"{md.get('namespace') or 'default'}/{md.get('name', '')}"


def pod_id(pod: Mapping[str, Any]) -> str:
    """The key the scheduler keeps a pod under: its ``metadata.uid``, so that a pod deleted
    and recreated under the same name is another pod (kube-scheduler's ``GetPodKey``). A
    pod built without one (a test's, never an API server's) goes by :func:`pod_key`."""
    return meta.uid(pod) or pod_key(pod)


def node_name(pod: Mapping[str, Any]) -> str | None:
    """The node the pod is bound to, or None while it is pending."""
    name = _spec(pod).get("nodeName")
    return str(name) if name else None


def scheduler_name(pod: Mapping[str, Any]) -> str:
    """``spec.schedulerName``, ``default-scheduler`` when unset (as the API server stores it).
    Immutable once the pod exists, so a pod's owner cannot move it to a scheduler later."""
    name = _spec(pod).get("schedulerName")
    return str(name) if name else DEFAULT_SCHEDULER


def is_terminated(pod: Mapping[str, Any]) -> bool:
    """Whether the pod has ended (phase Succeeded or Failed)."""
    status = pod.get("status")
    return isinstance(status, Mapping) and status.get("phase") in TERMINAL_PHASES


def bind_phase(pod: Mapping[str, Any]) -> str | None:
    """``vgpu.io/bind-phase``: allocating, success, failed, or None when unset."""
    phase = meta.annotations_of(pod).get(BIND_PHASE)
    return str(phase) if phase is not None else None


@dataclass(frozen=True)
class ContainerRef:
    """One container of a pod spec, where it sits and what it is."""

    #: ``"initContainers"`` or ``"containers"``: the spec list it is in.
    key: str
    position: int
    container: Any
    init: bool

    @property
    def name(self) -> str | None:
        name = self.container.get("name") if isinstance(self.container, Mapping) else None
        return name if isinstance(name, str) and name else None

    @property
    def sidecar(self) -> bool:
        """An init container with ``restartPolicy: Always``: it keeps running beside the
        app containers (Kubernetes' sidecar containers), so what it takes adds to theirs."""
        return self.init and isinstance(self.container, Mapping) and (
            self.container.get("restartPolicy") == "Always")


def containers(pod: Mapping[str, Any]) -> Iterator[ContainerRef]:
    """Every container of the pod in start order: init containers first, then the app
    containers, each list in spec order. Entries that are not lists are skipped (a
    validating reader reports them itself)."""
    spec = _spec(pod)
    for key, init in (("initContainers", True), ("containers", False)):
        items = spec.get(key)
        if not isinstance(items, list):
            continue
        for position, container in enumerate(items):
            yield ContainerRef(key, position, container, init)


def container_names(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of the pod's containers in start order."""
    return tuple(ref.name for ref in containers(pod) if ref.name is not None)


def before_apps(pod: Mapping[str, Any]) -> frozenset[str]:
    """The names of the init containers that end before the app containers start (not
    sidecars): the kubelet hands their devices on to the app containers."""
    items = _spec(pod).get("initContainers")
    if not isinstance(items, list) or not items:
        return frozenset()
    return frozenset(ref.name for ref in containers(pod)
                     if ref.init and not ref.sidecar and ref.name is not None)
