"""Virtual device IDs: ``split`` slots per physical GPU, as the kubelet sees them.

The kubelet counts ``nvidia.com/gpu`` in these slots (``<uuid>-<i>``); which slot a
container gets does not matter, only the physical GPU behind it, so the agent maps IDs back
to UUIDs and leaves slot bookkeeping to the kubelet.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from vgpu_nodeagent.devices.discovery import NUMA_UNKNOWN, GpuFacts

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"


@dataclass(frozen=True)
class PluginDevice:
    """One entry of a ListAndWatch answer."""

    id: str
    healthy: bool
    numa: int = NUMA_UNKNOWN

    @property
    def health(self) -> str:
        return HEALTHY if self.healthy else UNHEALTHY


def virtual_id(uuid: str, slot: int) -> str:
    return f"{uuid}-{slot}"


def physical_uuid(device_id: str, known: Collection[str]) -> str | None:
    """The GPU behind a virtual ID, or None when the ID is not one of ours."""
    head, sep, slot = device_id.rpartition("-")
    if not sep or not slot.isdigit() or head not in known:
        return None
    return head


def usable(facts: Iterable[GpuFacts]) -> tuple[GpuFacts, ...]:
    """GPUs the agent shares: MIG-enabled GPUs are left out, since their memory belongs to
    MIG instances that HAMi-core's limits do not apply to."""
    return tuple(f for f in facts if not f.mig)


def is_healthy(facts: GpuFacts, unhealthy: Collection[str]) -> bool:
    return facts.healthy and facts.uuid not in unhealthy


def plugin_devices(facts: Iterable[GpuFacts], unhealthy: Collection[str],
                   split: int) -> tuple[PluginDevice, ...]:
    """The ListAndWatch device list: ``split`` virtual IDs per GPU with its health and NUMA."""
    return tuple(
        PluginDevice(virtual_id(f.uuid, slot), is_healthy(f, unhealthy), f.numa)
        for f in facts for slot in range(split)
    )
