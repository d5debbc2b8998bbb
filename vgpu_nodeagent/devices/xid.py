"""Which NVML XID events mean a GPU is faulty, and the Xid lines of the kernel log.

An XID is the driver's error code for a GPU event. Some are caused by the application
running on the GPU (an illegal address, a killed context, ...) and leave the device fine;
marking the GPU unhealthy for those would let one buggy pod take a GPU away from everyone.
The list is the one NVIDIA's own device plugin and HAMi skip.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: 13 graphics engine exception, 31 GPU memory page fault, 43 GPU stopped processing,
#: 45 preemptive cleanup, 68 video processor exception, 109 context switch timeout:
#: all raised by what an application did, not by the device.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})


def is_device_fault(xid: int) -> bool:
    """True when the XID says the GPU itself is in trouble."""
    return xid not in APPLICATION_XIDS


# The driver prints each XID to the kernel log, with what NVML's event does not carry: the
# process whose channel faulted. ``NVRM: Xid (PCI:0000:3b:00): 31, pid=1234, name=python3,
# Ch 00000008, ...``; the pid is ``'<unknown>'`` where the driver cannot tell.
_XID_LINE = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})"
                       r"(?:\.[0-9A-Fa-f])?\): (\d+), pid=([^,]*), name=([^,]*)")


@dataclass(frozen=True)
class XidLine:
    """One Xid line of the kernel log: the GPU's PCI address (``0000:3b:00``), the XID,
    and the process it names (None when the driver could not tell)."""

    pci: str
    xid: int
    pid: int | None
    name: str


def pci_address(bus_id: str) -> str:
    """A PCI bus id in the one spelling Xid lines and NVML are compared in:
    ``00000000:3B:00.0`` and ``0000:3b:00`` are both ``0000:3b:00``."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{domain[-4:].zfill(4)}:{rest.partition('.')[0]}"


def parse_line(text: str) -> XidLine | None:
    """The Xid a kernel-log line reports, or None when it reports none."""
    found = _XID_LINE.search(text)
    if found is None:
        return None
    pid = found.group(3).strip()
    return XidLine(pci_address(found.group(1)), int(found.group(2)),
                   int(pid) if pid.isdigit() else None, found.group(4).strip())
