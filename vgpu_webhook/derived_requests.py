"""A GPU pod's quota charges: the derived requests the webhook writes on its containers
(docs/contracts.md#quota-resources). Pure.

Each GPU container's charge is its true total: ``vgpu.io/vgpus`` = its vGPU count,
``vgpu.io/memory-mib`` = count × MiB per vGPU, ``vgpu.io/cores`` = count × ``gpucores``.
Where the containers carry them follows from two facts:

- vgpu keeps every GPU container's slices for the pod's whole life, init containers' too
  (each container gets its own slices, placed in start order), so what the pod holds is
  the sum over all its GPU containers;
- Kubernetes' quota admission sums the app containers (and the sidecars) but counts a
  plain init container only by the largest one, and kubelets before 1.31 refuse an init
  container asking for an extended resource their node does not advertise.

So each GPU app container carries its own charge, the GPU init containers' charges (plain
and sidecar) are added to the first app container's, and no init container carries any:
Kubernetes then charges exactly the sum, under both its counting rules, and no kubelet
refuses the pod for them. A plain init container whose slice fits inside the first GPU app
container's is placed on that container's GPUs (:func:`vgpu.init_reuse.nests`): the pod
holds nothing more for it, so it is charged nothing, and the pod's charge is what
Kubernetes counts for any other resource, the larger of init and app containers.

A memory percentage is charged against the largest GPU the pod may land on, as the webhook
knows the cluster's GPU types: the node inventories, the types seen before, the operator's
``quota.gpuTypes`` (after the pod's type and UUID annotations); with none known, against
``quota.unknownGpuMemoryMib``; with that unset too, the pod is refused where a quota of its
namespace caps ``vgpu.io/memory-mib`` (rather than under-charged) and otherwise charged no
memory, so that GPU pods created before their nodes exist wait for them.
"""

from __future__ import annotations

from vgpu.config import Config
from vgpu.devices import Device, percent_of
from vgpu.errors import RequestError
from vgpu.init_reuse import first_app as first_gpu_app
from vgpu.init_reuse import nests
from vgpu.quota_charge import NONE, Charge
from vgpu.requests import ContainerRequest, ParsedPod, PodRequest
from vgpu_webhook.gpus import ClusterGpus

#: Where a container sits in the spec: ("containers" or "initContainers", position).
Place = tuple[str, int]


class UnknownGpuError(RequestError):
    """A percentage with no GPU known to charge it against."""


def memory_per_vgpu(request: ContainerRequest, parsed: PodRequest, config: Config,
                    gpus: ClusterGpus, namespace: str = "") -> int:
    """MiB one vGPU of the container is charged: its absolute size, or its percentage of
    the largest GPU it may land on (never less than it can be granted)."""
    if request.memory_mib is not None:
        return request.memory_mib
    percent = 100 if request.memory_percent is None else request.memory_percent
    scaling = config.device_memory_scaling
    kinds = gpus.every_kind(parsed.choices.selector, config.quota.declared_gpus())
    if kinds:
        return max(percent_of(percent, kind.device(), scaling) for kind in kinds)
    fallback = config.quota.unknown_gpu_memory_mib
    if fallback > 0:
        return percent_of(percent, Device(uuid="", index=0, model="",
                                          memory_mib=fallback), scaling)
    if namespace not in gpus.capped:
        # No quota to fool: charged no memory, the pod waits for its GPU node.
        return 0
    names = config.resource_names
    raise UnknownGpuError(
        f"container {request.name!r}: asks for {percent}% of a GPU's memory "
        f"({names.gpumem_percentage}, or no {names.gpumem}), but no GPU it may land on is "
        f"known yet (no node inventory lists one, none was seen before, quota.gpuTypes "
        f"names none), and a ResourceQuota of namespace {namespace!r} caps "
        f"vgpu.io/memory-mib, so its share cannot be charged without under-counting; give "
        f"{names.gpumem} in MiB, create it once a GPU node has joined, or have the operator "
        f"set quota.gpuTypes")


def container_charge(request: ContainerRequest, mib_per_vgpu: int) -> Charge:
    return Charge(vgpus=request.count, memory_mib=request.count * mib_per_vgpu,
                  cores=request.count * request.cores)


def charges(parsed: ParsedPod, config: Config, gpus: ClusterGpus,
            namespace: str = "") -> dict[Place, Charge]:
    """The charge each container must carry; a container not in the answer carries none.

    Raises :class:`UnknownGpuError` where a percentage has no GPU to be charged against.
    """
    out: dict[Place, Charge] = {}
    first_app: Place | None = None
    from_inits = NONE
    app = first_gpu_app(parsed.request.containers)
    for container in parsed.containers:
        place = (container.key, container.position)
        if first_app is None and not container.init:
            first_app = place
        request = container.request
        if request is None:
            continue
        if request.runs_before_apps and nests(request, app):
            continue  # placed inside the first GPU app container's slices: nothing more
        charge = container_charge(request, memory_per_vgpu(request, parsed.request, config,
                                                           gpus, namespace))
        if request.init:
            from_inits += charge
        else:
            out[place] = charge
    # A pod without app containers is refused by the API server's validation anyway.
    if first_app is not None and from_inits != NONE:
        out[first_app] = out.get(first_app, NONE) + from_inits
    return out
