"""Trace rows as the Kubernetes objects the vgpu scheduler reads.

* A trace node becomes a Node with its CPU and memory as allocatable and, when it has GPUs,
  the node agent's inventory annotation and a heartbeat. The trace gives no GPU memory, so
  each model gets a nominal size (below); every request here is a percentage, so the size
  changes nothing. The node agent advertises enough slots per GPU that slots never bind
  before compute does (the trace's smallest share is 5 %).
* A trace pod becomes a Pod with its CPU and memory as requests and its GPUs as vgpu
  resources: ``num_gpu`` vGPUs, each with ``gpu_milli / 10`` percent of the compute and
  of the memory (a whole GPU is 100 %, which vgpu treats as exclusive); ``gpu_spec`` as
  ``nvidia.com/use-gputype``. Shares that are not whole percents (none in the trace) are
  rounded up, so a pod never gets less than it asked for.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import vgpu.annotations as ann
from vgpu import builders
from vgpu.cluster.port import Obj
from vgpu.config import Config
from vgpu.devices import Device
from vgpu_scheduler.placement.shapes import milli_of_percent
from vgpu_simulate.trace import MILLI, TraceNode, TracePod

#: Nominal GPU memory per trace model, MiB (what NVML reports for the public models; the
#: internal G1/G2/G3 are undisclosed and get 32 GiB).
GPU_MEMORY_MIB: Mapping[str, int] = {
    "T4": 15360, "P100": 16384, "V100M16": 16384, "V100M32": 32768, "A10": 24576,
    "G1": 32768, "G2": 32768, "G3": 32768,
}
DEFAULT_GPU_MEMORY_MIB = 32768
#: Pods a node may run; the paper's node objects allow 1001.
PODS_PER_NODE = 1001
#: Slots per GPU: 100 % / the smallest share (5 %).
SLOTS_PER_GPU = 20
NAMESPACE = "default"


def node_object(node: TraceNode, heartbeat: float, *, topology: str | None = None,
                publish_links: bool = True, isolation: str | None = None) -> Obj:
    """The Node; with ``topology`` its GPUs have that shape's NUMA nodes and, when
    ``publish_links``, its inventory carries the shape's links; with ``isolation`` its
    GPUs report that mode."""
    model = node.model or "none"
    memory = GPU_MEMORY_MIB.get(node.model, DEFAULT_GPU_MEMORY_MIB)
    links = None
    if not node.gpus:
        gpus: tuple[Device, ...] = ()
    elif topology is None:
        gpus = builders.devices(node.name, node.gpus, model=model, memory_mib=memory,
                                split=SLOTS_PER_GPU)
    else:
        gpus, shaped = builders.shaped_devices(node.name, node.gpus, topology, model=model,
                                               memory_mib=memory, split=SLOTS_PER_GPU)
        links = shaped if publish_links else None
    if isolation is not None:
        gpus = tuple(dataclasses.replace(d, isolation=isolation) for d in gpus)
    return builders.node(node.name, gpus, cpu=f"{node.cpu_milli}m", memory=f"{node.memory_mib}Mi",
                      pods=PODS_PER_NODE, heartbeat=heartbeat, links=links)


def percent(gpu_milli: int) -> int:
    """A per-GPU share in milli-GPU as a whole percent, rounded up."""
    return min(100, math.ceil(gpu_milli * 100 / MILLI))


def pod_object(pod: TracePod, config: Config, *, namespace: str = NAMESPACE,
               extra: Mapping[str, str] | None = None, run_as_user: int | None = None) -> Obj:
    """The Pod; ``extra`` annotations beside the trace's (a fault domain), and the uid it
    runs as (None: it states none)."""
    rn = config.resource_names
    requests: dict[str, Any] = {"cpu": f"{pod.cpu_milli}m"}
    if pod.memory_mib:
        requests["memory"] = f"{pod.memory_mib}Mi"
    resources: dict[str, Any] = {"requests": requests}
    if pod.num_gpu:
        share = str(percent(pod.gpu_milli))
        resources["limits"] = {rn.gpu: str(pod.num_gpu), rn.gpucores: share,
                               rn.gpumem_percentage: share}
    annotations = {ann.USE_GPUTYPE: ",".join(pod.gpu_spec)} if pod.gpu_spec else {}
    annotations.update(extra or {})
    spec: dict[str, Any] = {"schedulerName": config.scheduler_name, "containers": [
        {"name": "main", "image": "trace", "resources": resources}]}
    if run_as_user is not None:
        spec["securityContext"] = {"runAsUser": run_as_user}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": namespace, "annotations": annotations},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def allocated_milli(pod: TracePod) -> int:
    """The milli-GPU the pod holds once placed (its shares as vgpu grants them)."""
    return pod.num_gpu * milli_of_percent(percent(pod.gpu_milli))
