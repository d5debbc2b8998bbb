"""A pod, parsed once per version: what every plugin reads on every node.

The same parse serves pending pods (the queue) and the pods already on a node (the
cache), so a plugin reads a node's pods and the incoming pod through the same fields.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from vgpu import meta, shape_memo
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu.errors import RequestError
from vgpu.pods import pod_key
from vgpu.request_fields import as_list, as_map
from vgpu.requests import PodRequest, parse_pod
from vgpu_scheduler.framework import compute, objects
from vgpu_scheduler.framework.affinity import PodAffinity, parse_pod_affinity
from vgpu_scheduler.framework.host_ports import HostPort, parse_host_ports
from vgpu_scheduler.framework.spread import SpreadConstraint, parse_constraints

#: ``spec.preemptionPolicy`` of a pod that must never evict others to make room.
NEVER = "Never"


@dataclass(frozen=True, slots=True)
class PodInfo:
    key: str
    namespace: str
    name: str
    uid: str
    pod: Obj
    priority: int
    cpu_milli: int
    memory: int
    #: The vGPU request, or None for a pod that asks for no GPU.
    gpu: PodRequest | None
    tolerations: tuple[objects.Toleration, ...]
    node_selector: Mapping[str, str]
    required_terms: tuple[objects.SelectorTerm, ...] | None
    #: Why the pod cannot be scheduled at all as written (bad quantity, bad annotation).
    error: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    host_ports: tuple[HostPort, ...] = ()
    #: Preferred node-affinity terms with their weights.
    preferred_terms: tuple[tuple[int, objects.SelectorTerm], ...] = ()
    #: ``spec.schedulingGates`` names: the pod is not tried while any is left.
    gates: tuple[str, ...] = ()
    preemption_policy: str = "PreemptLowerPriority"
    #: PersistentVolumeClaims the pod mounts (ephemeral volumes' claims included).
    claims: tuple[str, ...] = ()
    #: ``metadata.creationTimestamp`` in epoch seconds, when readable.
    created: float | None = None
    #: Pod affinity and anti-affinity terms; None when the pod has none.
    pod_affinity: PodAffinity | None = None
    #: ``spec.topologySpreadConstraints``, selectors merged with ``matchLabelKeys``.
    spread: tuple[SpreadConstraint, ...] = ()
    #: ``metadata.deletionTimestamp`` is set: spreading no longer counts the pod.
    terminating: bool = False
    #: Every other resource the pod asks of a node besides CPU and memory
    #: (ephemeral-storage, hugepages, extended resources), by name; the names vgpu owns
    #: are left out (its own plugins account for them).
    resources: Mapping[str, int] = field(default_factory=lambda: compute.NONE)

    @property
    def shape(self) -> tuple[Any, ...]:
        """Everything the pod-only filters read, without the pod's identity: pods of one
        shape get the same answer from the same node."""
        return (self.cpu_milli, self.memory, self.gpu, self.tolerations,
                tuple(sorted(self.node_selector.items())), self.required_terms, self.error,
                self.host_ports, self.claims, tuple(sorted(self.resources.items())))

    @property
    def pod_id(self) -> str:
        """What the scheduler keys the pod by (:func:`vgpu.pods.pod_id`): its uid."""
        return self.uid or self.key

    @property
    def is_gpu_pod(self) -> bool:
        return self.gpu is not None and self.gpu.is_gpu_pod


def _gates(spec: Mapping[str, Any]) -> tuple[str, ...]:
    names = []
    for i, gate in enumerate(as_list(spec.get("schedulingGates"), "spec.schedulingGates")):
        name = as_map(gate, f"spec.schedulingGates[{i}]").get("name")
        if not isinstance(name, str) or not name:
            raise RequestError(f"spec.schedulingGates[{i}].name must be a non-empty string")
        names.append(name)
    return tuple(names)


def _claims(name: str, spec: Mapping[str, Any]) -> tuple[str, ...]:
    out = []
    for i, raw in enumerate(as_list(spec.get("volumes"), "spec.volumes")):
        volume = as_map(raw, f"spec.volumes[{i}]")
        claim = as_map(volume.get("persistentVolumeClaim"),
                       f"spec.volumes[{i}].persistentVolumeClaim").get("claimName")
        if isinstance(claim, str) and claim:
            out.append(claim)
        elif volume.get("ephemeral") is not None:
            # The ephemeral-volume controller names the claim <pod>-<volume>.
            out.append(f"{name}-{volume.get('name')}")
    return tuple(out)


_NO_SELECTOR: Mapping[str, str] = MappingProxyType({})
# Pods of one Deployment ask for the same: one PodRequest for all of them (bounded; a
# miss only costs the copy).
_REQUESTS: dict[PodRequest, PodRequest] = {}


def _shared(request: PodRequest) -> PodRequest:
    found = _REQUESTS.get(request)
    if found is None:
        if len(_REQUESTS) >= 4096:
            _REQUESTS.clear()
        found = _REQUESTS[request] = request
    return found


def _requests(pod: Obj, spec: Mapping[str, Any], config: Config) -> compute.Requests:
    """What the pod takes on a node (:func:`compute.pod_requests`), remembered per config
    by its resources when it has a single container and nothing else that adds to it:
    the pods of one Deployment ask alike (a third of reading the 150,000 bound pods of a
    cold start at 15,000 nodes; issue 40)."""
    apps = spec.get("containers")
    if (type(spec) is dict and type(apps) is list and len(apps) == 1
            and type(apps[0]) is dict and not spec.get("initContainers")
            and not spec.get("overhead")):
        key = shape_memo.resources_key(apps[0])
        if key is not None:
            return shape_memo.memo_for(config).through(  # type: ignore[no-any-return]
                ("node requests", key), lambda: compute.pod_requests(pod, config.owns_resource))
    return compute.pod_requests(pod, config.owns_resource)


def _labels(pod: Obj, md: Mapping[str, Any]) -> Mapping[str, str]:
    labels = md.get("labels")
    if isinstance(labels, dict) and all(
            type(k) is str and type(v) is str for k, v in labels.items()):
        return labels
    return meta.labels_of(pod)


def parse(pod: Obj, config: Config) -> PodInfo:
    """Parse a pod; a malformed one yields a PodInfo with ``error`` set, never an exception."""
    md = meta.of(pod)
    spec: Mapping[str, Any] = pod.get("spec") or {}
    if not isinstance(spec, Mapping):
        spec = {}
    key = pod_key(pod)
    namespace, name = key.split("/", 1)
    # The cache keeps a PodInfo for each of tens of thousands of pods: share the strings
    # and the labels the pod object holds already instead of copies.
    namespace = sys.intern(namespace)
    if md.get("name") == name:
        name = md["name"]
    priority = spec.get("priority")
    if not isinstance(priority, int) or isinstance(priority, bool):
        priority = 0
    base: dict[str, Any] = {
        "key": key, "namespace": namespace, "name": name,
        "uid": meta.uid(pod), "pod": pod, "priority": priority,
        "labels": _labels(pod, md), "created": meta.created(pod),
        "terminating": meta.deleting(pod),
        "preemption_policy": str(spec.get("preemptionPolicy") or "PreemptLowerPriority"),
    }
    try:
        requests = _requests(pod, spec, config)
    except RequestError as exc:
        return PodInfo(**base, cpu_milli=0, memory=0, gpu=None, tolerations=(),
                       node_selector={}, required_terms=None, error=str(exc))
    base.update(cpu_milli=requests.cpu, memory=requests.memory, resources=requests.other)
    try:
        gpu = parse_pod(pod, config)
        return PodInfo(
            **base,
            gpu=_shared(gpu) if gpu.is_gpu_pod else None,
            tolerations=objects.parse_tolerations(pod),
            node_selector=objects.parse_node_selector(pod) or _NO_SELECTOR,
            required_terms=objects.parse_required_terms(pod),
            preferred_terms=objects.parse_preferred_terms(pod),
            host_ports=parse_host_ports(pod), gates=_gates(spec),
            claims=_claims(name, spec),
            pod_affinity=parse_pod_affinity(pod, namespace),
            spread=parse_constraints(pod, base["labels"]),
        )
    except RequestError as exc:
        # What the pod takes on a node is known even when the rest is malformed: a bound
        # pod like that still counts.
        return PodInfo(**base, gpu=None, tolerations=(), node_selector={},
                       required_terms=None, error=str(exc))
