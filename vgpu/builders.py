"""Builders for Node and Pod objects in API shape, for scripts, the simulator and tests.

They write exactly what the real components write (the node agent's inventory and
heartbeat annotations, a user's ``resources.limits``), so whatever runs on objects built
here runs on a real cluster's objects too.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import vgpu.annotations as ann
from vgpu import codecs
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu.devices import Device
from vgpu.topology import shapes
from vgpu.topology.links import GpuLink


def devices(node: str, count: int, *, model: str = "NVIDIA A100-SXM4-40GB",
            memory_mib: int = 40960, split: int = 10, cores: int = 100,
            numa: Sequence[int] | None = None, healthy: Sequence[bool] | None = None,
            ) -> tuple[Device, ...]:
    return tuple(
        Device(uuid=f"GPU-{node}-{i}", index=i, model=model, memory_mib=memory_mib,
               cores=cores, split=split, numa=numa[i] if numa else 0,
               healthy=healthy[i] if healthy else True)
        for i in range(count)
    )


def shaped_devices(node: str, count: int, shape: str, **kw: Any
                   ) -> tuple[tuple[Device, ...], tuple[GpuLink, ...]]:
    """``count`` GPUs with the named topology (:mod:`vgpu.topology.shapes`): the devices,
    on the shape's NUMA nodes, and their links, for :func:`node`."""
    layout = shapes.SHAPES[shape](count)
    gpus = devices(node, count, numa=layout.numa, **kw)
    return gpus, shapes.links_of(layout, [g.uuid for g in gpus])


def node(name: str, gpus: Sequence[Device] = (), *, cpu: str | int = "64",
         memory: str | int = "256Gi", pods: int = 110, heartbeat: float | None = 0.0,
         labels: Mapping[str, str] | None = None, taints: Sequence[Mapping[str, str]] = (),
         unschedulable: bool = False, links: Sequence[GpuLink] | None = None) -> Obj:
    """A Node with the vgpu inventory of ``gpus`` (none: a CPU-only node without the
    annotations) and their ``links`` (None: unknown), and a heartbeat at ``heartbeat``
    epoch seconds (None: no heartbeat)."""
    annotations: dict[str, str] = {}
    if gpus:
        annotations[ann.NODE_GPUS] = codecs.encode_inventory(codecs.NodeInventory(
            tuple(gpus), links=None if links is None else tuple(links)))
        if heartbeat is not None:
            annotations[ann.NODE_HEARTBEAT] = codecs.encode_heartbeat(
                dt.datetime.fromtimestamp(heartbeat, dt.UTC))
    obj: Obj = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                     "annotations": annotations},
        "spec": {},
        "status": {"allocatable": {"cpu": str(cpu), "memory": str(memory), "pods": str(pods)},
                   "capacity": {"cpu": str(cpu), "memory": str(memory), "pods": str(pods)}},
    }
    if taints:
        obj["spec"]["taints"] = [dict(t) for t in taints]
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj


def container(name: str = "main", *, gpus: int | None = 1, gpumem: int | None = None,
              percent: int | None = None, cores: int | None = None, cpu: str | None = None,
              memory: str | None = None, config: Config | None = None) -> dict[str, Any]:
    rn = (config or Config()).resource_names
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    if gpus is not None:
        limits[rn.gpu] = str(gpus)
    if gpumem is not None:
        limits[rn.gpumem] = str(gpumem)
    if percent is not None:
        limits[rn.gpumem_percentage] = str(percent)
    if cores is not None:
        limits[rn.gpucores] = str(cores)
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    resources: dict[str, Any] = {}
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
    return {"name": name, "image": "busybox", "resources": resources}


def pod(name: str, containers: Sequence[Mapping[str, Any]] | None = None, *,
        namespace: str = "default", annotations: Mapping[str, str] | None = None,
        priority: int | None = None, scheduler_name: str = "vgpu-scheduler",
        init_containers: Sequence[Mapping[str, Any]] = (), **spec: Any) -> Obj:
    """A pending pod; ``containers`` defaults to one container asking for one whole GPU."""
    body: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [dict(c) for c in (containers or [container()])],
        **spec,
    }
    if init_containers:
        body["initContainers"] = [dict(c) for c in init_containers]
    if priority is not None:
        body["priority"] = priority
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": dict(annotations or {})},
        "spec": body,
    }
