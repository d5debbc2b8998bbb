"""GPUs the operator keeps away from vgpu on a node (``nodeagent.excludeDevices``, HAMi's
device-plugin ``filterdevices``): by UUID or NVML index. The agent neither advertises them
to the kubelet nor lists them in the node's inventory, so no pod of vgpu lands there; a
workload outside Kubernetes, or another device plugin, may use them. HAMi's per-node
``nodeconfig`` lists become UUIDs here (they are per node by nature) or an index for
every node.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping

from vgpu.topology.links import GpuLink
from vgpu_nodeagent.devices.discovery import Discovery, FaultHandler, GpuFacts, GpuSample


def excluded(device: GpuFacts, entries: Collection[str]) -> bool:
    return device.uuid in entries or str(device.index) in entries


class Filtered:
    """A discovery backend without the excluded GPUs; everything else passes through."""

    def __init__(self, inner: Discovery, entries: Collection[str]) -> None:
        self._inner = inner
        self._entries = frozenset(e.strip() for e in entries if e.strip())
        self.name = inner.name

    def devices(self) -> tuple[GpuFacts, ...]:
        return tuple(d for d in self._inner.devices() if not excluded(d, self._entries))

    def links(self) -> tuple[GpuLink, ...] | None:
        links = self._inner.links()
        if links is None:
            return None
        kept = {d.uuid for d in self.devices()}
        return tuple(link for link in links if link.a in kept and link.b in kept)

    def refresh(self) -> bool:
        return self._inner.refresh()

    def samples(self) -> Mapping[str, GpuSample]:
        return self._inner.samples()

    def watch_faults(self, on_fault: FaultHandler, stop: threading.Event) -> None:
        self._inner.watch_faults(on_fault, stop)

    def cuda_driver_version(self) -> int | None:
        return self._inner.cuda_driver_version()

    def close(self) -> None:
        self._inner.close()


def filtered(inner: Discovery, entries: Collection[str]) -> Discovery:
    """``inner`` itself when nothing is excluded."""
    return Filtered(inner, entries) if entries else inner
