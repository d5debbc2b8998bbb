"""A GPU as a GPU choice policy sees it: one that fits one vGPU of a container."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.devices import Device, Usage


@dataclass(frozen=True, slots=True)
class GpuCandidate:
    """A GPU that fits one vGPU of a container.

    ``usage`` includes what earlier containers of the same pod just took there;
    ``capacity_mib`` is the GPU's schedulable memory (physical × the configured memory
    scaling), what a policy measures memory use against.
    """

    position: int
    device: Device
    usage: Usage
    memory_mib: int
    cores: int
    capacity_mib: int
