"""The cluster port.

Objects cross it as plain dicts in the API's JSON shape (``metadata``, ``spec``,
``status``), so the same decision code reads a pod from the API server and from the
in-memory cluster. Which resources it serves is :mod:`vgpu.cluster.resources`; a
namespaced object given no namespace is in ``default``, and a namespace given for a
cluster-scoped object is ignored.

Errors are the :mod:`vgpu.errors` cluster errors: ``NotFoundError``, ``ConflictError``
(stale resourceVersion, already bound, already exists, another object of the name than the
uid a write named), ``GoneError`` (watch resourceVersion too old: re-list),
``InvalidError`` (content refused, or a selector that cannot apply to the resource) and
``OutcomeUnknownError`` (a write went out and no answer came back: it may have been
applied).

Writes aimed at one pod carry its uid where the caller has it (a Binding's
``metadata.uid``, an eviction's ``preconditions.uid``, a patch's ``metadata.uid``), so that
a pod deleted and recreated under its name is never written for its predecessor.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from vgpu import meta

Obj = dict[str, Any]
#: The plural of every resource the port serves; each has its row in
#: :data:`vgpu.cluster.resources.RESOURCES`, which a unit test holds in step with this.
Kind = Literal[
    "pods", "nodes", "secrets", "leases", "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
    "persistentvolumes", "persistentvolumeclaims", "storageclasses", "csinodes",
    "poddisruptionbudgets", "events", "namespaces", "services", "replicationcontrollers",
    "replicasets", "statefulsets", "resourcequotas", "configmaps",
]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True)
class ListResult:
    items: list[Obj]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    type: EventType
    object: Obj


@dataclass(frozen=True)
class Selector:
    """Which objects a list or watch covers. ``node_name`` is the field selector
    ``spec.nodeName=<node>`` the node agent uses (pods only); ``involved_name`` is
    ``involvedObject.name=<name>`` (events only: an object's events, for ``vgpu why``);
    ``namespace`` limits a namespaced resource to one namespace. Any of them on a resource
    it cannot apply to raises ``InvalidError``."""

    namespace: str | None = None
    node_name: str | None = None
    involved_name: str | None = None


ALL = Selector()


def key_of(obj: Obj) -> str:
    """The cache key of an object: ``namespace/name`` for namespaced objects, else ``name``."""
    namespace, name = meta.namespace(obj), meta.name(obj)
    return f"{namespace}/{name}" if namespace else name


class ClusterPort(Protocol):
    """What vgpu needs from Kubernetes; each component uses a subset."""

    def list(self, kind: Kind, selector: Selector = ALL) -> ListResult: ...

    def watch(self, kind: Kind, resource_version: str, selector: Selector = ALL,
              timeout_seconds: float = 30.0) -> Iterator[WatchEvent]:
        """Events after ``resource_version``; ends after ``timeout_seconds`` (callers loop).

        Raises ``GoneError`` when the version is too old to resume from.
        """
        ...

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj: ...

    def create(self, kind: Kind, obj: Obj) -> Obj: ...

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None: ...

    def replace(self, kind: Kind, obj: Obj) -> Obj:
        """PUT the whole object; ``metadata.resourceVersion`` in ``obj``, when set, must be
        current or ``ConflictError`` is raised."""
        ...

    def patch_annotations(self, kind: Kind, name: str, annotations: Mapping[str, str | None],
                          namespace: str | None = None,
                          resource_version: str | None = None, *, uid: str = "",
                          status: bool = False,
                          conditions: Sequence[Mapping[str, str]] = ()) -> Obj:
        """Merge-patch ``metadata.annotations`` (``None`` removes a key).

        With ``resource_version`` the write is conditional: a stale version raises
        ``ConflictError``. With ``uid`` it applies only to the object of that uid: another
        one of the name raises ``ConflictError`` (the API server answers 422, the uid being
        immutable; the adapter says what it means). With ``status`` it goes through the
        ``status`` subresource, which stores a pod's annotations too and which vgpu's
        validating webhook is not registered for (the node agent's writes:
        docs/contracts.md#protected-annotations); ``conditions`` (``status`` only) are set
        in the same write, each replacing the pod's condition of its ``type`` and leaving
        the others (the kubelet's) as they are.
        """
        ...

    def bind(self, namespace: str, name: str, node: str,
             annotations: Mapping[str, str], *, uid: str = "") -> None:
        """POST ``pods/binding``: sets ``spec.nodeName`` and copies ``annotations`` onto the
        pod in the same write. A pod already bound, or being deleted, raises
        ``ConflictError``; so does another pod of the name than ``uid`` on API servers that
        check it (1.23-1.24 and 1.27 on, and the patch releases of 1.25 and 1.26 that
        fixed its regression: kubernetes#105913, #116550). Older ones bind whatever pod
        has the name."""
        ...

    def patch_status(self, kind: Kind, name: str, status: Mapping[str, Any],
                     namespace: str | None = None) -> Obj:
        """Merge-patch the ``status`` subresource (a pod's ``nominatedNodeName``)."""
        ...

    def evict(self, namespace: str, name: str, *, uid: str = "") -> None:
        """POST ``pods/eviction``: delete the pod unless a PodDisruptionBudget forbids it
        now, which raises ``EvictionRefusedError``. With ``uid`` (``preconditions.uid``)
        another pod of the name raises ``ConflictError`` and stays. Where
        :meth:`pod_disruption_conditions`, the pod is given the ``DisruptionTarget``
        condition (reason ``EvictionByEvictionAPI``) before it is deleted."""
        ...

    def pod_disruption_conditions(self) -> bool:
        """Whether the API server has the PodDisruptionConditions feature (Kubernetes 1.26
        on): the ``DisruptionTarget`` pod condition, which its evictions write and
        kube-scheduler's preemption reads. Found once; False while it cannot be found."""
        ...

    def record_event(self, obj: Obj, event_type: Literal["Normal", "Warning"], reason: str,
                     message: str, component: str) -> None: ...
