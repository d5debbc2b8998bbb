"""PersistentVolumes, PersistentVolumeClaims, StorageClasses and CSINodes, parsed once
per version into the few fields the volume plugins read.

A malformed object (the in-memory cluster validates nothing; a hand-edited PV can carry a
bad node affinity) parses into a value whose ``error`` says what is wrong, so a plugin can
answer with a clear status instead of a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from vgpu import meta
from vgpu.cluster.port import Obj
from vgpu.errors import RequestError
from vgpu.labels import LabelSelector, parse_selector
from vgpu.quantity import parse_quantity
from vgpu.request_fields import as_list, as_map
from vgpu_scheduler.framework.objects import SelectorTerm, parse_node_selector_terms

#: Set on a claim by the scheduler: provision its volume where this node can reach it.
SELECTED_NODE = "volume.kubernetes.io/selected-node"
#: Set on a claim by the PV controller once the binding is complete.
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
#: Set on a PV by whoever bound it other than its author (the scheduler, the controller).
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
#: The pre-``storageClassName`` way to name a class; it still wins when present.
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
#: A class whose volumes are never provisioned dynamically (local volumes).
NO_PROVISIONER = "kubernetes.io/no-provisioner"

WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
FILESYSTEM = "Filesystem"
CLAIM_LOST = "Lost"
VOLUME_AVAILABLE = "Available"


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Claim:
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    storage_class: str = ""
    volume_name: str = ""
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = FILESYSTEM
    #: ``spec.resources.requests.storage`` in bytes; 0 when not given.
    request: Fraction = Fraction(0)
    selector: LabelSelector | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    phase: str = ""
    deleting: bool = False
    #: UID of the controlling owner (the pod, for an ephemeral volume's claim).
    controller_uid: str | None = None
    raw: Obj = field(default_factory=dict, compare=False, repr=False)
    error: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def selected_node(self) -> str | None:
        return self.annotations.get(SELECTED_NODE)

    @property
    def fully_bound(self) -> bool:
        """Bound to a volume and the PV controller finished the binding."""
        return bool(self.volume_name) and BIND_COMPLETED in self.annotations


@dataclass(frozen=True, slots=True)
class Volume:
    name: str
    resource_version: str = ""
    storage_class: str = ""
    #: ``spec.capacity.storage`` in bytes.
    capacity: Fraction = Fraction(0)
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = FILESYSTEM
    claim_ref: ClaimRef | None = None
    phase: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    #: ``spec.nodeAffinity.required``'s terms; None when the volume can go anywhere.
    affinity: tuple[SelectorTerm, ...] | None = None
    deleting: bool = False
    #: ``spec.csi``'s (driver, volumeHandle); None for a volume of another kind.
    csi: tuple[str, str] | None = None
    raw: Obj = field(default_factory=dict, compare=False, repr=False)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    #: None when the object names none (the API server defaults it to Immediate).
    binding_mode: str | None = None
    #: ``allowedTopologies``: per term, its (label key, allowed values) expressions.
    allowed_topologies: tuple[tuple[tuple[str, frozenset[str]], ...], ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class CSINode:
    name: str
    #: Per driver, the most volumes it can attach to the node (drivers that say).
    limits: Mapping[str, int] = field(default_factory=dict)
    error: str | None = None


def _ident(obj: Obj) -> tuple[str, str]:
    """(namespace, name), whatever shape the rest of the object has."""
    return meta.namespace(obj), meta.name(obj)


def _meta(obj: Obj) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]:
    return (as_map(obj.get("metadata"), "metadata"), as_map(obj.get("spec"), "spec"),
            as_map(obj.get("status"), "status"))


def _strings(value: Any, where: str) -> frozenset[str]:
    return frozenset(str(v) for v in as_list(value, where))


def _annotations(md: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in as_map(md.get("annotations"),
                                              "metadata.annotations").items()}


def _storage(resources: Any, where: str) -> Fraction:
    raw = as_map(resources, where).get("storage")
    return Fraction(0) if raw is None else parse_quantity(raw)


def _controller_uid(md: Mapping[str, Any]) -> str | None:
    for i, raw in enumerate(as_list(md.get("ownerReferences"), "metadata.ownerReferences")):
        ref = as_map(raw, f"metadata.ownerReferences[{i}]")
        if ref.get("controller") is True:
            return str(ref.get("uid", ""))
    return None


def parse_claim(obj: Obj) -> Claim:
    namespace, name = _ident(obj)
    try:
        md, spec, status = _meta(obj)
        annotations = _annotations(md)
        cls = annotations.get(BETA_STORAGE_CLASS, spec.get("storageClassName") or "")
        resources = as_map(spec.get("resources"), "spec.resources")
        return Claim(
            namespace=namespace, name=name, uid=meta.uid(obj),
            resource_version=meta.resource_version(obj), storage_class=str(cls),
            volume_name=str(spec.get("volumeName") or ""),
            access_modes=_strings(spec.get("accessModes"), "spec.accessModes"),
            volume_mode=str(spec.get("volumeMode") or FILESYSTEM),
            request=_storage(resources.get("requests"), "spec.resources.requests"),
            selector=parse_selector(spec.get("selector"), "spec.selector"),
            annotations=annotations, phase=str(status.get("phase") or ""),
            deleting=meta.deleting(obj), controller_uid=_controller_uid(md), raw=obj)
    except RequestError as exc:
        return Claim(namespace=namespace, name=name, raw=obj, error=str(exc))


def _claim_ref(raw: Any) -> ClaimRef | None:
    if raw is None:
        return None
    ref = as_map(raw, "spec.claimRef")
    return ClaimRef(str(ref.get("namespace") or ""), str(ref.get("name") or ""),
                    str(ref.get("uid") or ""))


def _affinity(spec: Mapping[str, Any]) -> tuple[SelectorTerm, ...] | None:
    required = as_map(spec.get("nodeAffinity"), "spec.nodeAffinity").get("required")
    if required is None:
        return None
    return parse_node_selector_terms(required, "spec.nodeAffinity.required")


def _csi(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    if spec.get("csi") is None:
        return None
    csi = as_map(spec.get("csi"), "spec.csi")
    return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")


def parse_volume(obj: Obj) -> Volume:
    _, name = _ident(obj)
    try:
        md, spec, status = _meta(obj)
        cls = _annotations(md).get(BETA_STORAGE_CLASS, spec.get("storageClassName") or "")
        return Volume(
            name=name, resource_version=meta.resource_version(obj),
            storage_class=str(cls), capacity=_storage(spec.get("capacity"), "spec.capacity"),
            access_modes=_strings(spec.get("accessModes"), "spec.accessModes"),
            volume_mode=str(spec.get("volumeMode") or FILESYSTEM),
            claim_ref=_claim_ref(spec.get("claimRef")), phase=str(status.get("phase") or ""),
            labels=meta.labels_of(obj), affinity=_affinity(spec),
            deleting=meta.deleting(obj), csi=_csi(spec), raw=obj)
    except RequestError as exc:
        return Volume(name=name, raw=obj, error=str(exc))


def _topologies(spec: Obj) -> tuple[tuple[tuple[str, frozenset[str]], ...], ...]:
    terms = []
    for i, raw in enumerate(as_list(spec.get("allowedTopologies"), "allowedTopologies")):
        where = f"allowedTopologies[{i}].matchLabelExpressions"
        exprs = []
        for j, item in enumerate(as_list(as_map(raw, where).get("matchLabelExpressions"),
                                         where)):
            expr = as_map(item, f"{where}[{j}]")
            exprs.append((str(expr.get("key") or ""),
                          _strings(expr.get("values"), f"{where}[{j}].values")))
        terms.append(tuple(exprs))
    return tuple(terms)


def parse_storage_class(obj: Obj) -> StorageClass:
    # A StorageClass keeps its fields at the top level, not under spec.
    _, name = _ident(obj)
    try:
        mode = obj.get("volumeBindingMode")
        return StorageClass(name=name, provisioner=str(obj.get("provisioner") or ""),
                            binding_mode=None if mode is None else str(mode),
                            allowed_topologies=_topologies(obj))
    except RequestError as exc:
        return StorageClass(name=name, error=str(exc))


def parse_csinode(obj: Obj) -> CSINode:
    _, name = _ident(obj)
    try:
        limits: dict[str, int] = {}
        spec = as_map(obj.get("spec"), "spec")
        for i, raw in enumerate(as_list(spec.get("drivers"), "spec.drivers")):
            driver = as_map(raw, f"spec.drivers[{i}]")
            count = as_map(driver.get("allocatable"),
                           f"spec.drivers[{i}].allocatable").get("count")
            if count is None:
                continue
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise RequestError(f"spec.drivers[{i}].allocatable.count {count!r} is not a "
                                   "count")
            limits[str(driver.get("name") or "")] = count
        return CSINode(name=name, limits=limits)
    except RequestError as exc:
        return CSINode(name=name, error=str(exc))
