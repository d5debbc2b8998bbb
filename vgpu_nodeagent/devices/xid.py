"""Which NVML XID events mean a GPU is faulty.

An XID is the driver's error code for a GPU event. Some are caused by the application
running on the GPU (an illegal address, a killed context, ...) and leave the device fine;
marking the GPU unhealthy for those would let one buggy pod take a GPU away from everyone.
The list is the one NVIDIA's own device plugin and HAMi skip.
"""

from __future__ import annotations

#: 13 graphics engine exception, 31 GPU memory page fault, 43 GPU stopped processing,
#: 45 preemptive cleanup, 68 video processor exception, 109 context switch timeout:
#: all raised by what an application did, not by the device.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})


def is_device_fault(xid: int) -> bool:
    """True when the XID says the GPU itself is in trouble."""
    return xid not in APPLICATION_XIDS
