"""What a discovery backend tells the agent about the node's GPUs.

Two backends implement :class:`Discovery`: NVML (:mod:`vgpu_nodeagent.devices.nvml`) on a
GPU node and a file (:mod:`vgpu_nodeagent.devices.fake`) for tests, demos and GPU-less
clusters. The rest of the agent sees only these values, so everything above discovery runs
the same on both.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from vgpu.topology.links import GpuLink

#: NUMA node of a GPU whose node is unknown (single-socket machines, VMs).
NUMA_UNKNOWN = -1


@dataclass(frozen=True)
class GpuFacts:
    """One physical GPU as discovered. ``healthy`` is what the backend itself reports
    (the fake file's ``healthy`` key); XID faults are tracked separately."""

    uuid: str
    index: int
    model: str
    memory_mib: int
    numa: int = NUMA_UNKNOWN
    mig: bool = False
    healthy: bool = True
    #: PCI address, ``0000:3b:00`` (:func:`vgpu_nodeagent.devices.xid.pci_address`); empty
    #: where unknown. The kernel's Xid lines name a GPU by it.
    pci: str = ""
    #: The major of its CUDA compute capability (7 Volta, 8 Ampere, 9 Hopper); 0: unknown.
    #: MPS's per-client memory and compute limits need Volta or later.
    compute_major: int = 0


@dataclass(frozen=True)
class GpuProcess:
    """A process with a CUDA context on a GPU, and the device memory it holds (MiB;
    ``None`` where NVML cannot tell, e.g. without permission to see other processes)."""

    pid: int
    used_mib: int | None = None


@dataclass(frozen=True)
class GpuSample:
    """A GPU's live figures for the metrics; ``None`` when the backend cannot tell."""

    memory_used_mib: int | None = None
    utilization: int | None = None
    #: Running compute processes, for the usage watchdog.
    processes: tuple[GpuProcess, ...] = ()


#: Called with the UUID of a GPU that raised an XID (``None``: NVML could not say which)
#: and the XID, for every critical XID: the agent tells device faults from an
#: application's (:mod:`vgpu_nodeagent.devices.xid`), and the latter still end every
#: client of an MPS server on that GPU.
FaultHandler = Callable[[str | None, int], None]


class Discovery(Protocol):
    name: str

    def devices(self) -> tuple[GpuFacts, ...]:
        """The GPUs as last read, in index order."""
        ...

    def links(self) -> tuple[GpuLink, ...] | None:
        """The links between the GPUs of :meth:`devices` as last read; None when the
        backend does not know them (a fake file without ``links``)."""
        ...

    def refresh(self) -> bool:
        """Read again if the source may have changed; True when :meth:`devices` changed."""
        ...

    def samples(self) -> Mapping[str, GpuSample]:
        """Live memory use and utilization per UUID, read now."""
        ...

    def watch_faults(self, on_fault: FaultHandler, stop: threading.Event) -> None:
        """Report XIDs until ``stop`` is set (blocks; the agent runs it in a thread)."""
        ...

    def cuda_driver_version(self) -> int | None:
        """The CUDA version the driver supports, as NVML gives it (12040: 12.4); None when
        unknown. It picks the HAMi-core build the agent installs."""
        ...

    def close(self) -> None: ...
