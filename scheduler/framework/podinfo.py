"""A pending pod, parsed once per version: what every plugin reads on every node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.framework import objects
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu.errors import RequestError
from vgpu.requests import PodRequest, parse_pod


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

    @property
    def shape(self) -> tuple[Any, ...]:
        """Everything the built-in filters read, without the pod's identity: pods of one
        shape get the same answer from the same node."""
        return (self.cpu_milli, self.memory, self.gpu, self.tolerations,
                tuple(sorted(self.node_selector.items())), self.required_terms, self.error)

    @property
    def is_gpu_pod(self) -> bool:
        return self.gpu is not None and self.gpu.is_gpu_pod


def parse(pod: Obj, config: Config) -> PodInfo:
    """Parse a pod; a malformed one yields a PodInfo with ``error`` set, never an exception."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name", ""))
    priority = spec.get("priority") if isinstance(spec, Mapping) else 0
    if not isinstance(priority, int) or isinstance(priority, bool):
        priority = 0
    base: dict[str, Any] = {
        "key": f"{namespace}/{name}", "namespace": namespace, "name": name,
        "uid": str(meta.get("uid", "")), "pod": pod, "priority": priority,
    }
    try:
        cpu, memory = objects.pod_requests(pod)
        gpu = parse_pod(pod, config)
        return PodInfo(
            **base, cpu_milli=cpu, memory=memory,
            gpu=gpu if gpu.is_gpu_pod else None,
            tolerations=objects.parse_tolerations(pod),
            node_selector=objects.parse_node_selector(pod),
            required_terms=objects.parse_required_terms(pod),
        )
    except RequestError as exc:
        return PodInfo(**base, cpu_milli=0, memory=0, gpu=None, tolerations=(),
                       node_selector={}, required_terms=None, error=str(exc))
