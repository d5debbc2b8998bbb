"""The resources the cluster port serves: one row each, read by both adapters.

The real adapter builds its REST paths and the ``apiVersion``/``kind`` of what it writes
from a row; the in-memory cluster keeps one store per row, knows from it whether an
object has a namespace, and answers a selection as the API server does (:func:`selects`).
Serving a new resource is therefore one row here and its plural in
:data:`vgpu.cluster.port.Kind` (mypy checks every caller against that Literal; a unit
test checks the two agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from vgpu import meta
from vgpu.cluster.port import Obj, Selector
from vgpu.errors import InvalidError


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    #: ``v1`` for the core group, else ``<group>/<version>``, as in an object's apiVersion.
    api_version: str
    namespaced: bool
    #: Older versions the real adapter lists (and then watches and writes) when a server
    #: does not serve ``api_version`` yet: PodDisruptionBudgets are ``policy/v1beta1``
    #: only before Kubernetes 1.21. The objects' fields that vgpu reads are the same.
    fallbacks: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        """The API group; empty for the core group."""
        group, _, _ = self.api_version.rpartition("/")
        return group

    @property
    def singular(self) -> str:
        """How messages name one object (``pod``, ``storageclass``)."""
        return self.kind.lower()


RESOURCES: Mapping[str, Resource] = MappingProxyType({r.plural: r for r in (
    Resource("pods", "Pod", "v1", namespaced=True),
    Resource("nodes", "Node", "v1", namespaced=False),
    Resource("secrets", "Secret", "v1", namespaced=True),
    Resource("persistentvolumes", "PersistentVolume", "v1", namespaced=False),
    Resource("persistentvolumeclaims", "PersistentVolumeClaim", "v1", namespaced=True),
    Resource("leases", "Lease", "coordination.k8s.io/v1", namespaced=True),
    Resource("mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
             "admissionregistration.k8s.io/v1", namespaced=False),
    Resource("validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
             "admissionregistration.k8s.io/v1", namespaced=False),
    Resource("storageclasses", "StorageClass", "storage.k8s.io/v1", namespaced=False),
    Resource("csinodes", "CSINode", "storage.k8s.io/v1", namespaced=False),
    Resource("poddisruptionbudgets", "PodDisruptionBudget", "policy/v1", namespaced=True,
             fallbacks=("policy/v1beta1",)),
    Resource("events", "Event", "v1", namespaced=True),
    # What the scheduler reads as kube-scheduler does: namespace labels (pod affinity's
    # namespaceSelector) and the workloads whose selectors give the default topology
    # spread constraints.
    Resource("namespaces", "Namespace", "v1", namespaced=False),
    Resource("services", "Service", "v1", namespaced=True),
    Resource("replicationcontrollers", "ReplicationController", "v1", namespaced=True),
    Resource("replicasets", "ReplicaSet", "apps/v1", namespaced=True),
    Resource("statefulsets", "StatefulSet", "apps/v1", namespaced=True),
    # What `vgpu inspect` and `vgpu why` read to show a namespace's GPU quota.
    Resource("resourcequotas", "ResourceQuota", "v1", namespaced=True),
    # The GPU types the webhook has seen (vgpu-gpu-types), kept across its restarts.
    Resource("configmaps", "ConfigMap", "v1", namespaced=True),
)})

#: Where a namespaced object that names no namespace goes, as with kubectl.
DEFAULT_NAMESPACE = "default"


def resource(kind: str) -> Resource:
    """The row of ``kind``; ``InvalidError`` for a resource the port does not serve (typed
    callers cannot get here, but a plural can come from a command line or a file)."""
    try:
        return RESOURCES[kind]
    except KeyError:
        raise InvalidError(f"{kind!r} is not a resource the cluster port serves "
                           f"(one of {', '.join(sorted(RESOURCES))})") from None


def check_selector(res: Resource, selector: Selector) -> None:
    """Refuse a list or watch selection that cannot apply to ``res``.

    The API server answers a namespace on a cluster-scoped resource with 404 and the
    ``spec.nodeName`` field selector on anything but pods with 400; ignoring either
    silently would hand the caller every object, so both adapters refuse them up front.
    """
    if selector.namespace is not None and not res.namespaced:
        raise InvalidError(f"{res.plural} are cluster-scoped: a namespace does not apply")
    if selector.node_name is not None and res.plural != "pods":
        raise InvalidError(f"a node-name selector applies to pods only, not {res.plural}")
    if selector.involved_name is not None and res.plural != "events":
        raise InvalidError(f"an involved-object selector applies to events only, "
                           f"not {res.plural}")


def selects(selector: Selector, obj: Obj) -> bool:
    """Whether ``obj`` is in the selection, as the API server answers it (for a selection
    :func:`check_selector` let through)."""
    if selector.namespace is not None and meta.namespace(obj) != selector.namespace:
        return False
    if selector.node_name is not None:
        return bool(meta.mapping(obj.get("spec")).get("nodeName") == selector.node_name)
    if selector.involved_name is not None:
        return bool(meta.mapping(obj.get("involvedObject")).get("name")
                    == selector.involved_name)
    return True
