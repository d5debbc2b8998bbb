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
refuses the pod for them.

A memory percentage is charged against the largest GPU the pod may land on, by the node
inventories the webhook knows (after its type and UUID annotations); with none known,
against ``quota.unknownGpuMemoryMib``, and with that unset the pod is refused rather than
under-charged.
"""

from __future__ import annotations

from vgpu.config import Config
from vgpu.devices import Device, percent_of
from vgpu.errors import RequestError
from vgpu.quota_charge import NONE, Charge
from vgpu.requests import ContainerRequest, ParsedPod, PodRequest
from vgpu_webhook.gpus import ClusterGpus

#: Where a container sits in the spec: ("containers" or "initContainers", position).
Place = tuple[str, int]


class UnknownGpuError(RequestError):
    """A percentage with no GPU known to charge it against."""


def memory_per_vgpu(request: ContainerRequest, parsed: PodRequest, config: Config,
                    gpus: ClusterGpus) -> int:
    """MiB one vGPU of the container is charged: its absolute size, or its percentage of
    the largest GPU it may land on (never less than it can be granted)."""
    if request.memory_mib is not None:
        return request.memory_mib
    percent = 100 if request.memory_percent is None else request.memory_percent
    scaling = config.device_memory_scaling
    kinds = gpus.candidates(parsed.choices.selector)
    if kinds:
        return max(percent_of(percent, kind.device(), scaling) for kind in kinds)
    fallback = config.quota.unknown_gpu_memory_mib
    if fallback > 0:
        return percent_of(percent, Device(uuid="", index=0, model="",
                                          memory_mib=fallback), scaling)
    names = config.resource_names
    raise UnknownGpuError(
        f"container {request.name!r}: asks for {percent}% of a GPU's memory "
        f"({names.gpumem_percentage}, or no {names.gpumem}), but no node inventory lists a "
        f"GPU it may land on, so its share cannot be charged to the namespace's quota "
        f"without under-counting; give {names.gpumem} in MiB, create it once a node agent "
        f"has published its GPUs, or have the operator set quota.unknownGpuMemoryMib")


def container_charge(request: ContainerRequest, mib_per_vgpu: int) -> Charge:
    return Charge(vgpus=request.count, memory_mib=request.count * mib_per_vgpu,
                  cores=request.count * request.cores)


def charges(parsed: ParsedPod, config: Config, gpus: ClusterGpus) -> dict[Place, Charge]:
    """The charge each container must carry; a container not in the answer carries none.

    Raises :class:`UnknownGpuError` where a percentage has no GPU to be charged against.
    """
    out: dict[Place, Charge] = {}
    first_app: Place | None = None
    from_inits = NONE
    for container in parsed.containers:
        place = (container.key, container.position)
        if first_app is None and not container.init:
            first_app = place
        request = container.request
        if request is None:
            continue
        charge = container_charge(request,
                                  memory_per_vgpu(request, parsed.request, config, gpus))
        if request.init:
            from_inits += charge
        else:
            out[place] = charge
    # A pod without app containers is refused by the API server's validation anyway.
    if first_app is not None and from_inits != NONE:
        out[first_app] = out.get(first_app, NONE) + from_inits
    return out
