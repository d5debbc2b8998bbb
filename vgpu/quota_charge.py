"""The derived quota resources (docs/contracts.md#quota-resources): their names, and a
pod's charge as Kubernetes' quota admission counts it.

The webhook writes, on GPU pods, three extended resources that state what the pod really
holds, so that a namespace's ``ResourceQuota`` (``requests.vgpu.io/memory-mib``) caps GPU
memory, compute and vGPUs with Kubernetes' own quota admission. Every name here is under
``vgpu.io/``, owned by vgpu: no node advertises them, vgpu's scheduler accounts for GPUs
itself, and the kubelet drops requests for extended resources its node does not advertise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu.errors import QuantityError
from vgpu.pods import containers
from vgpu.quantity import parse_whole

#: What a ResourceQuota names them with: ``requests.`` + the name (extended resources
#: cannot be overcommitted, so Kubernetes quotas them by requests only).
QUOTA_PREFIX = "requests."
VGPUS = "vgpu.io/vgpus"
MEMORY = "vgpu.io/memory-mib"
CORES = "vgpu.io/cores"
#: The three, in the order they are shown.
NAMES = (VGPUS, MEMORY, CORES)


@dataclass(frozen=True)
class Charge:
    """vGPUs, MiB of GPU memory and percent of a GPU's compute, summed over vGPUs."""

    vgpus: int = 0
    memory_mib: int = 0
    cores: int = 0

    def __add__(self, other: Charge) -> Charge:
        return Charge(self.vgpus + other.vgpus, self.memory_mib + other.memory_mib,
                      self.cores + other.cores)

    def max(self, other: Charge) -> Charge:
        """Per resource, the larger of the two (how Kubernetes counts init containers)."""
        return Charge(max(self.vgpus, other.vgpus), max(self.memory_mib, other.memory_mib),
                      max(self.cores, other.cores))

    def resources(self) -> dict[str, str]:
        """The three as a ``resources.requests`` (and ``limits``) mapping: whole numbers,
        written as the API server prints them."""
        return {VGPUS: str(self.vgpus), MEMORY: str(self.memory_mib), CORES: str(self.cores)}

    def by_name(self) -> dict[str, int]:
        return {VGPUS: self.vgpus, MEMORY: self.memory_mib, CORES: self.cores}


NONE = Charge()


def _container_charge(container: Any) -> Charge:
    """The derived requests one container carries; a value that is not a whole number
    (the API server refuses one, so only a hand-made object has it) counts 0."""
    resources = container.get("resources") if isinstance(container, Mapping) else None
    requests = resources.get("requests") if isinstance(resources, Mapping) else None
    if not isinstance(requests, Mapping):
        return NONE
    values = []
    for name in NAMES:
        try:
            values.append(parse_whole(requests[name]) if name in requests else 0)
        except QuantityError:
            values.append(0)
    return Charge(*values)


def pod_charge(pod: Mapping[str, Any]) -> Charge:
    """What quota admission charges the pod for the three names.

    Kubernetes' rule (``resourcehelper.PodRequests``): the app containers and the sidecars
    (init containers with ``restartPolicy: Always``) add up; each other init container runs
    alone beside the sidecars started before it, and the pod takes the larger of the two.
    """
    apps = NONE
    sidecars = NONE
    inits = NONE
    for ref in containers(pod):
        charge = _container_charge(ref.container)
        if not ref.init:
            apps += charge
        elif ref.sidecar:
            sidecars += charge
            inits = inits.max(sidecars)
        else:
            inits = inits.max(charge + sidecars)
    return (apps + sidecars).max(inits)
